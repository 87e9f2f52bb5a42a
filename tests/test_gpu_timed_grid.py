"""nmtbench gpu timed-grid and probe-jobs (gpu/timed_grid.py, gpu/probe.py): a grid run without dvc in a fixed wall
time writes what the pipeline writes, with the profiles of the GPU runs valid and each training's time budget
fitting the call."""
import json
import shutil
from pathlib import Path

import pytest
import yaml

from nmtbench.config import parse_params
from nmtbench.gpu import timed_grid
from nmtbench.gpu.probe import choose_jobs
from nmtbench.param_blocks import ConfigError
from nmtbench.profiles import merged_params

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "profiles"


def test_a_setting_is_a_dotted_key_and_a_yaml_value():
    assert timed_grid.setting("train.budget.value=150") == {"train": {"budget": {"value": 150}}}
    assert timed_grid.setting("seeds=[1, 2]") == {"seeds": [1, 2]}
    with pytest.raises(ConfigError, match="expected key=value"):
        timed_grid.setting("train.lr")


def test_settings_go_on_top_of_the_profiles_in_order():
    merged = merged_params(ROOT, [PROFILES / "smoke.yaml"], [timed_grid.setting("train.lr=0.5"),
                                                             timed_grid.setting("train.lr=0.25"),
                                                             {"seeds": [7], "beam_sweep": {"seed": 7}}])
    assert (merged["train"]["lr"], merged["seeds"], merged["train"]["max_epochs"]) == (0.25, [7], 2)


@pytest.mark.parametrize(("seconds", "runs", "jobs", "expected"), [
    (480, 14, 14, 480 - 40 - 25 - 35),    # one wave: everything but startup, evaluation and compare
    (480, 14, 7, (480 - 40) // 2 - 60),   # two waves share the time
    (480, 14, 8, (480 - 40) // 2 - 60),   # 8 at once is still two waves for 14 runs
    (100, 14, 1, 5),                      # never less than a few seconds
])
def test_each_training_gets_its_share_of_the_call(seconds, runs, jobs, expected):
    assert timed_grid.training_seconds(seconds, runs, jobs) == expected


def test_more_time_goes_to_the_runs_their_budget_stopped_and_raises_the_budget_by_their_share(tmp_path, monkeypatch):
    """a: its budget ended it and kept its last checkpoint; b: stopped by early stopping; c: never trained. a and c go
    on (train, then evaluate again), b is left alone; the budget rises by the share of 2 runs, 2 at once."""
    params = {"models": {"a": {}, "b": {}, "c": {}}, "seeds": [1],
              "train": {"budget": {"kind": "time", "value": 399}, "early_stopping_patience": 3}}
    (tmp_path / "params.grid.yaml").write_text(yaml.safe_dump(params))  # as compare_and_report left it
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "models": {"b": {}}}))
    for model, why in (("a", "budget"), ("b", "early_stopping")):
        metrics = tmp_path / "metrics" / model / "seed1"
        metrics.mkdir(parents=True)
        (metrics / "train.json").write_text(json.dumps({"stopped_by": why}))
        (metrics / "eval.json").write_text("{}")
        (tmp_path / "models" / model / "seed1" / "unfinished").mkdir(parents=True)
        (tmp_path / "models" / model / "seed1" / "unfinished" / "last.ckpt").write_text("")
    launched = []

    def launch(folder, targets, jobs, seconds):
        launched.append((targets, jobs, [(folder / "metrics" / m / "seed1" / "train.json").exists() for m in "abc"]))
        for target in targets:  # as the stages would: each evaluation's eval.json
            if target.startswith("evaluate@"):
                model = target.split("@")[1].split("-")[0]
                (folder / "metrics" / model / "seed1").mkdir(parents=True, exist_ok=True)
                (folder / "metrics" / model / "seed1" / "eval.json").write_text("{}")

    monkeypatch.setattr(timed_grid, "launched", launch)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "comparison.json").write_text("{}")  # the earlier call's, over b alone
    assert timed_grid.more_grid(tmp_path, 400, jobs=2) == 0
    assert launched == [(["train@a-1", "evaluate@a-1", "train@c-1", "evaluate@c-1"], 2, [False, True, False]),
                        (["compare", "report"], 1, [False, True, False])]
    assert not (tmp_path / "results" / "comparison.json").exists()  # so the launcher compares afresh
    share = timed_grid.training_seconds(400, 2, 2)
    raised = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert list(raised["models"]) == ["a", "b", "c"] and raised["train"]["budget"] == {"kind": "time",
                                                                                      "value": 399 + share}
    assert json.loads((tmp_path / timed_grid.SUMMARY).read_text())["train_budget_seconds"] == 399 + share


