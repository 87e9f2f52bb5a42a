"""Tuning: the same number of trials for every model, seeded and resumable, on train and val only."""
import json
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from helpers.data import write_mirror
from helpers.postgres import postgres_server, server_bin
from helpers.project import TRAINED_MODELS, pipeline_env, write_tiny_project
from nmtbench.config import ConfigError, KnobConfig, TuneConfig, load_params
from nmtbench.training.tuning import open_study, search_space, study_name, tune, tuned_params, winner, with_values

SPACE = {"lr": {"low": 1.0e-4, "high": 5.0e-3, "log": True}, "warmup_steps": {"low": 0, "high": 200},
         "dropout": {"low": 0.0, "high": 0.5}}
# a trial of one step: the budget runs out at once, then ValidateLastStep scores it
TUNE = {"trials": 2, "budget": {"kind": "flops", "value": 1.0}, "heartbeat_seconds": 1,
        "space": {"transformer": SPACE, "rnn": SPACE}}


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    """A tiny tokenized project of a Transformer and an attention LSTM; copied per test, never changed."""
    folder = tmp_path_factory.mktemp("tuning")
    mirror, checksums = write_mirror(folder.parent / f"{folder.name}-mirror")
    raw = write_tiny_project(folder, mirror, checksums, TRAINED_MODELS)
    raw["tune"] = TUNE
    (folder / "params.yaml").write_text(yaml.safe_dump(raw))
    return folder


@pytest.fixture(scope="module")
def tuned(tokenized, tmp_path_factory):
    """The tiny project with both models tuned (2 trials each); copied per test, never changed."""
    folder = tmp_path_factory.mktemp("tuned") / "project"
    shutil.copytree(tokenized, folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "disabled")
        for model in TRAINED_MODELS:
            tune(load_params(folder / "params.yaml"), model, folder / "data/tokenized", folder)
    return folder


