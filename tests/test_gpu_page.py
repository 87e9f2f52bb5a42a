"""nmtbench.gpu.page and returned_calls (nmtbench gpu report): the results page of a GPU run shows the figures of
the files that came back, exactly, says what failed and why, and puts the ranking's flip where its definition puts it.

tests/fixtures/gpu_rehearsal is what a CPU rehearsal returned (trimmed to the files the page reads):
`GPU_CHECK_CPU=1 GPU_GRID_JOBS=1 GPU_GRID_MODELS="transformer gru cnn" tools/gpu_check.sh tests published grid` at
profiles/smoke.yaml's sizes, with a carried folder holding only the default corpus, so the published part failed
for want of its own. Each test packs the parts' folders into tarballs as gpu_check.sh does.
"""
import gzip
import json
import shutil
import subprocess
import tarfile
import zlib
from pathlib import Path

import pytest

from nmtbench import cli
from nmtbench.gpu import page as gpu_page
from nmtbench.gpu import returned_calls
from nmtbench.param_blocks import ConfigError

ROOT = Path(__file__).resolve().parents[1]
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


def write(folders: list[Path], kind: str, results: Path, **options) -> tuple[Path, Path | None]:
    """The page written as nmtbench gpu report writes it, with this checkout's profiles/published.yaml."""
    return gpu_page.write_gpu_page(folders, kind, results=results, project=ROOT, **options)


def written(tmp_path: Path, *folders: Path, kind: str = "h100") -> str:
    page, _ = write(list(folders), kind, tmp_path / "results")
    assert page == tmp_path / "results" / f"2026-11-26-gpu-{kind}.md"
    return page.read_text()


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



def test_a_later_calls_more_is_the_grid_its_runs_went_on_in(tmp_path, rehearsal):
    """The part `more` packs the grid's folder again (grid.tar.gz) under its own summary line: the page shows the
    runs as it left them and both calls' lines."""
    first = returned(tmp_path / "call1")
    second = rehearsal.parent / "second"
    shutil.copytree(rehearsal / "grid", second / "grid")
    run = second / "grid" / "metrics" / "cnn" / "seed1"
    train = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**train, "epochs": 9, "stopped_by": "early_stopping"}))
    (second / "summary.txt").write_text("gpu_check: parts setup more; GPU, 100 s in all; commit unknown, "
                                        "2026-11-27T10:00:00Z\nmore: passed (60 s of 90)\n    1 of 3 runs go on\n")
    page = written(tmp_path, first, returned(tmp_path / "call2", second))
    assert "grid: passed (60 s of 90) as `more` in call 2, after grid: passed (371 s of 900)" in page
    assert row(page, "cnn", "## The grid")[9:11] == ["9", "early stopping"]

def test_a_page_written_before_is_kept_unless_forced(tmp_path):
    out = returned(tmp_path / "out")
    page = tmp_path / "results" / "2026-11-26-gpu-h200.md"
    page.parent.mkdir()
    page.write_text("kept")
    with pytest.raises(ConfigError, match="exists; pass --force"):
        write([out], "h200", page.parent)
    assert page.read_text() == "kept"
    assert write([out], "h200", page.parent, force=True)[0] == page
    assert page.read_text().startswith("# A CPU rehearsal")
    with pytest.raises(ConfigError, match="summary.txt not found"):
        write([tmp_path], "h100", tmp_path / "results")


