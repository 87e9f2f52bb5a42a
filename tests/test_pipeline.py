"""End to end: the smoke profile through `dvc repro` on real Multi30k, in a workspace of its own."""
import json
import os

import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from helpers.project import ROOT, pipeline_workspace
from nmtbench.config import load_params
from nmtbench.data.tokenizer import load_tokenized
from nmtbench.runs import RunPaths
from nmtbench.tracking import read_offline_run

MIRROR = os.environ.get("NMTBENCH_DATA_MIRROR")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    if not MIRROR:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder "
                    "(make test does when one is beside the checkout)")
    workspace = tmp_path_factory.mktemp("smoke")
    run = pipeline_workspace(workspace, ROOT / "profiles/smoke.yaml")
    run("dvc", "repro")
    return workspace, run


@pytest.mark.slow
def test_smoke_pipeline_scores_every_model(smoke):
    workspace, _ = smoke
    params = load_params(workspace / "params.yaml")
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    assert list(comparison["models"]) == list(params.models)
    assert (comparison["baseline"], comparison["seeds"]) == (params.compare.baseline, params.seeds)
    (seed,) = params.seeds  # one seed: each mean is that run's score
    test_sets = load_tokenized(workspace / "data/tokenized")
    for name, row in comparison["models"].items():
        for split in ("test_2016_flickr", "test_2017_flickr"):
            # every score is sacreBLEU's on the translation file the run wrote, against the untouched references
            hypotheses = RunPaths(name, seed, workspace).translation(split).read_text(encoding="utf-8").split("\n")[:-1]
            references = list(test_sets[split]["tgt"])
            assert len(hypotheses) == len(references) == 40
            for metric, scorer in (("bleu", BLEU()), ("bleu_lc", BLEU(lowercase=True)), ("chrf", CHRF()),
                                   ("ter", TER())):
                assert row[split][metric]["mean"] == round(scorer.corpus_score(hypotheses, [references]).score, 2)
            p_value = row[split]["bootstrap"]["p_value"]
            assert p_value is None if row is comparison["models"][comparison["baseline"]] else 0 < p_value <= 1
            assert sum(bucket["sentences"] for bucket in row[split]["length_buckets"].values()) == 40
        assert row["params"] > 0 and row["train_tokens_per_s"]["mean"] > 0
    for examples in comparison["examples"].values():
        assert [example["index"] for example in examples] == params.compare.examples
        assert all(set(example["outputs"]) == set(params.models) for example in examples)
    table = (workspace / "results/comparison.md").read_text()
    assert all(f"| {name} " in table for name in comparison["models"])
    page = (workspace / "results/report.html").read_text()
    plots = ("length-buckets", "learning-curves", "flops-curves", "frontier", "attention", "beam-sweep")
    for plot in plots:
        assert f'<img id="{plot}"' in page
    sweep = json.loads((workspace / "results/beam_sweep.json").read_text())
    assert [(row["beam"], row["alpha"]) for row in sweep["rows"]] == [(1, 1.0), (2, 1.0)]


@pytest.mark.slow
def test_dvc_plots_draw_val_bleu_against_flops_of_every_run_on_one_plot(smoke):
    workspace, run = smoke
    params = load_params(workspace / "params.yaml")
    vega = json.loads(run("dvc", "plots", "show", "--show-vega", "results/flops_curves.csv").stdout)
    assert vega["encoding"]["x"]["scale"] == {"type": "log"}
    assert {row["run"] for row in vega["data"]["values"]} == {f"{name}/seed{seed}" for name in params.models
                                                              for seed in params.seeds}


def key_paths(value, models: set[str], prefix: str = "") -> set[str]:
    """Every key path of a JSON value, each model's name written <model> and list items []."""
    if isinstance(value, dict):
        return {path for key, item in value.items()
                for path in key_paths(item, models, f"{prefix}/{'<model>' if key in models else key}".lstrip("/"))}
    if isinstance(value, list):
        return {f"{prefix}/[]", *(path for item in value for path in key_paths(item, models, f"{prefix}/[]"))}
    return {prefix}


def test_key_paths_name_models_and_list_items():
    assert key_paths({"models": {"a": {"bleu": 1}}, "seeds": [42], "x": None}, {"a"}) == {
        "models/<model>/bleu", "seeds/[]", "x"}


@pytest.mark.slow
def test_comparison_json_keeps_every_key_it_had(smoke):
    workspace, _ = smoke
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    earlier = {line for line in (ROOT / "tests/helpers/comparison_keys.txt").read_text().splitlines()
               if line and not line.startswith("#")}
    assert earlier - key_paths(comparison, set(comparison["models"])) == set()