def test_the_probe_chooses_the_most_tokens_through_the_gpu_and_fewer_jobs_on_a_tie():
    probe = {1: {"total_tokens_per_s": 50_000}, 4: {"total_tokens_per_s": 150_000},
             8: {"total_tokens_per_s": 140_000}}
    assert choose_jobs(probe) == 4
    assert choose_jobs({**probe, 8: {"total_tokens_per_s": 150_000}}) == 4


def test_tiny_sizes_shrink_the_models_present_and_add_none_and_nothing_else():
    tiny = merged_params(ROOT, [PROFILES / "published.yaml"], timed_grid.overrides([], PROFILES / "smoke.yaml"))
    published = merged_params(ROOT, [PROFILES / "published.yaml"])
    assert list(tiny["models"]) == list(published["models"]) == ["transformer_tiny", "gru_attention"]
    assert tiny["models"]["transformer_tiny"]["d_model"] == 32 < published["models"]["transformer_tiny"]["d_model"]
    assert {key: value for key, value in tiny.items() if key != "models"} == {
        key: value for key, value in published.items() if key != "models"}  # the smoke data and epochs stay out


GRID = list(yaml.safe_load((ROOT / "params.yaml").read_text())["models"])


def test_the_grid_profile_trains_every_model_once_in_bf16_on_the_gpu_without_tuning():
    params = parse_params(merged_params(ROOT, [PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"]))
    assert list(params.models) == GRID and params.seeds == [1] and params.tune.trials == 0
    assert (params.train.accelerator, params.train.precision, params.evaluate.device) == ("gpu", "bf16-mixed", "cuda")
    assert params.train.early_stopping_metric == "bleu" and params.train.early_stopping_patience == 3


def test_the_grid_recipe_is_converge_cpus_carried_to_8_times_the_batch():
    params = parse_params(merged_params(ROOT, [PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"]))
    cpu = parse_params(merged_params(ROOT, [PROFILES / "converge_cpu.yaml"]))
    train, reference = params.train, cpu.train
    assert train.batch_tokens == 8 * reference.batch_tokens == 16384
    # 2,000 updates were 4.5 epochs of 443 updates; an epoch is 62 updates of 16,384 tokens
    assert train.warmup_steps == round(reference.warmup_steps / 443 * 62, -1) == 280
    assert reference.lr < train.lr < reference.lr * 8 ** 0.5
    assert (train.early_stopping_metric, train.early_stopping_patience, train.val_bleu_sentences) == (
        reference.early_stopping_metric, reference.early_stopping_patience, reference.val_bleu_sentences)


def test_the_published_profile_trains_the_papers_two_systems_on_their_recipes_on_the_gpu():
    params = parse_params(merged_params(
        ROOT, [PROFILES / "gpu.yaml", PROFILES / "published.yaml", PROFILES / "gpu_published.yaml"]))
    assert list(params.models) == ["transformer_tiny", "gru_attention"]
    assert params.data.preprocess == "moses_lowercase" and params.seeds == [1] and params.tune.trials == 0
    assert (params.train.accelerator, params.train.precision) == ("gpu", "bf16-mixed")
    tiny = params.for_model("transformer_tiny").train
    assert (tiny.lr, tiny.warmup_steps, tiny.average_last, tiny.max_steps) == (0.005, 2000, 10, 8000)
    # the Revisit-MMT fork's own defaults, which its command relies on (not fairseq 0.9.0's)
    assert (tiny.label_smoothing, tiny.gradient_clip_val, tiny.early_stopping_metric) == (0.1, 25.0, "loss")
    assert (params.evaluate.length_penalty, params.evaluate.alpha) == ("normalize", 1.0)  # fairseq's lenpen 1
    gru = params.for_model("gru_attention")
    assert (gru.train.batch_tokens, gru.train.early_stopping_patience, gru.train.gradient_clip_val) == (1024, 20, 5.0)
    assert gru.models["gru_attention"]["init_hidden"] == "bridge"  # nmtpytorch's dec_init: mean_ctx


def test_the_rehearsal_runs_the_gpu_profiles_on_the_cpu_at_smoke_sizes():
    params = parse_params(merged_params(
        ROOT, [PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml", PROFILES / "gpu_rehearsal.yaml"],
        timed_grid.overrides([], PROFILES / "smoke.yaml")))
    assert (params.train.accelerator, params.evaluate.device, params.train.precision) == ("cpu", "cpu", "32-true")
    assert params.models["transformer"]["d_model"] == 32 and list(params.models) == GRID


def test_a_grid_of_some_models_compares_them_alone_and_keeps_its_baseline():
    merged = merged_params(ROOT, [PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"])
    assert list(timed_grid.only_models(merged, ["cnn", "transformer"])["models"]) == ["cnn", "transformer"]
    with pytest.raises(ValueError, match="not a model of params.yaml"):  # beam_sweep.model, compare.baseline
        timed_grid.only_models(merged, ["cnn"])
    with pytest.raises(ConfigError, match="--models: nonesuch not in the merged params"):
        timed_grid.only_models(merged, ["transformer", "nonesuch"])


def test_a_corpus_tokenized_with_other_params_is_refused(tmp_path):
    merged = yaml.safe_load((ROOT / "params.yaml").read_text())
    recorded = tmp_path / "params.json"
    recorded.write_text(json.dumps({"data": merged["data"], "tokenize": merged["tokenize"]}))
    timed_grid.refuse_other_data(merged, recorded)  # the same blocks: no complaint
    other = {**merged, "tokenize": {**merged["tokenize"], "vocab_size": 123}}
    with pytest.raises(ConfigError, match="other tokenize params"):
        timed_grid.refuse_other_data(other, recorded)


def dvc_stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def expand(text: str, model: str, seed: int) -> str:
    return text.replace("${item.model}", model).replace("${item.seed}", str(seed))


def test_compare_covers_the_finished_models_and_moves_what_named_the_others():
    merged = merged_params(ROOT, [PROFILES / "published.yaml"])
    assert (merged["compare"]["baseline"], merged["beam_sweep"]["model"]) == ("transformer_tiny", "transformer_tiny")
    cut = timed_grid.finished_only(merged, ["gru_attention"])
    assert list(cut["models"]) == ["gru_attention"] and cut["models"]["gru_attention"] == merged["models"][
        "gru_attention"]
    assert (cut["compare"]["baseline"], cut["beam_sweep"]["model"]) == ("gru_attention", "gru_attention")
    assert list(cut["compare"]["published"]) == ["gru_attention"]
    assert timed_grid.finished_only(merged, ["transformer_tiny", "gru_attention"]) == merged  # all finished


def pipeline_outputs(models: list[str], seed: int) -> list[str]:
    """The outs and metrics dvc.yaml declares for tune, train, evaluate, compare and report of these runs."""
    paths = []
    for stage in ("tune", "train", "evaluate", "compare", "report"):
        declared = dvc_stages()[stage]
        for entry in declared.get("outs", []) + declared.get("metrics", []):
            path = next(iter(entry)) if isinstance(entry, dict) else entry
            paths += sorted({expand(path, model, seed) for model in models})
    return paths


@pytest.mark.slow
@pytest.mark.e2e
def test_a_probe_then_a_grid_with_a_failed_run_compares_the_others_and_every_result_names_the_commit(
        tmp_path, monkeypatch, make_data_mirror):
    """As on the GPU machine: no .git beside the code, its commit in the carried file, and nmtbench's commands run
    through the CLI. The probe measures packing; in the grid packed as it chose, the baseline's training fails, and
    the other model still gets every output the pipeline declares, its comparison and report among them."""
    from helpers.project import TRAINED_MODELS, write_tiny_project
    from nmtbench.cli import main
    from nmtbench.provenance import COMMIT_FILE

    project = tmp_path / "project"
    project.mkdir()
    mirror, checksums = make_data_mirror()
    write_tiny_project(project, mirror, checksums, TRAINED_MODELS)
    (project / "systems").mkdir()
    stages = dvc_stages()  # the baseline's training fails as one killed by the GPU running out of memory would
    stages["train"]["cmd"] += " && test ${item.model} != tiny"
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    shutil.copytree(ROOT / "plots", project / "plots")  # what nmtbench workspace copies beside dvc.yaml
    shutil.copy(ROOT / ".gitignore", project / ".gitignore")
    recorded = {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}
    (tmp_path / "COMMIT").write_text(json.dumps(recorded))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    for key in ("WANDB_MODE", "PYTHONUNBUFFERED"):  # set by the commands for their stages: restored after the test
        monkeypatch.setenv(key, "")
    profile = tmp_path / "profile.yaml"
    profile.write_text("seeds: [3]\nbeam_sweep: {seed: 3}\n")
    tokenized = str(project / "data" / "tokenized")
    params = ["--params", str(project / "params.yaml")]
    assert main(["gpu", "probe-jobs", str(tmp_path / "probe"), *params, "--profile", str(profile), "--tokenized",
                 tokenized, "--levels", "1", "2", "--train-seconds", "5", "--model", "tiny_rnn",
                 "--startup-seconds", "60"]) == 0  # two trainings starting at once on a loaded CPU
    probe = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert set(probe["levels"]) == {"1", "2"} and probe["levels"]["2"]["per_job_tokens_per_s"][1] > 0
    workspace = tmp_path / "grid"
    code = main(["gpu", "timed-grid", str(workspace), *params, "--profile", str(profile), "--tokenized", tokenized,
                 "--seconds", "400", "--jobs", str(probe["chosen_jobs"])])
    assert code == 1
    missing = {path for path in pipeline_outputs(list(TRAINED_MODELS), 3) if not (workspace / path).exists()}
    assert missing == {"results/tiny/seed3", "metrics/tiny/seed3/attention.json", "metrics/tiny/seed3/eval.json"}
    summary = json.loads((workspace / timed_grid.SUMMARY).read_text())
    assert not summary["all_ok"] and summary["compared"] == ["tiny_rnn"] and summary["jobs"] == probe["chosen_jobs"]
    assert [r["model"] for r in summary["runs"]] == list(TRAINED_MODELS)
    assert summary["runs"][1]["test_2016_flickr"]["bleu"] is not None
    cut = yaml.safe_load((workspace / "params.yaml").read_text())
    assert list(cut["models"]) == ["tiny_rnn"] and cut["compare"]["baseline"] == "tiny_rnn"
    assert list(yaml.safe_load((workspace / "params.grid.yaml").read_text())["models"]) == list(TRAINED_MODELS)
    comparison = json.loads((workspace / "results" / "comparison.json").read_text())
    stamps = [json.loads((workspace / "metrics" / "tiny_rnn" / "seed3" / f"{name}.json").read_text())["provenance"]
              for name in ("train", "eval")]
    stamps += [comparison["provenance"]["compare"],
               json.loads((tmp_path / "probe" / "jobs1" / "metrics" / "tiny_rnn" / "seed1" / "train.json").read_text())[
                   "provenance"]]
    assert [found["git"] for found in stamps] == [recorded] * 4
