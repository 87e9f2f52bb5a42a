"""End to end: profiles/published.yaml through `dvc repro compare` on a slice of the real Multi30k, its models at
tiny sizes: the papers' tokens reach every stage, each model trains by its own recipe, and the comparison sets
the published figures beside ours."""
import gzip
import json
import os

import pytest
import yaml

from helpers.project import ROOT, pipeline_workspace
from nmtbench.data.preprocess import moses_lowercase
from nmtbench.profiles import merge

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
# at tiny sizes, and each recipe stopped after its own number of updates, which train.json must show
TINY = {"data": {"max_train_pairs": 300, "max_eval_pairs": 15}, "tokenize": {"vocab_size": 400},
        "train": {"max_epochs": 1, "val_bleu_sentences": 10},
        "evaluate": {"max_len_a": 1.0, "max_len_b": 5},
        "compare": {"bootstrap_resamples": 20, "examples": [0]},
        "models": {"transformer_tiny": {"d_model": 16, "d_ff": 32, "heads": 2, "layers": 1,
                                        "train": {"max_steps": 3, "batch_tokens": 512, "accumulate_grad_batches": 1,
                                                  "average_last": 0, "warmup_steps": 2}},
                   "gru_attention": {"embed_dim": 16, "hidden_dim": 16,
                                     "train": {"max_steps": 5, "batch_tokens": 512}}}}


def test_the_published_profile_trains_each_recipe_on_the_papers_tokens_and_quotes_the_papers(tmp_path):
    mirror = os.environ.get("NMTBENCH_DATA_MIRROR")
    if not mirror:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder (make test does when one is beside the "
                    "checkout)")
    profile = tmp_path / "published_tiny.yaml"
    profile.write_text(yaml.safe_dump(merge(yaml.safe_load((ROOT / "profiles/published.yaml").read_text()), TINY)))
    workspace = tmp_path / "workspace"
    run = pipeline_workspace(workspace, profile, WANDB_MODE="disabled")
    run("dvc", "repro", "compare")

    steps = {name: json.loads((workspace / f"metrics/{name}/seed42/train.json").read_text())["steps"]
             for name in ("transformer_tiny", "gru_attention")}
    assert steps == {"transformer_tiny": 3, "gru_attention": 5}  # each block's own train: recipe reached training
    with gzip.open(f"{mirror}/test_2016_flickr.de.gz", "rt", encoding="utf-8") as raw:
        first = raw.readline().rstrip("\n")
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    assert comparison["examples"]["test_2016_flickr"][0]["reference"] == moses_lowercase(first, "de")
    assert comparison["signatures"]["bleu_lc_tok"] == [
        "moses-lc-text:de|nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0"]
    published = comparison["published"]
    assert {name: (row["published"], row["split"]) for name, row in published.items()} == {
        "transformer_tiny": (41.02, "test_2016_flickr"), "gru_attention": (37.3, "test_2016_flickr")}
    for name, row in published.items():
        assert row["ours"] == comparison["models"][name]["test_2016_flickr"]["bleu_lc_tok"]
    table = (workspace / "results/comparison.md").read_text()
    assert "## Beside the published figures" in table and "The papers' setting (data.preprocess" in table