def cut_short(packed: Path, inside: str) -> None:
    """packed as a call cut off halfway through its file `inside` leaves it: the gzip stream ends there, unclosed."""
    with tarfile.open(packed) as tar:
        member = tar.getmember(inside)
    stream = zlib.compressobj(wbits=31)  # gzip's framing
    data = gzip.decompress(packed.read_bytes())[:member.offset_data + member.size // 2]
    packed.write_bytes(stream.compress(data) + stream.flush(zlib.Z_SYNC_FLUSH))


def test_a_tarball_cut_short_gives_its_whole_files_and_one_line_on_what_is_missing(tmp_path, capsys):
    out = returned(tmp_path / "out")
    cut_short(out / "grid.tar.gz", "grid/part.log")  # the files before it sorted: gpu_runs.json, 9 of metrics, params
    page = written(tmp_path, out)
    line = "grid.tar.gz is cut short (EOFError); only its first 11 files came out, the rest is missing from this page"
    assert f"**Unreadable in what came back**, so missing or dashes below:\n\n- grid: {line}\n" in page
    assert capsys.readouterr().err == f"nmtbench gpu report: grid: {line}\n"
    # eval.json and train.json came out whole, comparison.json not at all
    assert row(page, "gru", "## The grid")[1:5] == ["0.00", "-", "-", "0.01"]
    assert "- 95% CI and p: dashes, for results/comparison.json did not come back whole (above)." in page


def test_a_file_the_cut_went_through_is_left_out_and_an_empty_tarball_is_named(tmp_path):
    out = returned(tmp_path / "out")
    cut_short(out / "grid.tar.gz", "grid/metrics/gru/seed1/learning_curve.csv")
    assert returned_calls.unpack(out / "grid.tar.gz", tmp_path / "x") == (
        "is cut short (EOFError); only its first 5 files came out, the rest is missing from this page")
    run = tmp_path / "x" / "grid" / "metrics" / "gru" / "seed1"
    assert (run / "eval.json").is_file() and not (run / "learning_curve.csv").exists()  # not a shorter curve
    (out / "tests.tar.gz").write_bytes(b"")
    assert returned_calls.unpack(out / "tests.tar.gz", tmp_path / "y") == (
        "is cut short (ReadError); all it held is missing from this page")


def test_json_files_cut_short_are_dashes_and_named_in_one_line(tmp_path, rehearsal):
    for path in ("grid/metrics/cnn/seed1/train.json", "grid/results/comparison.json", "grid/gpu_runs.json"):
        text = (rehearsal / path).read_text()
        (rehearsal / path).write_text("\n".join(text.splitlines()[:5]))
    page = written(tmp_path, returned(tmp_path / "out", rehearsal))
    assert ("- grid: metrics/cnn/seed1/train.json is cut short or damaged (JSONDecodeError at line 5); "
            "results/comparison.json is cut short or damaged (JSONDecodeError at line 5); gpu_runs.json is cut short "
            "or damaged (JSONDecodeError at line 5)\n") in page
    # cnn's eval.json stands (BLEU, sentences/s); its train.json's epochs, stopping and tokens/s are dashes, as is
    # every interval
    assert row(page, "cnn", "## The grid") == ["cnn", "0.00", "-", "-", "0.00", "0.00", "-", "-", "0.00", "-", "-",
                                               "-", "260.2"]
    assert "Train target tokens/s (trainings at once not recorded)" in page


def test_a_model_without_its_family_is_left_out_of_the_flip_and_named(tmp_path, rehearsal):
    params = rehearsal / "grid" / "params.yaml"
    params.write_text(params.read_text().replace("\n  cnn:\n    family: cnn\n", "\n  cnn:\n"))
    page = written(tmp_path, returned(tmp_path / "out", rehearsal))
    assert "- grid: params.yaml's models.cnn has no family, so the flip leaves its runs out\n" in page
    assert row(page, "cnn", "## The grid")[-2:] == ["5,039", "260.2"]  # its run is still on the page
    # still drawn
    assert "No flip: the rnn family leads the transformer family at every validation where both have validated" in page


def test_the_date_goes_through_make_and_make_names_what_it_needs(tmp_path, monkeypatch, capsys):
    out = returned(tmp_path / "out")
    (tmp_path / "profiles").mkdir()
    shutil.copy(ROOT / "profiles" / "published.yaml", tmp_path / "profiles")
    monkeypatch.chdir(tmp_path)  # the project: the current folder, its docs/results
    assert cli.main(["gpu", "report", str(out), "--kind", "h100", "--date", "2026-11-27"]) == 0
    page = tmp_path / "docs" / "results" / "2026-11-27-gpu-h100.md"
    assert capsys.readouterr().out == f"wrote {page.relative_to(tmp_path)} and 2026-11-27-gpu-h100-flops.png\n"
    assert page.read_text().count("| date | 2026-11-27 |") == 1
    assert cli.main(["gpu", "report", str(out), "--kind", "h100", "--date", "27-11-2026"]) == 2
    assert capsys.readouterr().err == ("nmtbench gpu report: error: --date '27-11-2026': give it as YYYY-MM-DD, e.g. "
                                       "2026-11-27\n")

    def make(*variables: str) -> subprocess.CompletedProcess:  # the target alone, never .venv's setup
        return subprocess.run(["make", "--no-print-directory", "-o", str(ROOT / ".venv" / ".installed"), "gpu-report",
                               *variables], cwd=ROOT, capture_output=True, text=True)

    refused = make()
    assert (refused.returncode, refused.stdout) == (2, 'make gpu-report: FROM= must name the call folders, in call '
                                                       'order, e.g. make gpu-report FROM="out/call1 out/call2" '
                                                       'KIND=h100\n')
    assert make("FROM=out").stdout == ("make gpu-report: KIND= must name the GPU kind the page is named after, e.g. "
                                       "KIND=h100\n")
    assert make("-n", "FROM=a b", "KIND=h100", "DATE=2026-11-27").stdout.splitlines()[-1] == (
        "nmtbench gpu report a b --kind h100 --date 2026-11-27 ")
