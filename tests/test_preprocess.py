"""The papers' preprocessing (data.preprocess: moses_lowercase): exact tokens, and every split and side alike."""
import json

import pytest

from helpers.data import tiny_files
from helpers.project import write_tiny_project
from nmtbench.cli import main
from nmtbench.config import DataConfig
from nmtbench.data.prepare import load_prepared, prepare
from nmtbench.data.preprocess import moses_lowercase
from nmtbench.evaluation.scoring import SCORES, tokens_bleu

# Multi30k's first training pair, then lines with what the normaliser and the tokenizer change: quotes, dashes,
# ellipses, clitics, commas and the full stop, each checked token by token.
EXPECTED = [
    ("Two young, White males are outside near many bushes.", "en",
     "two young , white males are outside near many bushes ."),
    ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.", "de",
     "zwei junge weiße männer sind im freien in der nähe vieler büsche ."),
    ("A man's \"big\" dog, running.", "en", "a man 's \" big \" dog , running ."),
    ("Ein Mann – mit „großem“ Hund… läuft.", "de", "ein mann - mit \" großem \" hund ... läuft ."),
    ("Two dogs don't play.", "en", "two dogs don 't play ."),
]


@pytest.mark.parametrize(("line", "lang", "tokens"), EXPECTED)
def test_moses_lowercase_gives_the_tokens_of_multi30ks_tokenized_release(line, lang, tokens):
    assert moses_lowercase(line, lang) == tokens


def test_is_not_idempotent_so_tokens_are_never_tokenized_again():
    # Moses splits the clitic of its own output once more: scoring.score(tokenized=True) takes tokens as they are
    assert moses_lowercase("a man 's dog", "en") == "a man ' s dog"


def test_prepare_preprocesses_every_split_and_both_sides(make_data_mirror, tmp_path):
    files = {f"{split}.{lang}.gz": lines for split in ("train", "val", "test_2016_flickr", "test_2017_flickr")
             for lang, lines in (("en", ["A man's dog, running.", "Two cats."]),
                                 ("de", ["Ein Mann – mit „großem“ Hund.", "Zwei Katzen."]))}
    mirror, checksums = make_data_mirror(files)
    stats = prepare(DataConfig(preprocess="moses_lowercase"), mirror, tmp_path / "prepared", tmp_path / "stats.json",
                    tmp_path / "raw", checksums)
    dataset = load_prepared(tmp_path / "prepared")
    for split in dataset:
        assert dataset[split].to_dict() == {"src": ["a man 's dog , running .", "two cats ."],
                                            "tgt": ["ein mann - mit \" großem \" hund .", "zwei katzen ."]}
    assert stats["preprocess"] == "moses_lowercase"
    assert stats["splits"]["train"]["src"]["tokens"] == 10  # counted on the tokens trained on (raw text: 6)


def test_an_unknown_preprocessing_is_refused_naming_the_choices():
    with pytest.raises(Exception, match="data.preprocess.*none.*moses_lowercase"):
        DataConfig(preprocess="moses")


def test_a_model_trained_on_the_papers_tokens_is_scored_on_them_as_multi_bleu_would(make_data_mirror, tmp_path,
                                                                                   monkeypatch):
    mirror, checksums = make_data_mirror()
    write_tiny_project(tmp_path, mirror, checksums, data={"preprocess": "moses_lowercase"})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(["train", "tiny"]) == 0 and main(["evaluate", "tiny"]) == 0
    references = load_prepared(tmp_path / "data/prepared")["test_2016_flickr"]["tgt"]
    assert references == [moses_lowercase(line, "de") for line in tiny_files()["test_2016_flickr.de.gz"]]
    hypotheses = (tmp_path / "results/tiny/seed42/test_2016_flickr.txt").read_text().splitlines()
    scores = json.loads((tmp_path / "metrics/tiny/seed42/eval.json").read_text())["test_2016_flickr"]
    assert (scores["bleu_lc_tok"], scores["bleu_lc_tok_signature"]) == (
        round(tokens_bleu(hypotheses, references)[0].score, 2),
        "moses-lc-text:de|" + tokens_bleu(hypotheses, references)[1])
    assert all(scores[f"{key}_signature"].startswith("moses-lc-text:de|") for key in SCORES)
