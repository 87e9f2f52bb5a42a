"""tools/gpu_report.py: the results page of a GPU run shows the figures of the files that came back, exactly, says
what failed and why, and puts the ranking's flip where its definition puts it.

tests/fixtures/gpu_rehearsal is what a CPU rehearsal returned (trimmed to the files the page reads):
`GPU_CHECK_CPU=1 GPU_GRID_JOBS=1 GPU_GRID_MODELS="transformer gru cnn" tools/gpu_check.sh tests published grid` at
profiles/smoke.yaml's sizes, with a carried folder holding only the default corpus, so the published part failed
for want of its own. Each test packs the parts' folders into tarballs as gpu_check.sh does.
"""
import importlib.util
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_report", ROOT / "tools" / "gpu_report.py")
gpu_report = sys.modules["gpu_report"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up there
spec.loader.exec_module(gpu_report)
REHEARSAL = ROOT / "tests" / "fixtures" / "gpu_rehearsal"


def returned(folder: Path, parts: Path = REHEARSAL) -> Path:
    """folder as $OUT comes back: summary.txt and a <part>.tar.gz of each part's folder."""
    folder.mkdir(parents=True)
    shutil.copy(parts / "summary.txt", folder)
    for part in parts.iterdir():
        if part.is_dir():
            with tarfile.open(folder / f"{part.name}.tar.gz", "w:gz") as tar:
                tar.add(part, arcname=part.name)
    return folder


def written(tmp_path: Path, *folders: Path, kind: str = "h100") -> str:
    assert gpu_report.main([*map(str, folders), "--kind", kind, "--results", str(tmp_path / "results")]) == 0
    return (tmp_path / "results" / f"2026-11-26-gpu-{kind}.md").read_text()


def row(page: str, first_cell: str, section: str = "# ") -> list[str]:
    """The cells of the first table row that opens with first_cell, in the section of page with that heading."""
    line = next(line for line in page.partition(section)[2].splitlines() if line.startswith(f"| {first_cell} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.fixture
def rehearsal(tmp_path) -> Path:
    """An editable copy of the rehearsal's parts."""
    return Path(shutil.copytree(REHEARSAL, tmp_path / "parts"))


def test_every_run_of_the_grid_shows_its_files_figures(tmp_path):
    page = written(tmp_path, returned(tmp_path / "out"))
    # eval.json's BLEU and BLEU lc tok, comparison.json's interval and p against the baseline, train.json's epochs
    # and tokens/s (one at once: alone), eval.json's sentences/s; stopped_by is not in these train.json files yet
    assert row(page, "Model", "## The grid")[-2:] == ["Train target tokens/s (alone)",
                                                      "Decoding sentences/s (test_2016_flickr)"]
    assert row(page, "transformer") == ["transformer", "0.01", "[0.01, 0.01]", "baseline", "0.01",
                                        "0.01", "[0.01, 0.01]", "baseline", "0.01", "1", "not recorded", "8,752",
                                        "448.1"]
    assert row(page, "gru") == ["gru", "0.00", "[0.00, 0.00]", "0.0099", "0.01", "0.01", "[0.01, 0.01]", "0.0099",
                                "0.01", "1", "not recorded", "2,262", "176.2"]
    assert "(100 resamples) against the baseline, transformer, from the compare stage" in page
    assert "| code | commit 6e3dcb1f7a, with uncommitted changes |" in page  # train.json's provenance
    assert "torch 2.13.0+cpu" in page and "# A CPU rehearsal of the GPU run (h100)" in page
    assert "0 passed, 0 failed, 0 error, 19 skipped of 19 GPU tests." in page
    assert row(page, "tests.test_gpu::test_ddp_on_one_gpu") == ["tests.test_gpu::test_ddp_on_one_gpu", "skipped",
                                                                "needs a CUDA GPU"]
    png = (tmp_path / "results" / "2026-11-26-gpu-h100-flops.png").read_bytes()
    assert png.startswith(b"\x89PNG") and "](2026-11-26-gpu-h100-flops.png)" in page


def test_a_figure_changed_in_its_file_changes_on_the_page_and_stopped_by_is_shown(tmp_path, rehearsal):
    run = rehearsal / "grid" / "metrics" / "cnn" / "seed1"
    scores = json.loads((run / "eval.json").read_text())
    scores["test_2017_flickr"]["bleu_lc_tok"] = 37.3
    (run / "eval.json").write_text(json.dumps(scores))
    train = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**train, "epochs": 23, "stopped_by": "early_stopping"}))
    cells = row(written(tmp_path, returned(tmp_path / "out", rehearsal)), "cnn")
    assert (cells[8], cells[9], cells[10]) == ("37.30", "23", "early stopping")


