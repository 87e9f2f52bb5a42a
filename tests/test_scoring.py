import json
import subprocess
import sys
from pathlib import Path

import pytest

from nmtbench.evaluation.scoring import SCORES, bleu, score

HYPOTHESES = ["The cat sat on the mat.", "a dog runs", "the bird sings."]
REFERENCES = ["The cat sat on a mat.", "The dog runs fast.", "The bird sings."]


def sacrebleu_cli(tmp_path, hypotheses, references, *options):
    """Score with the sacrebleu command line, the reference implementation users will compare against."""
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("\n".join(hypotheses) + "\n")
    ref.write_text("\n".join(references) + "\n")
    cli = Path(sys.executable).with_name("sacrebleu")
    out = json.loads(subprocess.run([str(cli), str(ref), "-i", str(hyp), *options, "-f", "json", "-w", "2"],
                                    check=True, capture_output=True, text=True).stdout)
    return out if isinstance(out, list) else [out]  # one metric prints one object, several a list


def test_identical_corpus_scores_100():
    result = score(REFERENCES, REFERENCES)
    assert (result["bleu"], result["bleu_lc"], result["chrf"], result["ter"]) == (100.0, 100.0, 100.0, 0.0)


def test_matches_sacrebleu_command_line(tmp_path):
    bleu_cli, chrf, ter = sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "-m", "bleu", "chrf", "ter")
    (bleu_lc,) = sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "-m", "bleu", "-lc")
    result = score(HYPOTHESES, REFERENCES)
    expected = {"bleu": bleu_cli, "bleu_lc": bleu_lc, "chrf": chrf, "ter": ter}
    assert result == {**{key: out["score"] for key, out in expected.items()},
                      **{f"{key}_signature": out["signature"] for key, out in expected.items()},
                      "bleu_breakdown": bleu_cli["verbose_score"]}
    assert set(SCORES) == set(expected)
    assert "case:mixed" in result["bleu_signature"] and "tok:13a" in result["bleu_signature"]
    assert "case:lc" in result["bleu_lc_signature"] and "tok:13a" in result["bleu_lc_signature"]


def test_known_small_case():
    # Figures from `sacrebleu ref.txt -i hyp.txt -m bleu chrf ter -w 2` (and `-m bleu -lc`), pinned so a change
    # of default shows up here.
    result = score(HYPOTHESES, REFERENCES)
    assert isinstance(result["bleu"], float)
    assert (result["bleu"], result["bleu_lc"], result["chrf"], result["ter"]) == (38.15, 51.51, 67.17, 23.08)


def test_breakdown_tells_a_short_output_from_wrong_words():
    # the same words, the second sentence cut short: every n-gram still matches, only the brevity penalty falls,
    # to exp(1 - 12 / 8) for 8 tokens against 12
    result = score(["a man rides a horse .", "two dogs"], ["a man rides a horse .", "two dogs play in snow ."])
    assert result["bleu_breakdown"] == ("100.0/100.0/100.0/100.0 (BP = 0.607 ratio = 0.667 hyp_len = 8 "
                                        "ref_len = 12)")
    assert result["bleu"] == 60.65


def test_bleu_is_cased_and_bleu_lc_is_not():
    result = score(["the cat sat on the mat ."], ["The cat sat on the mat ."])
    assert result["bleu"] < 100.0 and result["bleu_lc"] == 100.0


def test_bleu_alone_equals_the_headline_score():
    assert bleu(HYPOTHESES, REFERENCES) == score(HYPOTHESES, REFERENCES)["bleu"]
    assert bleu(HYPOTHESES[1:], REFERENCES[1:]) == score(HYPOTHESES[1:], REFERENCES[1:])["bleu"]


@pytest.mark.parametrize("scorer", [score, bleu])
def test_length_mismatch_is_one_clear_line(scorer):
    with pytest.raises(ValueError, match="cannot score 3 hypotheses against 1 references") as error:
        scorer(HYPOTHESES, REFERENCES[:1])
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("scorer", [score, bleu])
def test_empty_corpus_is_refused(scorer):
    with pytest.raises(ValueError, match="nothing to score"):
        scorer([], [])


def moses_cli(tmp_path, lines, lang):
    """Lowercased lines through the sacremoses command line (no escaping), as Multi30k papers preprocess."""
    cli = Path(sys.executable).with_name("sacremoses")
    text = "".join(line.lower() + "\n" for line in lines)
    out = subprocess.run([str(cli), "-l", lang, "-j", "1", "tokenize"], input=text, check=True, capture_output=True,
                         text=True).stdout
    return out.splitlines()


def test_published_convention_bleu_is_multi_bleu_on_moses_tokenized_lowercased_text(tmp_path):
    hypotheses = ["Ein Mann's Hund, der über Steine springt.", "Zwei Kinder spielen im Schnee."]
    references = ["Der Hund eines Mannes springt über Steine.", "Zwei kinder spielen im Schnee!"]
    (expected,) = sacrebleu_cli(tmp_path, moses_cli(tmp_path, hypotheses, "de"), moses_cli(tmp_path, references, "de"),
                                "-m", "bleu", "-tok", "none", "--force")
    result = score(hypotheses, references, lang="de")
    assert result["bleu_lc_tok"] == expected["score"] == 30.84
    assert result["bleu_lc_tok_signature"] == "moses-tok:de|lc|" + expected["signature"]
    assert result["bleu_lc_tok"] != result["bleu_lc"]  # 13a splits "Mann's" otherwise than Moses does
    assert result["bleu_lc_tok_breakdown"] == expected["verbose_score"]
    assert "bleu_lc_tok" not in score(hypotheses, references)  # only where the target language is known


def test_the_papers_tokens_are_scored_as_they_are_like_multi_bleu(tmp_path):
    # lowercased Moses tokens on both sides (data.preprocess moses_lowercase): BLEU on the tokens as written,
    # which tokenizing them again would change ("'s" becomes "' s")
    hypotheses = ["ein mann 's hund , der über steine springt .", "zwei kinder spielen im schnee ."]
    references = ["der hund eines mannes 's springt über steine .", "zwei kinder spielen im schnee !"]
    (expected,) = sacrebleu_cli(tmp_path, hypotheses, references, "-m", "bleu", "-tok", "none", "--force")
    result = score(hypotheses, references, lang="de", tokenized=True)
    assert result["bleu_lc_tok"] == expected["score"] == 34.02
    assert result["bleu_lc_tok_signature"] == "moses-lc-text:de|" + expected["signature"]
    assert result["bleu_lc_tok_breakdown"] == expected["verbose_score"]
    assert result["bleu_lc_tok"] != score(hypotheses, references, lang="de")["bleu_lc_tok"]
    assert all(result[f"{key}_signature"].startswith("moses-lc-text:de|nrefs:1|") for key in SCORES)
