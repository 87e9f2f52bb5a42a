"""tools/gpu_runs.py: the GPU machine's runs without dvc write what the pipeline writes, with the profiles of the
GPU runs valid and each training's time budget fitting the call."""
import importlib.util
import json
import shutil
import time
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


def test_the_grid_recipe_is_converge_cpus_carried_to_8_times_the_batch():
    params = parse_params(gpu_runs.merged_params([PROFILES / "gpu.yaml", PROFILES / "gpu_converge.yaml"], []))
    cpu = parse_params(gpu_runs.merged_params([PROFILES / "converge_cpu.yaml"], []))
    train, reference = params.train, cpu.train
    assert train.batch_tokens == 8 * reference.batch_tokens == 16384
    # 2,000 updates were 4.5 epochs of 443 updates; an epoch is 62 updates of 16,384 tokens
    assert train.warmup_steps == round(reference.warmup_steps / 443 * 62, -1) == 280
    assert reference.lr < train.lr < reference.lr * 8 ** 0.5
    assert (train.early_stopping_metric, train.early_stopping_patience, train.val_bleu_sentences) == (
        reference.early_stopping_metric, reference.early_stopping_patience, reference.val_bleu_sentences)


def test_the_published_profile_trains_the_papers_two_systems_on_their_recipes_on_the_gpu():
    params = parse_params(gpu_runs.merged_params(
        [PROFILES / "gpu.yaml", PROFILES / "published.yaml", PROFILES / "gpu_published.yaml"], []))
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


def test_each_stage_runs_the_nmtbench_command_of_dvc_yaml():
    assert gpu_runs.stage_command("tune", model="gru", seed=7) == ["tune", "gru"]
    assert gpu_runs.stage_command("train", model="gru", seed=7) == ["train", "gru", "--seed", "7"]
    assert gpu_runs.stage_command("evaluate", model="gru", seed=7) == ["evaluate", "gru", "--seed", "7"]
    assert gpu_runs.stage_command("compare") == ["compare"] and gpu_runs.stage_command("report") == ["report"]


def with_dvc_yaml(folder: Path, monkeypatch, **commands: str) -> None:
    """gpu_runs reading folder/dvc.yaml: the checkout's, with these stages' cmd changed."""
    stages = dvc_stages()
    for name, command in commands.items():
        stages[name]["cmd"] = command
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    monkeypatch.setattr(gpu_runs, "ROOT", folder)


def test_a_changed_dvc_yaml_command_is_the_one_the_lane_runs(tmp_path, monkeypatch):
    with_dvc_yaml(tmp_path, monkeypatch, train="nmtbench train ${item.model} --seed ${item.seed} --params 'p q.yaml'",
                  compare="nmtbench --version", report="nmtbench --version")
    assert gpu_runs.stage_command("train", model="gru", seed=7) == ["train", "gru", "--seed", "7", "--params",
                                                                    "p q.yaml"]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    merged = {"models": {"gru": {}}}
    assert gpu_runs.compare_and_report(workspace, merged, ["gru"], time.monotonic() + 120)
    for stage in ("compare", "report"):  # what ran is dvc.yaml's command: the version line, not a comparison
        assert (workspace / "logs" / f"{stage}.log").read_text().startswith("nmtbench ")
    assert not (workspace / "results").exists() and not (workspace / "params.finished.yaml").exists()


@pytest.mark.parametrize("command", ["dvc exp run", "nmtbench train ${item.model} --seed ${item.run}",
                                     "nmtbench train ${item.model} && nmtbench evaluate ${item.model}"])
def test_a_stage_command_the_lane_cannot_run_is_refused_naming_it(tmp_path, monkeypatch, command):
    with_dvc_yaml(tmp_path, monkeypatch, train=command)
    with pytest.raises(SystemExit, match=r"dvc.yaml's train stage runs .*one nmtbench command per stage"):
        gpu_runs.stage_command("train", model="gru", seed=7)


