"""tools/gpu_runs.py: the GPU machine's runs without dvc write what the pipeline writes, with the profiles of the
GPU runs valid and each training's time budget fitting the call."""
import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from nmtbench.config import parse_params

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_runs", ROOT / "tools" / "gpu_runs.py")
gpu_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_runs)
PROFILES = ROOT / "profiles"


def test_a_setting_is_a_dotted_key_and_a_yaml_value():
    assert gpu_runs.assignment("train.budget.value=150") == (["train", "budget", "value"], 150)
    assert gpu_runs.assignment("seeds=[1, 2]") == (["seeds"], [1, 2])
    with pytest.raises(Exception, match="expected key=value"):
        gpu_runs.assignment("train.lr")


def test_settings_make_the_blocks_they_need_and_leave_the_input_as_it_was():
    raw = {"train": {"lr": 0.001}}
    assert gpu_runs.with_settings(raw, [(["train", "budget", "kind"], "time"), (["seeds"], [1])]) == {
        "train": {"lr": 0.001, "budget": {"kind": "time"}}, "seeds": [1]}
    assert raw == {"train": {"lr": 0.001}}


@pytest.mark.parametrize(("seconds", "runs", "jobs", "expected"), [
    (480, 14, 14, 480 - 40 - 25 - 35),    # one wave: everything but startup, evaluation and compare
    (480, 14, 7, (480 - 40) // 2 - 60),   # two waves share the time
    (480, 14, 8, (480 - 40) // 2 - 60),   # 8 at once is still two waves for 14 runs
    (100, 14, 1, 5),                      # never less than a few seconds
])
def test_each_training_gets_its_share_of_the_call(seconds, runs, jobs, expected):
    assert gpu_runs.training_seconds(seconds, runs, jobs) == expected


def test_the_probe_chooses_the_most_tokens_through_the_gpu_and_fewer_jobs_on_a_tie():
    probe = {1: {"total_tokens_per_s": 50_000}, 4: {"total_tokens_per_s": 150_000},
             8: {"total_tokens_per_s": 140_000}}
    assert gpu_runs.choose_jobs(probe) == 4
    assert gpu_runs.choose_jobs({**probe, 8: {"total_tokens_per_s": 150_000}}) == 4


def test_tiny_sizes_shrink_the_models_present_and_add_none():
    merged = {"models": {"transformer": {"family": "transformer", "d_model": 256, "layers": 3},
                         "transformer_tiny": {"family": "transformer", "d_model": 128}}}
    tiny = {"models": {"transformer": {"d_model": 32, "layers": 1}, "cnn": {"channels": 32}}}
    assert gpu_runs.shrunk(merged, tiny)["models"] == {
        "transformer": {"family": "transformer", "d_model": 32, "layers": 1},
        "transformer_tiny": {"family": "transformer", "d_model": 128}}


GRID = list(yaml.safe_load((ROOT / "params.yaml").read_text())["models"])


def test_the_grid_profile_trains_every_model_once_in_bf16_on_the_gpu_without_tuning():
    params = parse_params(gpu_runs.merged_params([PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"], []))
    assert list(params.models) == GRID and params.seeds == [1] and params.tune.trials == 0
    assert (params.train.accelerator, params.train.precision, params.evaluate.device) == ("gpu", "bf16-mixed", "cuda")
    assert params.train.early_stopping_metric == "bleu" and params.train.early_stopping_patience == 3


def test_the_published_profile_trains_the_papers_systems_on_their_recipes_and_the_grid_lstm_on_the_gpu():
    params = parse_params(gpu_runs.merged_params(
        [PROFILES / "gpu.yaml", PROFILES / "published.yaml", PROFILES / "gpu_published.yaml"], []))
    assert list(params.models) == ["transformer_tiny", "gru_attention", "lstm_attention_general"]
    assert params.data.preprocess == "moses_lowercase" and params.seeds == [1] and params.tune.trials == 0
    assert (params.train.accelerator, params.train.precision) == ("gpu", "bf16-mixed")
    tiny = params.for_model("transformer_tiny").train
    assert (tiny.lr, tiny.warmup_steps, tiny.average_last) == (0.005, 2000, 10)
    assert params.for_model("lstm_attention_general").train.warmup_steps == 2000


def test_the_rehearsal_runs_the_gpu_profiles_on_the_cpu_at_smoke_sizes():
    params = parse_params(gpu_runs.merged_params(
        [PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml", PROFILES / "gpu_rehearsal.yaml"], [],
        PROFILES / "smoke.yaml"))
    assert (params.train.accelerator, params.evaluate.device, params.train.precision) == ("cpu", "cpu", "32-true")
    assert params.models["transformer"]["d_model"] == 32 and list(params.models) == GRID


def test_a_grid_of_some_models_compares_them_alone_and_keeps_its_baseline():
    merged = gpu_runs.merged_params([PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"], [])
    assert list(gpu_runs.only_models(merged, ["cnn", "transformer"])["models"]) == ["cnn", "transformer"]
    with pytest.raises(ValueError, match="not a model of params.yaml"):  # beam_sweep.model, compare.baseline
        gpu_runs.only_models(merged, ["cnn"])
    with pytest.raises(SystemExit, match="nonesuch"):
        gpu_runs.only_models(merged, ["transformer", "nonesuch"])


def test_a_corpus_tokenized_with_other_params_is_refused(tmp_path):
    merged = yaml.safe_load((ROOT / "params.yaml").read_text())
    recorded = tmp_path / "params.json"
    recorded.write_text(json.dumps({"data": merged["data"], "tokenize": merged["tokenize"]}))
    gpu_runs.refuse_other_data(merged, recorded)  # the same blocks: no complaint
    other = {**merged, "tokenize": {**merged["tokenize"], "vocab_size": 123}}
    with pytest.raises(SystemExit, match="other tokenize params"):
        gpu_runs.refuse_other_data(other, recorded)


def dvc_stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def expand(text: str, model: str, seed: int) -> str:
    return text.replace("${item.model}", model).replace("${item.seed}", str(seed))


@pytest.mark.parametrize("stage", ["tune", "train", "evaluate"])
def test_each_stage_runs_the_command_of_dvc_yaml(stage):
    assert ["nmtbench", *gpu_runs.stage_command(stage, "gru", 7)] == expand(dvc_stages()[stage]["cmd"], "gru",
                                                                            7).split()


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
def test_a_probe_then_a_grid_packed_as_it_chose_writes_every_output_the_pipeline_declares(tmp_path, monkeypatch,
                                                                                         make_data_mirror):
    from helpers.project import TRAINED_MODELS, write_tiny_project

    project = tmp_path / "project"
    project.mkdir()
    mirror, checksums = make_data_mirror()
    write_tiny_project(project, mirror, checksums, TRAINED_MODELS)
    (project / "systems").mkdir()
    monkeypatch.setattr(gpu_runs, "ROOT", project)  # the tiny project's params.yaml is the base
    profile = tmp_path / "profile.yaml"
    profile.write_text("seeds: [3]\nbeam_sweep: {seed: 3}\n")
    tokenized = str(project / "data" / "tokenized")
    assert gpu_runs.main(["probe", str(tmp_path / "probe"), "--profile", str(profile), "--tokenized", tokenized,
                          "--levels", "1", "2", "--train-seconds", "5", "--model", "tiny"]) == 0
    probe = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert set(probe["levels"]) == {"1", "2"} and probe["levels"]["2"]["per_job_tokens_per_s"][1] > 0
    workspace = tmp_path / "grid"
    code = gpu_runs.main(["grid", str(workspace), "--profile", str(profile), "--tokenized", tokenized,
                          "--seconds", "400", "--jobs-from", str(tmp_path / "probe" / "probe.json")])
    assert code == 0
    missing = [path for path in pipeline_outputs(list(TRAINED_MODELS), 3) if not (workspace / path).exists()]
    assert missing == []
    summary = json.loads((workspace / "gpu_runs.json").read_text())
    assert summary["all_ok"] and summary["jobs"] == probe["chosen_jobs"]
    assert [r["model"] for r in summary["runs"]] == list(TRAINED_MODELS)
    assert all(r["test_2016_flickr"]["bleu"] is not None for r in summary["runs"])
    assert (workspace / "logs" / "train@tiny-3.log").is_file()