def test_a_failed_part_says_what_failed_and_why(tmp_path):
    page = written(tmp_path, returned(tmp_path / "out"))
    assert ("| parts | setup: not in what came back (no line in summary.txt, no tarball); tests: passed (11 s of "
            "300); published: FAILED, exit 1 (66 s); probe: not in what came back") in page
    assert "**published: FAILED, exit 1 (66 s)**" in page
    assert ("- `train@transformer_tiny-1` failed; the end of logs/train@transformer_tiny-1.log:\n\n  ```\n"
            "  nmtbench train: error: data/tokenized/vocab.json is missing; run the tokenize stage first "
            "(dvc repro tokenize)\n  ```") in page
    assert "- Not evaluated, so without scores: transformer_tiny, gru_attention, lstm_attention_general." in page
    # the papers' figures stay beside dashes: nothing of ours came back
    assert row(page, "transformer_tiny")[:6] == ["transformer_tiny", "test_2016_flickr", "-", "41.02", "-", "-"]
    assert row(page, "gru_attention")[3] == "37.30"
    assert "**probe: not in what came back (no line in summary.txt, no tarball)**" in page


def test_the_papers_recipes_sit_beside_the_published_figures(tmp_path, rehearsal):
    """The published part's runs as the grid's are: the grid's transformer's files stand in for transformer_tiny's."""
    shutil.copytree(rehearsal / "grid" / "metrics" / "transformer", rehearsal / "published" / "metrics" /
                    "transformer_tiny")
    run = rehearsal / "published" / "metrics" / "transformer_tiny" / "seed1"
    scores = json.loads((run / "eval.json").read_text())
    scores["test_2016_flickr"]["bleu_lc_tok"] = 40.5
    (run / "eval.json").write_text(json.dumps(scores))
    page = written(tmp_path, returned(tmp_path / "out", rehearsal))
    assert row(page, "transformer_tiny")[:7] == ["transformer_tiny", "test_2016_flickr", "40.50", "41.02", "-0.52",
                                                 "1", "not recorded"]


def test_a_part_of_a_later_call_replaces_the_earlier_ones_and_setup_names_the_gpu(tmp_path, rehearsal):
    first = returned(tmp_path / "call1")
    second = rehearsal.parent / "second"
    (second / "setup").mkdir(parents=True)
    # setup's lines as gpu_check.sh's check_machine prints them and nvidia-smi's header: hand-made, no GPU ran here
    (second / "setup" / "part.log").write_text(
        "versions: torch 2.11.0+cu130, lightning 2.6.6, pydantic 2.14.3\n"
        "GPU: NVIDIA H100 80GB HBM3, 79 GiB, capability 9.0, 132 SMs, bf16 True, CUDA 13.0, bf16 matmul finite: True;"
        " timing: import torch 9.1 s\n")
    (second / "setup" / "machine.txt").write_text(
        "| NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: 13.0     |\n")
    (second / "summary.txt").write_text("gpu_check: parts setup grid; GPU, 100 s in all; commit unknown, "
                                        "2026-11-27T10:00:00Z\nsetup: passed (41 s of 60)\n    versions: torch\n"
                                        "grid: not run, 20 s left\n")
    page = written(tmp_path, first, returned(tmp_path / "call2", second))
    assert "| date | 2026-11-26 |" in page  # the first call's
    assert ("| machine | GPU: NVIDIA H100 80GB HBM3, 79 GiB, capability 9.0, 132 SMs, bf16 True, CUDA 13.0, bf16 "
            "matmul finite: True; driver 580.65.06, CUDA 13.0; torch 2.11.0+cu130 |") in page
    assert "setup: passed (41 s of 60); tests: passed (11 s of 300)" in page
    # the second call did not run the grid: the first call's stays
    assert "grid: passed (371 s of 900)" in page and row(page, "cnn", "## The grid")[-2:] == ["5,039", "260.2"]