def test_compare_covers_the_finished_models_and_moves_what_named_the_others():
    merged = gpu_runs.merged_params([PROFILES / "published.yaml"], [])
    assert (merged["compare"]["baseline"], merged["beam_sweep"]["model"]) == ("transformer_tiny", "transformer_tiny")
    cut = gpu_runs.finished_only(merged, ["gru_attention"])
    assert list(cut["models"]) == ["gru_attention"] and cut["models"]["gru_attention"] == merged["models"][
        "gru_attention"]
    assert (cut["compare"]["baseline"], cut["beam_sweep"]["model"]) == ("gru_attention", "gru_attention")
    assert list(cut["compare"]["published"]) == ["gru_attention"]
    assert gpu_runs.finished_only(merged, ["transformer_tiny", "gru_attention"]) == merged  # all finished


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
    """As on the GPU machine: no .git beside the code, its commit in the carried file. The probe measures packing;
    in the grid packed as it chose, the baseline's training fails, and the other model still gets every output the
    pipeline declares, its comparison and report among them."""
    from helpers.project import TRAINED_MODELS, write_tiny_project
    from nmtbench.provenance import COMMIT_FILE

    project = tmp_path / "project"
    project.mkdir()
    mirror, checksums = make_data_mirror()
    write_tiny_project(project, mirror, checksums, TRAINED_MODELS)
    (project / "systems").mkdir()
    shutil.copy(ROOT / "dvc.yaml", project / "dvc.yaml")
    monkeypatch.setattr(gpu_runs, "ROOT", project)  # the tiny project's params.yaml is the base
    recorded = {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False}
    (tmp_path / "COMMIT").write_text(json.dumps(recorded))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    profile = tmp_path / "profile.yaml"
    profile.write_text("seeds: [3]\nbeam_sweep: {seed: 3}\n")
    tokenized = str(project / "data" / "tokenized")
    assert gpu_runs.main(["probe", str(tmp_path / "probe"), "--profile", str(profile), "--tokenized", tokenized,
                          "--levels", "1", "2", "--train-seconds", "5", "--model", "tiny",
                          "--startup-seconds", "60"]) == 0  # two trainings starting at once on a loaded CPU
    probe = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert set(probe["levels"]) == {"1", "2"} and probe["levels"]["2"]["per_job_tokens_per_s"][1] > 0
    dvc_command = gpu_runs.stage_command

    def baseline_crashes(stage_name, **item):  # as a training killed by the GPU running out of memory
        return ["train", "nonesuch"] if (stage_name, item.get("model")) == ("train", "tiny") else dvc_command(
            stage_name, **item)

    monkeypatch.setattr(gpu_runs, "stage_command", baseline_crashes)
    workspace = tmp_path / "grid"
    code = gpu_runs.main(["grid", str(workspace), "--profile", str(profile), "--tokenized", tokenized,
                          "--seconds", "400", "--jobs", str(probe["chosen_jobs"])])
    assert code == 1
    missing = {path for path in pipeline_outputs(list(TRAINED_MODELS), 3) if not (workspace / path).exists()}
    assert missing == {"models/tiny/seed3", "metrics/tiny/seed3/train.json", "results/tiny/seed3",
                       "metrics/tiny/seed3/attention.json", "metrics/tiny/seed3/eval.json"}
    summary = json.loads((workspace / "gpu_runs.json").read_text())
    assert not summary["all_ok"] and summary["compared"] == ["tiny_rnn"] and summary["jobs"] == probe["chosen_jobs"]
    assert [r["model"] for r in summary["runs"]] == list(TRAINED_MODELS)
    assert summary["runs"][1]["test_2016_flickr"]["bleu"] is not None
    cut = yaml.safe_load((workspace / "params.finished.yaml").read_text())
    assert list(cut["models"]) == ["tiny_rnn"] and cut["compare"]["baseline"] == "tiny_rnn"
    comparison = json.loads((workspace / "results" / "comparison.json").read_text())
    stamps = [json.loads((workspace / "metrics" / "tiny_rnn" / "seed3" / f"{name}.json").read_text())["provenance"]
              for name in ("train", "eval")]
    stamps += [comparison["provenance"]["compare"],
               json.loads((tmp_path / "probe" / "jobs1" / "metrics" / "tiny" / "seed1" / "train.json").read_text())[
                   "provenance"]]
    assert [found["git"] for found in stamps] == [recorded] * 4