def copy(source, tmp_path, monkeypatch):
    folder = tmp_path / "project"
    shutil.copytree(source, folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    return folder


@pytest.fixture
def project(tokenized, tmp_path, monkeypatch):
    """The untuned tiny project in tmp_path/project, the current folder for the test."""
    return copy(tokenized, tmp_path, monkeypatch)


@pytest.fixture
def tuned_project(tuned, tmp_path, monkeypatch):
    """The tuned tiny project in tmp_path/project, the current folder for the test."""
    return copy(tuned, tmp_path, monkeypatch)


def set_tune(folder, **values):
    raw = yaml.safe_load((folder / "params.yaml").read_text())
    raw["tune"] = {**raw["tune"], **values}
    (folder / "params.yaml").write_text(yaml.safe_dump(raw))
    return load_params(folder / "params.yaml")


def trials(folder, model):
    return json.loads((folder / "tuning" / model / "trials.json").read_text())


def test_every_model_gets_the_same_trials_and_trial_0_is_untuned(tuned_project):
    params, project = load_params(), tuned_project
    for model in TRAINED_MODELS:
        found = yaml.safe_load((project / "tuned" / f"{model}.yaml").read_text())
        done = [t for t in trials(project, model) if t["state"] == "COMPLETE"]
        assert found["trials"] == len(done) == 2 and [t["number"] for t in done] == [0, 1]
        default = search_space(params, model)
        assert done[0]["default"] and done[0]["params"] == {name: value for name, (_, _, value) in default.items()}
        assert found["default_val_bleu"] == done[0]["value"]
        assert found["tuned_val_bleu"] == max(t["value"] for t in done)
        assert all(t["steps"] == 1 for t in done)  # every trial at the trial budget
        assert found["study"] == study_name(params, model, default, json.loads(
            (project / "data/tokenized/vocab.json").read_text())["sha256"])


def test_the_seeded_sampler_draws_the_same_trials_twice(tuned, project):
    first = trials(tuned, "tiny")  # tuned in another folder with the same params
    tune(load_params(), "tiny")
    assert [t["params"] for t in trials(project, "tiny")] == [t["params"] for t in first]
    assert first[1]["params"] != first[0]["params"]
    shutil.rmtree(project / "tuning")
    tune(set_tune(project, seed=1), "tiny")  # another seed, other draws
    assert trials(project, "tiny")[1]["params"] != first[1]["params"]


def test_the_winner_has_the_best_bleu_then_the_lowest_val_loss_among_the_counted_trials():
    study = optuna.create_study(direction="maximize")
    for bleu, loss, lr in ((0.0, 5.0, 1e-3), (0.0, 4.0, 2e-3), (0.0, 4.0, 3e-3), (9.0, 6.0, 4e-3)):
        study.add_trial(create_trial(value=bleu, params={"lr": lr}, distributions={"lr": FloatDistribution(1e-4, 1e-2)},
                                     user_attrs={"best_val_loss": loss, "default": lr == 1e-3}))
    space = {"lr": ("train", None, 1e-3)}
    # the fourth trial is beyond trials=3, so not counted; of three BLEU 0 trials the lower loss, then the earlier
    assert winner(study, 3, space) == {"trials": 3, "default_val_bleu": 0.0, "tuned_val_bleu": 0.0, "trial": 1,
                                       "params": {"train": {"lr": 2e-3}, "model": {}}}
    assert winner(study, 4, space)["trial"] == 3  # higher BLEU wins whatever its loss


def test_a_rerun_of_a_finished_study_trains_nothing(tuned_project, capfd):
    before = trials(tuned_project, "tiny")
    tune(load_params(), "tiny")
    assert trials(tuned_project, "tiny") == before
    assert "trials of tiny: 100%|██████████| 2/2" in capfd.readouterr().err  # its bar: every trial done already


def test_trials_0_leaves_training_as_it_is(project):
    params = set_tune(project, trials=0)
    assert tune(params, "tiny") == {"model": "tiny", "family": "transformer", "trials": 0, "params": {}}
    assert trials(project, "tiny") == [] and list((project / "tuning/tiny").iterdir()) == [
        project / "tuning/tiny/trials.json"]  # no study
    assert tuned_params(params, "tiny") == params


def test_training_uses_the_winner_and_refuses_a_stale_one(tuned_project):
    params, project = load_params(), tuned_project
    found = yaml.safe_load((project / "tuned/tiny_rnn.yaml").read_text())
    tuned = tuned_params(params, "tiny_rnn")
    assert tuned.train.lr == found["params"]["train"]["lr"]
    assert tuned.models["tiny_rnn"]["dropout"] == found["params"]["model"]["dropout"]
    assert tuned.models["tiny"] == params.models["tiny"]
    changed = set_tune(project, budget={"kind": "flops", "value": 2.0})
    with pytest.raises(ConfigError, match=r"^tuned/tiny_rnn.yaml: tuned for other params or data .*"
                                          r"run `dvc repro tune@tiny_rnn`"):
        tuned_params(changed, "tiny_rnn")


def test_a_killed_workers_trial_is_failed_retried_and_not_counted(project):
    params = load_params()
    space = search_space(params, "tiny")
    name = study_name(params, "tiny", space, json.loads((project / "data/tokenized/vocab.json").read_text())["sha256"])
    (project / "tuning/tiny").mkdir(parents=True)
    study = open_study(params.tune, name, project / "tuning/tiny")
    study.enqueue_trial({knob: value for knob, (_, _, value) in space.items()}, {"default": True})
    killed = study.ask()  # a worker took the untuned trial, beat once and died
    study._storage.record_heartbeat(killed._trial_id)
    time.sleep(2 * params.tune.heartbeat_seconds + 1)
    found = tune(params, "tiny")
    states = [(t["number"], t["state"], t.get("default", False)) for t in trials(project, "tiny")]
    assert states == [(0, "FAIL", True), (1, "COMPLETE", True), (2, "COMPLETE", False)]
    assert found["trials"] == 2 and found["default_val_bleu"] is not None


def test_tuning_never_opens_a_test_split(project):
    for split in load_params().data.eval_splits:
        shutil.rmtree(project / "data/tokenized/dataset" / split)  # any read of a test set now fails
    assert tune(load_params(), "tiny")["trials"] == 2


@pytest.mark.parametrize(("space", "message"), [
    ({"transformer": {"heads": {"low": 1, "high": 4}, "nope": {"low": 0, "high": 1}}},
     "tune.space.transformer.nope: not a tunable key; choose one of lr, warmup_steps, label_smoothing, "
     "gradient_clip_val, batch_tokens, schedule, accumulate_grad_batches or a key of family transformer ("),
    ({"transformer": {"dropout": {"low": 0.2, "high": 0.5}}},
     "tune.space.transformer.dropout: params.yaml's value 0.1 is outside the range; widen it, so that trial 0 "
     "(the untuned model) is part of the search"),
    ({"rnn": SPACE, "cnn": {**SPACE, "lr": {"low": 1.0e-4, "high": 1.0e-2}}},
     "tune.space: no search space for family transformer (models.tiny), and no one range of lr that every family "
     "shares; add tune.space.transformer"),
    ({}, "tune.space: no search space for family transformer (models.tiny), and no one range of lr"),
    ({"transformer": SPACE, "lstm": SPACE},
     "tune.space.lstm: not a family; name one of cnn, decoder_only, hybrid, rnn, transformer, or an own model's "
     "package.module:Class"),
])
def test_a_space_that_does_not_fit_the_model_is_refused_in_one_line(project, space, message):
    params = set_tune(project, space=space)
    with pytest.raises(ConfigError) as refused:
        search_space(params, "tiny")
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_family_without_a_space_searches_the_knobs_every_family_shares(project):
    """An own family (here the transformer, left out of tune.space) gets lr, warmup_steps, label_smoothing and
    dropout over the ranges the named families share, not a refusal; dropout only where its config has one."""
    from nmtbench.training.tuning import shared_knobs

    shared = {**SPACE, "label_smoothing": {"low": 0.0, "high": 0.3}, "heads": {"choices": [2]}}
    params = set_tune(project, space={"rnn": shared, "cnn": shared})
    space = search_space(params, "tiny")
    assert {name: knob.model_dump() for name, (_, knob, _) in space.items()} == {
        name: KnobConfig(**shared[name]).model_dump() for name in ("lr", "warmup_steps", "label_smoothing", "dropout")}
    assert [part for part, _, _ in space.values()] == ["train", "train", "train", "model"]
    assert "dropout" not in shared_knobs(params.tune.space, "own:Model", "own", fields={"embed_dim": None})


@pytest.mark.parametrize(("values", "message"), [
    ({"space": {"rnn": {"lr": {"low": 3, "high": 1}}}},
     "tune.space.rnn.lr: low 3 is not below high 1; swap or widen them"),
    ({"space": {"rnn": {"lr": 0.1}}},
     "tune.space.rnn.lr: expected {low: ..., high: ...} or {choices: [...]}, got 0.1"),
    ({"space": {"rnn": {"lr": {"low": 0, "high": 1, "log": True}}}},
     "tune.space.rnn.lr: a log scale needs low > 0, got 0"),
    ({"space": {"rnn": {"lr": {"low": "a", "high": 1}}}}, "tune.space.rnn.lr.low: expected a number, got 'a'"),
    ({"space": {"rnn": {"cell": {"choices": ["gru"], "low": 1}}}},
     "tune.space.rnn.cell: give either choices or low and high, not both"),
    ({"space": {"rnn": {"lr": {"high": 1}}}},
     "tune.space.rnn.lr: needs low and high (or choices), e.g. {low: 0.1, high: 0.3}"),
    ({"trials": 2, "budget": {"kind": "none"}}, "tune.budget.kind: none would let one trial run to max_epochs; give "
                                                "every trial a budget, e.g. {kind: flops, value: 5.5e+12}"),
    ({"budget": {"kind": "time"}}, "tune.budget.value: budget kind time needs a value (seconds for time, FLOPs for "
                                   "flops, e.g. 2.0e+15)"),
    ({"trials": -1}, "tune.trials: must be >= 0, got -1"),
    ({"storage": 5}, "tune.storage: expected str or null, got 5"),
])
def test_a_bad_tune_block_is_refused_in_one_line(values, message):
    with pytest.raises(ConfigError) as refused:
        TuneConfig(**values)
    assert str(refused.value) == message


def test_trials_need_val_bleu(project):
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["train"]["val_bleu_sentences"] = 0
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as refused:
        load_params()
    assert str(refused.value) == ("tune.trials: trials are scored by val BLEU, which train.val_bleu_sentences 0 "
                                  "turns off; set it above 0 (or null for the whole val split)")


def test_check_refuses_a_space_that_does_not_fit_a_model(project, capsys):
    from nmtbench.cli import main

    assert main(["check"]) == 0
    set_tune(project, space={"transformer": SPACE, "rnn": {"lr": {"low": 0.01, "high": 0.1}}})
    assert main(["check"]) == 2
    assert capsys.readouterr().err == ("nmtbench check: error: tune.space.rnn.lr: params.yaml's value 0.001 is "
                                       "outside the range; widen it, so that trial 0 (the untuned model) is part "
                                       "of the search\n")


def test_a_bad_storage_url_is_refused_without_its_password(project):
    params = set_tune(project, storage="nosuchdb://user:secret@host/db")
    with pytest.raises(ConfigError) as refused:
        tune(params, "tiny")
    assert str(refused.value).startswith("tune.storage: cannot open the nosuchdb storage (")
    assert "secret" not in str(refused.value)


def test_with_values_changes_only_the_model_tuned(project):
    params = load_params()
    changed = with_values(params, "tiny", {"train": {"lr": 0.01}, "model": {"dropout": 0.4}})
    assert (changed.train.lr, changed.models["tiny"]["dropout"]) == (0.01, 0.4)
    assert changed.models["tiny_rnn"] == params.models["tiny_rnn"] and params.train.lr != 0.01


@pytest.mark.parametrize("race", ["IntegrityError", "ProgrammingError", "OperationalError"])
def test_a_worker_that_loses_the_race_to_create_the_tables_tries_again(tmp_path, monkeypatch, race):
    """What two workers starting at once on a new PostgreSQL database make the slower one see: a row the other
    inserted first (IntegrityError, three workers started by hand) or a schema it created only in part
    (ProgrammingError, once in the two-worker test below under load). A lasting one ends in the one-line error."""
    import sqlalchemy

    real, calls, losses = optuna.create_study, [], {"raced": 2, "lasting": 5}

    def create_study(**kwargs):  # loses the race a number of times, then creates the study
        calls.append(kwargs["study_name"])
        if len(calls) <= losses[current]:
            raise getattr(sqlalchemy.exc, race)("CREATE TABLE studies", {}, Exception("the other worker's"))
        return real(**kwargs)

    monkeypatch.setattr(optuna, "create_study", create_study)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    current = "raced"
    study = open_study(TuneConfig(), "raced", tmp_path)
    assert (study.study_name, len(calls)) == ("raced", 3) and (tmp_path / "study.db").is_file()
    current, calls[:] = "lasting", []
    with pytest.raises(ConfigError, match=r"^tune.storage: cannot open the sqlite storage \(" + race + r"\); check "
                                          r"that the database is reachable and writable, then rerun$"):
        open_study(TuneConfig(), "lasting", tmp_path)


def storage(rdb: str):
    """The study's storage of a test: None (the SQLite file per model) or the URL of a throwaway PostgreSQL."""
    if rdb == "sqlite":
        return nullcontext(None)
    if server_bin() is None:
        pytest.skip("no PostgreSQL server to test tune.storage against: apt-get install postgresql (make test does "
                    "as root)")
    return postgres_server()


@pytest.mark.slow
@pytest.mark.parametrize("rdb", ["sqlite", "postgresql"])
def test_two_workers_share_one_study_without_losing_or_repeating_a_trial(project, rdb):
    """Workers on one machine share the SQLite file; on several, an RDB URL (a real server on the loopback)."""
    with storage(rdb) as url:
        set_tune(project, trials=5, storage=url)
        command = [sys.executable, "-m", "nmtbench", "tune", "tiny"]
        workers = [subprocess.Popen(command, cwd=project, env=pipeline_env(WANDB_MODE="disabled"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for worker in workers:
            _, errors = worker.communicate(timeout=300)
            assert worker.returncode == 0, errors[-2000:]
        params = load_params()
        study = open_study(params.tune, study_name(params, "tiny", search_space(params, "tiny"),
                           json.loads((project / "data/tokenized/vocab.json").read_text())["sha256"]),
                           project / "tuning/tiny")
        done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 5
    assert len({json.dumps(t.params, sort_keys=True) for t in done}) == 5  # no trial twice
    assert sum(bool(t.user_attrs.get("default")) for t in done) == 1
    assert yaml.safe_load((project / "tuned/tiny.yaml").read_text())["trials"] == 5
