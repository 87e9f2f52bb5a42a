"""End to end: the smoke profile through `dvc repro` on real Multi30k, in a workspace of its own."""
import json
import os
import re

import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from helpers.project import ROOT, keep_models, pipeline_workspace, scores
from helpers.wandb_offline import read_offline_run
from nmtbench.config import load_params
from nmtbench.data.tokenizer import load_tokenized
from nmtbench.run_paths import RunPaths

MIRROR = os.environ.get("NMTBENCH_DATA_MIRROR")


# The smoke profile cut to the models that every part of the comparison needs: the baseline Transformer, a
# decoder-only one beside it, an RNN without attention and one with, and the two hybrids (the encoder x decoder
# 2 x 2). Each of the grid's other variants builds, trains a step, decodes and counts its FLOPs in the unit tests
# (test_models, test_module, test_flops, test_tuning); `make smoke` runs the whole grid through DVC. Each model
# here costs CI three processes of about 15 s of CPU each (tune, train, evaluate), most of it imports.
GRID = ("transformer", "decoder_only", "lstm", "lstm_attention_general", "hybrid_transformer_lstm",
        "hybrid_lstm_transformer")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    if not MIRROR:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder "
                    "(make test does when one is beside the checkout)")
    workspace = tmp_path_factory.mktemp("smoke")
    run = pipeline_workspace(workspace, ROOT / "profiles/smoke.yaml")
    keep_models(workspace, GRID)
    run("nmtbench", "warm", "--", "dvc", "repro")  # as make repro runs it
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
    # every file of figures records what produced it; comparison.json its own and every run's
    runs = [json.loads(RunPaths(name, seed, workspace).metrics_dir.joinpath(file).read_text())["provenance"]
            for name in params.models for file in ("train.json", "eval.json")]
    claims = json.loads((workspace / "results/claims.json").read_text())
    for provenance in (sweep["provenance"], claims["provenance"], comparison["provenance"]["compare"], *runs):
        assert provenance["packages"]["torch"] and provenance["wall_seconds"] > 0
    assert [comparison["provenance"][stage][f"{name}/seed{seed}"] for name in params.models
            for stage in ("train", "evaluate")] == runs
    assert "## Produced by" in table and "<h2>Produced by</h2>" in page


LAUNCHED = ("transformer", "lstm_attention_general")  # one of each family, trained at once as the two jobs


@pytest.mark.slow
@pytest.mark.e2e
def test_two_models_launched_as_two_jobs_of_one_thread_score_as_in_dvc_repro(smoke, tmp_path_factory):
    """nmtbench launch runs the pipeline as concurrent jobs and records every stage the DVC way: each model's
    scores, steps and val losses exactly as the sequential smoke run's (FLOP budgets, so from scratch on a machine
    shared by two jobs), and DVC then has nothing to run. Two of the grid's models keep it to a minute."""
    workspace, _ = smoke
    folder = tmp_path_factory.mktemp("smoke_launched")
    launched = pipeline_workspace(folder, ROOT / "profiles/smoke.yaml")
    params = keep_models(folder, LAUNCHED, launch={"executor": "local", "jobs": 2, "threads_per_job": 1})
    progress = launched("nmtbench", "launch").stdout
    assert "2 local job(s) at once, 1 thread(s) each" in progress and "done: report in " in progress
    assert "Data and pipelines are up to date." in launched("dvc", "status").stdout
    assert "Running stage" not in launched("dvc", "repro").stdout
    (seed,) = params["seeds"]
    for name in LAUNCHED:
        first, second = (RunPaths(name, seed, root).metrics_dir for root in (workspace, folder))
        evaluated, parallel = (json.loads((paths / "eval.json").read_text()) for paths in (first, second))
        assert scores(parallel) == scores(evaluated)
        trained, parallel = (json.loads((paths / "train.json").read_text()) for paths in (first, second))
        assert (parallel["steps"], parallel["best_val_loss"]) == (trained["steps"], trained["best_val_loss"])


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
def test_dvc_shows_each_models_bleu_and_no_other_metric(smoke):
    """results/bleu.json is the one metrics file: `dvc exp show` opens with one BLEU column per model."""
    workspace, run = smoke
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    bleu = {name: row["test_2016_flickr"]["bleu"]["mean"] for name, row in comparison["models"].items()}
    shown = json.loads(run("dvc", "metrics", "show", "--json").stdout)
    assert next(iter(shown.values()))["data"] == {"results/bleu.json": {"data": bleu}}
    (workspace_row, *_) = json.loads(run("dvc", "exp", "show", "--json").stdout)
    assert workspace_row["rev"] == "workspace"
    assert workspace_row["data"]["metrics"] == {"results/bleu.json": {"data": bleu}}
    header = run("dvc", "exp", "show", "--csv").stdout.splitlines()[0].split(",")
    assert header[:5 + len(bleu)] == ["Experiment", "rev", "typ", "Created", "parent", *bleu]
    table = run("nmtbench", "experiments").stdout  # a pipe: the width of 80 columns it falls back to
    assert max(map(len, table.splitlines())) <= 80
    assert all(f"| {name} " in table for name in bleu)


