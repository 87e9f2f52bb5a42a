"""The bf16 quality benchmark: its verdict on made-up seeds, and a real run of it on the tiny trained project."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.project import pipeline_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bf16_quality.py"
spec = importlib.util.spec_from_file_location("bf16_quality", SCRIPT)
bf16_quality = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bf16_quality)


def test_the_verdict_is_whether_the_mean_lies_within_the_range_of_fp32s_seeds():
    fp32 = [25.0, 26.5, 25.8]
    assert bf16_quality.within_spread(fp32, [25.2, 26.0, 26.1])  # mean 25.77
    assert bf16_quality.within_spread(fp32, [26.5, 26.5])  # the edge counts as within
    assert not bf16_quality.within_spread(fp32, [24.0, 25.1, 25.0])  # mean 24.70
    assert not bf16_quality.within_spread(fp32, [27.0])
    with pytest.raises(ValueError, match="at least two seeds"):
        bf16_quality.within_spread([25.0], [25.0])


def test_the_summary_gives_each_precisions_seeds_mean_sd_and_tokens_per_second():
    run = lambda bleu, tokens: {"best_val_bleu": bleu, "train_tokens_per_s": tokens, "steps": 699}  # noqa: E731
    rows = bf16_quality.summary({"32-true": {43: run(26.0, 1000.0), 42: run(24.0, 1200.0)},
                                 "bf16-mixed": {42: run(25.0, 2000.0)}})
    assert rows["32-true"] == {"val_bleu": [24.0, 26.0], "mean": 25.0, "sd": pytest.approx(2 ** 0.5),
                               "tokens_per_s": 1100.0, "steps": [699]}
    assert rows["bf16-mixed"]["sd"] == 0.0 and rows["bf16-mixed"]["val_bleu"] == [25.0]


@pytest.mark.slow
def test_both_precisions_train_to_the_same_step_and_a_rerun_reads_the_runs_back(trained_copy, tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, str(SCRIPT), "--models", "tiny", "--seeds", "1", "2", "--jobs", "2",
               "--flops", "2e7", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, env=pipeline_env(WANDB_MODE="disabled"))
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())["tiny"]
    assert summary["32-true"]["steps"] == summary["bf16-mixed"]["steps"]  # one budget, one step for both
    assert len(summary["32-true"]["val_bleu"]) == len(summary["bf16-mixed"]["val_bleu"]) == 2
    fp32 = summary["32-true"]["val_bleu"]
    assert summary["bf16-mixed"]["within_fp32_spread"] == bf16_quality.within_spread(
        fp32, summary["bf16-mixed"]["val_bleu"])
    assert {json.loads((out / precision / "metrics/tiny/seed1/train.json").read_text())["precision"]
            for precision in ("32-true", "bf16-mixed")} == {"32-true", "bf16-mixed"}  # each trained in its own
    trained = sorted(out.glob("*/models/tiny/seed*/best.ckpt"))
    assert len(trained) == 4 and not (trained_copy / "metrics" / "tiny" / "seed1").exists()  # only under --out
    stamps = [path.stat().st_mtime_ns for path in trained]
    again = subprocess.run(command, capture_output=True, text=True, env=pipeline_env(WANDB_MODE="disabled"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert [path.stat().st_mtime_ns for path in trained] == stamps  # read back, not trained again
    assert json.loads((out / "summary.json").read_text())["tiny"] == summary


def test_no_tokenized_data_is_one_line_naming_the_stage_to_run(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--tokenized-dir", str(tmp_path / "none")],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"bf16_quality: error: no tokenized data in {tmp_path / 'none'}; run `dvc repro tokenize` first"]