def test_a_page_written_before_is_kept_unless_forced(tmp_path):
    out = returned(tmp_path / "out")
    page = tmp_path / "results" / "2026-11-26-gpu-h200.md"
    page.parent.mkdir()
    page.write_text("kept")
    with pytest.raises(SystemExit, match="exists; pass --force"):
        gpu_report.main([str(out), "--kind", "h200", "--results", str(page.parent)])
    assert page.read_text() == "kept"
    assert gpu_report.main([str(out), "--kind", "h200", "--results", str(page.parent), "--force"]) == 0
    assert page.read_text().startswith("# A CPU rehearsal")
    with pytest.raises(SystemExit, match="summary.txt not found"):
        gpu_report.main([str(tmp_path), "--kind", "h100"])


# val BLEU against training FLOPs of seed 42 in docs/results/2026-11-26-published-cpu.md: the GRU ahead at first
TRANSFORMER = [(7.64e12, 0.14), (1.53e13, 3.04), (2.29e13, 9.09), (3.06e13, 16.05), (3.82e13, 20.92),
               (4.58e13, 24.51), (5.35e13, 24.06), (6.11e13, 27.58), (6.87e13, 28.3), (7.64e13, 28.91),
               (8.40e13, 28.72), (9.17e13, 30.81), (9.93e13, 30.75), (1.07e14, 32.26), (1.15e14, 31.48),
               (1.20e14, 32.94)]
GRU = [(1.02e13, 5.51), (2.04e13, 14.34), (3.06e13, 17.4), (4.08e13, 22.61), (5.11e13, 24.79), (6.13e13, 22.89),
       (7.15e13, 25.49), (8.17e13, 27.03), (9.19e13, 28.39), (1.02e14, 28.12), (1.12e14, 29.57), (1.20e14, 28.53)]


def test_the_ranking_flips_for_good_at_the_validation_the_definition_names():
    # the Transformer leads at 4.58e13 (24.51 against 22.61), the GRU at 5.11e13 and 5.35e13 (24.79), and the
    # Transformer at every validation from 6.11e13 on: the first lead is not for good, the second is
    flip = gpu_report.ranking_flip({"rnn": GRU, "transformer": TRANSFORMER, "cnn": [(1e13, 3.0), (1e14, 20.0)]})
    assert flip == {"families": ["transformer", "rnn"], "leader": "transformer", "flops": 6.11e13,
                    "standing": {"transformer": 27.58, "rnn": 24.79}}
    assert gpu_report.flip_text(flip).startswith("**The ranking flips at 6.11e+13 training FLOPs**: rnn leads at "
                                                 "some validation before it, transformer at every validation")


def test_no_flip_where_one_family_leads_throughout_or_the_two_end_level():
    ahead = gpu_report.ranking_flip({"rnn": [(1.0, 5.0), (3.0, 9.0)], "transformer": [(2.0, 1.0), (4.0, 8.0)]})
    assert (ahead["leader"], ahead["flops"]) == ("rnn", None)  # from 2.0, where both have validated, rnn leads
    level = gpu_report.ranking_flip({"rnn": [(1.0, 5.0), (3.0, 9.0)], "transformer": [(2.0, 6.0), (4.0, 9.0)]})
    assert (level["leader"], level["flops"]) == (None, None)
    assert "end level" in gpu_report.flip_text(level)
    assert gpu_report.flip_text(gpu_report.ranking_flip({"rnn": GRU})).startswith("Fewer than two families")