@pytest.mark.slow
def test_offline_wandb_runs_hold_the_logged_metrics(smoke):
    workspace, _ = smoke
    runs = [read_offline_run(run_dir) for run_dir in sorted((workspace / "wandb").glob("offline-run-*"))]
    models = list(load_params(workspace / "params.yaml").models)
    for job_type in ("train", "evaluate"):  # one of each per model
        assert sorted(run["config"]["model"] for run in runs if run["run"]["job_type"] == job_type) == sorted(models)
    # each folder says which job of which run it holds: offline-run-<time>-<job type>-<run name>-<random>
    folders = [path.name for path in (workspace / "wandb").glob("offline-run-*")]
    named = [re.fullmatch(r"offline-run-\d{8}_\d{6}-(train|evaluate|compare)-(.+)-[0-9a-f]{6}", f) for f in folders]
    assert sorted(found.group(1, 2) for found in named) == sorted(
        [("compare", "smoke"), *((job, f"{model}-seed42") for job in ("train", "evaluate") for model in models)])
    (compared,) = [run for run in runs if run["run"]["job_type"] == "compare"]
    assert compared["run"]["group"] == "smoke" and compared["config"]["models"] == models
    comparison = json.loads((workspace / "results/comparison.json").read_text())
    assert compared["config"]["provenance"] == comparison["provenance"]["compare"]
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
                    if block["family"] in ("transformer", "decoder_only", "cnn") and name != params.compare.baseline]
    assert [row["question"] for row in comparison["verdict"] if row["side"] is None] == [
        "attention vs none within the RNNs", "best attention RNN vs best Transformer",
        *(f"{name} vs the baseline Transformer" for name in transformers)]
    # the encoder x decoder 2 x 2 of transformer, lstm_attention_general and the two hybrids, read per side
    sides = [(row["side"], row["model"], row["other"]) for row in comparison["verdict"] if row["side"]]
    assert {("encoder", "transformer", "hybrid_lstm_transformer"),
            ("encoder", "hybrid_transformer_lstm", "lstm_attention_general"),
            ("decoder", "transformer", "hybrid_transformer_lstm"),
            ("decoder", "hybrid_lstm_transformer", "lstm_attention_general")} <= set(sides)
    assert [row["models"] for row in comparison["findings"]] == [
        {"TT": "transformer", "TR": "hybrid_transformer_lstm", "RT": "hybrid_lstm_transformer",
         "RR": "lstm_attention_general"}] * 2
    table = (workspace / "results/comparison.md").read_text()
    assert "## Tuning on validation" in table and table.index("## Tuning on validation") < table.index("## Verdict")


@pytest.mark.slow
def test_the_lecture_companion_runs_on_the_smoke_workspace(smoke, monkeypatch):
    """examples/lecture_companion.ipynb end to end on this workspace, as committed (no outputs): every cell runs,
    BLEU by hand prints sacreBLEU's figures, and the experiment cell runs its guard alone."""
    import nbformat
    from nbclient import NotebookClient

    workspace, _ = smoke
    path = ROOT / "examples/lecture_companion.ipynb"
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    monkeypatch.setenv("NMTBENCH_WORKSPACE", str(workspace))
    monkeypatch.delenv("NMTBENCH_COMPANION_RUN_EXPERIMENT", raising=False)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [output for cell in code for output in cell.outputs]
    text = "".join(output.text for output in outputs if output.output_type == "stream")

    def figure(pattern: str) -> str:
        return re.search(pattern, text, re.MULTILINE).group(1)

    sentence = figure(r"^BLEU = BP x exp\(mean log precision\) = (\S+)$")
    assert sentence == figure(r"^sacreBLEU \(nrefs:1\|case:mixed\|eff:yes\|tok:13a\|smooth:exp\|.*\): (\S+)$")
    corpus = figure(r"^corpus BLEU by hand: +(\S+)$")
    assert corpus == figure(r"^sacreBLEU's corpus BLEU: +(\S+)$")
    assert round(float(corpus), 2) == float(figure(r"^the compare stage's: +(\S+)$"))
    assert "not run (set NMTBENCH_COMPANION_RUN_EXPERIMENT=1 to run it)" in text
    assert sum("image/png" in output.get("data", {}) for output in outputs) == 5  # 1 + 1 of the pair + 3 claims
