"""End to end: the files and hub sources through `dvc repro` on tiny made-up corpora with test splits of their
own names, which must reach evaluate, compare, the beam sweep and the report; the files source's run with one
sentencepiece model per side (tokenize.joint: false), the analyze stage included."""
import gzip
import json

import pytest
import yaml
from datasets import Dataset

from helpers.project import ROOT, pipeline_workspace
from nmtbench.data.sources import sha256

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
ZIFFERN = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]


def pairs(count: int, start: int) -> list[tuple[str, str]]:
    """Made-up en-de pairs: a number spelt digit by digit in each language."""
    numbers = [str(n * 7919 % 100000) for n in range(start, start + count)]
    return [(" ".join(DIGITS[int(d)] for d in n), " ".join(ZIFFERN[int(d)] for d in n)) for n in numbers]


SPLITS = {"train": pairs(400, 0), "val": pairs(20, 1000), "heldout": pairs(12, 2000)}
# one model: what these runs check is that the source's splits reach every stage (each family's decoding is the
# unit tests' and the smoke pipeline's), and each model costs three stages
TINY_MODELS = {"transformer": {"family": "transformer", "d_model": 32, "heads": 2, "layers": 1, "d_ff": 64}}


def profile(tmp_path, source: dict, tokenize: dict | None = None) -> object:
    """The smoke profile with this source and its test split heldout, and one tiny model."""
    overrides = yaml.safe_load((ROOT / "profiles/smoke.yaml").read_text())
    overrides["data"] = {"source": source, "src_lang": "en", "tgt_lang": "de", "eval_splits": ["heldout"],
                         "max_eval_pairs": None}
    overrides["train"].update({"max_epochs": 2, "budget": {"kind": "time", "value": 30}, "val_bleu_sentences": 0})
    overrides["tune"]["trials"] = 0  # tuning is the smoke pipeline's to cover; these runs check the data sources
    overrides.update({"tokenize": tokenize or {"vocab_size": 300}, "replace": ["models"], "models": TINY_MODELS,
                      "compare": {"bootstrap_resamples": 20, "examples": [0, 1]}})
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(overrides, sort_keys=False))
    return path


def assert_heldout_reaches_every_stage(workspace):
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    assert comparison["splits"] == ["heldout"]
    assert list(comparison["models"]) == list(TINY_MODELS)
    for row in comparison["models"].values():
        assert sum(bucket["sentences"] for bucket in row["heldout"]["length_buckets"].values()) == 12
    assert [example["index"] for example in comparison["examples"]["heldout"]] == [0, 1]
    assert "## Example translations: heldout" in (workspace / "results/comparison.md").read_text()
    for model in TINY_MODELS:
        assert list(json.loads((workspace / f"metrics/{model}/seed42/eval.json").read_text())) == [
            "heldout", "provenance"]
        assert json.loads((workspace / f"metrics/{model}/seed42/attention.json").read_text())["split"] == "heldout"
        assert len((workspace / f"results/{model}/seed42/heldout.txt").read_text().splitlines()) == 12
    assert json.loads((workspace / "results/beam_sweep.json").read_text())["split"] == "heldout"
    assert "<th>heldout</th>" in (workspace / "results/report.html").read_text()


@pytest.mark.slow
@pytest.mark.e2e
def test_files_source_runs_the_pipeline_and_reruns_prepare_when_the_corpus_changes(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, rows in SPLITS.items():
        for lang, side in (("en", 0), ("de", 1)):
            text = "".join(row[side] + "\n" for row in rows).encode()
            if split == "heldout":
                (corpus / f"{split}.{lang}.gz").write_bytes(gzip.compress(text, mtime=0))
            else:
                (corpus / f"{split}.{lang}").write_bytes(text)
    workspace = tmp_path / "workspace"
    per_side = {"joint": False, "vocab_size": 290, "target_vocab_size": 300}  # one sentencepiece model per side
    run = pipeline_workspace(workspace, profile(tmp_path, {"kind": "files", "path": str(corpus)}, per_side),
                             WANDB_MODE="disabled")  # the smoke pipeline checks the W&B runs
    run("dvc", "repro")
    assert_heldout_reaches_every_stage(workspace)
    vocab = json.loads((workspace / "data/tokenized/vocab.json").read_text())
    assert (vocab["size"], vocab["target_size"]) == (290, 300)
    for model in TINY_MODELS:
        assert sorted(p.name for p in (workspace / f"models/{model}/seed42").iterdir()) == [
            "best.ckpt", "spm.src.model", "spm.tgt.model", "vocab.json"]
    assert json.loads((workspace / "results/claims.json").read_text())["verdicts"]  # the probe on both vocabularies
    stats = json.loads((workspace / "data/stats.json").read_text())
    assert stats["inputs"]["train.en"] == sha256(corpus / "train.en")
    assert stats["splits"]["train"]["lines"] == 400
    with (corpus / "train.en").open("a") as f, (corpus / "train.de").open("a") as g:
        f.write("one one\n")
        g.write("eins eins\n")
    assert "changed deps" in run("dvc", "status", "prepare").stdout  # the corpus folder is a dependency


@pytest.mark.slow
@pytest.mark.e2e
def test_hub_source_runs_the_pipeline(tmp_path):
    folder = tmp_path / "hub-dataset"  # laid out as the hub serves a dataset: parquet per split, translation column
    folder.mkdir()
    for split, theirs in (("train", "train"), ("val", "validation"), ("heldout", "test")):
        Dataset.from_dict({"translation": [{"en": en, "de": de} for en, de in SPLITS[split]]}).to_parquet(
            str(folder / f"{theirs}.parquet"))
    source = {"kind": "hub", "name": str(folder), "splits": {"val": "validation", "heldout": "test"}}
    workspace = tmp_path / "workspace"
    run = pipeline_workspace(workspace, profile(tmp_path, source), HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled",
                             HF_DATASETS_CACHE=str(tmp_path / "hf-cache"))
    run("dvc", "repro", "compare", "beam_sweep")  # all but the analyze stage, which the files test runs
    run("nmtbench", "report")
    assert_heldout_reaches_every_stage(workspace)
    stats = json.loads((workspace / "data/stats.json").read_text())
    assert list(stats["inputs"]) == [f"{folder}/{theirs}" for theirs in ("train", "validation", "test")]