@pytest.mark.slow
def test_dvc_metrics_show_the_same_numbers(smoke):
    workspace, run = smoke
    shown = json.loads(run("dvc", "metrics", "show", "--json").stdout)
    files = next(iter(shown.values()))["data"]
    comparison = files["results/comparison.json"]["data"]
    expected = json.loads((workspace / "results/comparison.json").read_text())
    assert comparison == scalars(expected)
    train = files["metrics/transformer/seed42/train.json"]["data"]
    assert train["best_val_loss"] == expected["models"]["transformer"]["best_val_loss"]["mean"]
    (workspace_row, *_) = json.loads(run("dvc", "exp", "show", "--json").stdout)
    shown = workspace_row["rev"] == "workspace" and workspace_row["data"]["metrics"]
    assert shown["results/comparison.json"]["data"] == scalars(expected)


def scalars(metrics):
    """What DVC shows of a metrics file: every number, text and flag; not lists, nulls or what holds only those."""
    if not isinstance(metrics, dict):
        return metrics
    kept = {key: scalars(value) for key, value in metrics.items() if value is not None and not isinstance(value, list)}
    return {key: value for key, value in kept.items() if value != {}}


@pytest.mark.slow
def test_offline_wandb_runs_hold_the_logged_metrics(smoke):
    workspace, _ = smoke
    runs = [read_offline_run(run_dir) for run_dir in sorted((workspace / "wandb").glob("offline-run-*"))]
    models = list(load_params(workspace / "params.yaml").models)
    for job_type in ("train", "evaluate"):  # one of each per model
        assert sorted(run["config"]["model"] for run in runs if run["run"]["job_type"] == job_type) == sorted(models)
    for logged in (run for run in runs if run["run"]["job_type"] == "train"):
        model = logged["config"]["model"]
        train = json.loads((workspace / f"metrics/{model}/seed{logged['config']['seed']}/train.json").read_text())
        val_losses = [row["val/loss"] for row in logged["history"] if "val/loss" in row]
        assert min(val_losses) == pytest.approx(train["best_val_loss"], abs=1e-4)
        assert logged["summary"]["params"] == train["params"]


@pytest.mark.slow
def test_a_second_repro_runs_nothing(smoke):
    _, run = smoke
    assert "Data and pipelines are up to date." in run("dvc", "status").stdout


@pytest.mark.slow
def test_dvc_plots_show_every_learning_curve(smoke):
    workspace, run = smoke
    shown = json.loads(run("dvc", "plots", "show", "--json").stdout)
    assert "errors" not in shown
    params = load_params(workspace / "params.yaml")
    for model in params.models:
        path = f"metrics/{model}/seed{params.seeds[0]}/learning_curve.csv"
        (plot,) = shown["data"][path]
        assert plot["content"]["repeat"] == ["wall_seconds", "target_tokens"]  # val BLEU against both
        rows = (workspace / path).read_text().splitlines()[1:]
        assert [v["val_bleu"] for v in plot["content"]["data"]["values"]] == [r.split(",")[-1] for r in rows]


@pytest.mark.slow
def test_smoke_tunes_every_model_equally_trains_the_winners_and_gives_a_verdict(smoke):
    workspace, _ = smoke
    params = load_params(workspace / "params.yaml")
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    tuning = comparison["tuning"]["models"]
    assert {name: row["trials"] for name, row in tuning.items()} == {name: 2 for name in params.models}
    runs = [read_offline_run(run_dir) for run_dir in sorted((workspace / "wandb").glob("offline-run-*"))]
    for logged in (run for run in runs if run["run"]["job_type"] in ("train", "evaluate")):
        # trained with the winning values, and evaluate's run records the model it evaluated
        won = tuning[logged["config"]["model"]]["params"]
        expected = {**won["train"], **won["model"]} if logged["run"]["job_type"] == "train" else won["model"]
        assert {key: logged["config"][key] for key in expected} == expected
    transformers = [name for name, block in params.models.items()
                    if block["family"] in ("transformer", "decoder_only") and name != params.compare.baseline]
    assert [row["question"] for row in comparison["verdict"]] == [
        "attention vs none within the RNNs", "best attention RNN vs best Transformer",
        *(f"{name} vs the baseline Transformer" for name in transformers)]
    table = (workspace / "results/comparison.md").read_text()
    assert "## Tuning on validation" in table and table.index("## Tuning on validation") < table.index("## Verdict")
