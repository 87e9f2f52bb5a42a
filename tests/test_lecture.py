"""The lecture companion's functions (nmtbench.lecture) on hand-made workspaces and the hand-searchable Bigram model;
the notebook itself runs end to end on the smoke pipeline in tests/test_pipeline.py."""
import json
import math
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import yaml

from helpers.models import Bigram
from helpers.project import ROOT, write_tiny_project
from nmtbench import lecture
from nmtbench.config import DecodeConfig, load_params, parse_params
from nmtbench.decoding.translator import Translator
from nmtbench.lecture import NotRunYet, Workspace

SPLIT = "test_2016_flickr"


def scores(bleu: float, p_value: float | None, significant: bool | None, speed: float | None) -> dict:
    return {"bleu": {"mean": bleu}, "sentences_per_s": None if speed is None else {"mean": speed},
            "bootstrap": {"mean": bleu + 0.1, "ci": 1.5, "p_value": p_value, "significant": significant}}


def trained(params: int, val_bleu: float, test: dict, minutes: float = 1.0) -> dict:
    return {"params": params, "best_val_bleu": {"mean": val_bleu}, "best_val_loss": {"mean": 2.0},
            "train_seconds": {"mean": minutes * 60}, "train_tokens_per_s": {"mean": 5000.0}, SPLIT: test}


COMPARISON = {"splits": [SPLIT], "baseline": "transformer", "models": {
    "transformer": trained(1000, 20.0, scores(25.0, None, None, 80.0), minutes=2.0),
    "transformer_sparse": trained(1100, 22.0, scores(24.0, 0.2, False, 70.0)),
    "lstm": trained(900, 25.0, scores(12.0, 0.001, True, 100.0)),
    "lstm_attention_dot": trained(950, 19.0, scores(26.0, 0.3, False, 90.0)),
    "lstm_attention_general": trained(960, 21.0, scores(23.0, 0.04, True, 85.0)),
    "outside": {"params": None, "external": True, "best_val_bleu": None, "best_val_loss": None,
                SPLIT: scores(30.0, 0.0, True, None)},
}}


def workspace(tmp_path, comparison=COMPARISON) -> Workspace:
    """params.yaml's defaults with the comparison's own models (not the outside system), in tmp_path."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["models"] = {name: raw["models"][name] for name in comparison["models"] if name in raw["models"]}
    return Workspace(tmp_path, parse_params(raw), comparison)


def test_a_folder_without_params_is_no_workspace(tmp_path):
    with pytest.raises(NotRunYet) as refused:
        lecture.open_workspace(tmp_path)
    assert str(refused.value) == (f"{tmp_path} has no params.yaml, so it is no workspace: `make smoke` in the project "
                                  "builds runs/smoke, or name the project's own folder after `make repro`")


def test_open_workspace_names_the_make_target_of_every_missing_output(tmp_path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results").mkdir()
    (tmp_path / "results/comparison.json").write_text(json.dumps(COMPARISON))
    with pytest.raises(NotRunYet) as refused:
        lecture.open_workspace(tmp_path)
    assert str(refused.value) == (f"{tmp_path} lacks results/flops_curves.csv (`make repro`), results/claims.json "
                                  f"(`make claims`); the make target beside each, run in {tmp_path}, writes it")
    (tmp_path / "results/flops_curves.csv").write_text("run,train_flops,val_bleu\n")
    (tmp_path / "results/claims.json").write_text("{}")
    ws = lecture.open_workspace(tmp_path)
    assert (ws.root, ws.seed, ws.split, ws.comparison) == (tmp_path, 42, SPLIT, COMPARISON)
    assert ws.params == load_params(ROOT / "params.yaml")
    assert ws.run("gru").checkpoint == tmp_path / "models/gru/seed42/best.ckpt"


def test_the_notebook_shows_a_stage_not_run_yet_in_one_line(tmp_path, capsys):
    """#69: docs/notebook.md promises one line; IPython showed the frames that raised it."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(lecture=lecture, folder=str(tmp_path))
    assert not shell.run_cell("lecture.open_workspace(folder)").success
    assert capsys.readouterr().out == (f"NotRunYet: {tmp_path} has no params.yaml, so it is no workspace: `make "
                                       "smoke` in the project builds runs/smoke, or name the project's own folder "
                                       "after `make repro`\n")


def test_open_workspace_names_a_truncated_comparison_and_its_make_target(tmp_path):
    """#69: a comparison.json cut short is the notebook's one line naming it, not a bare JSONDecodeError."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results").mkdir()
    for name, text in (("comparison.json", json.dumps(COMPARISON)[:40]), ("flops_curves.csv", "run\n"),
                       ("claims.json", "{}")):
        (tmp_path / "results" / name).write_text(text)
    with pytest.raises(NotRunYet) as refused:
        lecture.open_workspace(tmp_path)
    assert re.fullmatch(rf"{re.escape(str(tmp_path))}/results/comparison.json is not valid JSON \(.*\); delete it "
                        rf"and rerun `make repro` in {re.escape(str(tmp_path))}", str(refused.value))


def test_the_pair_is_the_best_attention_rnn_and_transformer_on_val(tmp_path):
    """lstm has the best val BLEU but no attention; the test sets (BLEU 26 for dot attention) play no part."""
    assert lecture.lecture_pair(workspace(tmp_path)) == ("lstm_attention_general", "transformer_sparse")
    only_transformers = {**COMPARISON, "models": {name: COMPARISON["models"][name] for name in ("transformer", "lstm")}}
    with pytest.raises(NotRunYet, match="models have only one \\(add e.g. lstm_attention_general and transformer"):
        lecture.lecture_pair(workspace(tmp_path, only_transformers))


def test_the_comparison_frame_holds_each_models_figures_on_the_first_test_set(tmp_path):
    frame = lecture.comparison_frame(workspace(tmp_path))
    assert frame.index.name == "model (test_2016_flickr; baseline transformer)"
    numbers = ["parameters", "BLEU", "decoding sentences/s", "training tokens/s", "training minutes"]
    assert frame.loc["transformer", numbers].tolist() == [1000, 25.0, 80.0, 5000.0, 2.0]
    assert frame.loc["transformer", "95% CI"] == "[23.60, 26.60]"  # the bootstrap mean 25.1 +- 1.5
    assert frame.loc["transformer", ["p vs baseline", "differs"]].isna().all()  # the baseline: nothing to test
    assert frame.loc["lstm", "differs"] and frame.loc["lstm", "p vs baseline"] == 0.001
    assert frame.loc["outside"].isna()[["parameters", "training minutes"]].all()


def test_the_compute_plot_draws_a_line_per_run(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "results/flops_curves.csv").write_text(
        "run,train_flops,val_bleu\nlstm/seed42,1e+09,2.5\nlstm/seed42,2e+09,4\ntransformer/seed42,3e+09,5\n")
    drawn = []
    monkeypatch.setattr(lecture.figures, "flops_curves", lambda curves: drawn.append(curves) or b"png")
    assert lecture.compute_plot(workspace(tmp_path)) == b"png"
    assert drawn == [{"lstm/seed42": [{"train_flops": 1e9, "val_bleu": 2.5}, {"train_flops": 2e9, "val_bleu": 4.0}],
                      "transformer/seed42": [{"train_flops": 3e9, "val_bleu": 5.0}]}]


PIECES = {Bigram.A: "a", Bigram.B: "b", 6: "ein", 7: "hund"}


class Pieces:
    """A tokenizer of whole words over PIECES: the Bigram's outputs and two source words."""
    source = target = SimpleNamespace(sp=SimpleNamespace(id_to_piece=lambda ids: [PIECES[i] for i in ids]))

    def encode(self, text):
        return [next(i for i, piece in PIECES.items() if piece == word) for word in text.split()]

    def decode(self, ids):
        return " ".join(PIECES[i] for i in ids)


def bigram_translator(**cfg) -> Translator:
    return Translator(Bigram(), Pieces(), DecodeConfig(**{"length_penalty": "none", "max_len_a": 0.0,
                                                          "max_len_b": 5, "device": "cpu", **cfg}))


def test_the_beam_trace_shows_the_search_worked_by_hand():
    """Beam 2 (the Bigram's table): a 0.6 and b 0.3 go on; then a+eos 0.30 and b+eos 0.27 end, a b 0.24 and a a 0.06
    are the live beams, and two ended hypotheses stop the search."""
    trace = lecture.beam_trace(bigram_translator(), "ein hund", beam=2)
    assert trace.index.name == "step" and list(trace.index) == [1, 2]
    assert trace.to_dict("index") == {
        1: {"beam 1": f"a ({math.log(0.6):.2f})", "beam 2": f"b ({math.log(0.3):.2f})", "ended here": ""},
        2: {"beam 1": "a b (-1.43)", "beam 2": "a a (-2.81)", "ended here": "a </s> (-1.20); b </s> (-1.31)"}}


def test_a_beam_trace_ends_with_what_the_length_budget_stopped():
    trace = lecture.beam_trace(bigram_translator(max_len_b=1), "ein hund", beam=2)
    assert trace.to_dict("index") == {
        1: {"beam 1": "a (-0.51)", "beam 2": "b (-1.20)", "ended here": ""},
        2: {"beam 1": "", "beam 2": "", "ended here": "a (budget) (-0.51); b (budget) (-1.20)"}}


def test_translations_at_each_beam_size():
    """Greedy takes a (0.6) then eos (0.5); beam 2 ranks a+eos (0.30) over b+eos (0.27): a either way, b nowhere.
    Under a budget of one token greedy stops at a, and beam 1 is greedy exactly."""
    frame = lecture.translations({"bigram": bigram_translator(), "short": bigram_translator(max_len_b=1)}, "ein hund",
                                 beams=(1, 2))
    assert frame.to_dict("index") == {"bigram": {"beam 1": "a", "beam 2": "a"}, "short": {"beam 1": "a", "beam 2": "a"}}


def test_the_attention_map_holds_a_row_per_output_step():
    """Greedy a, then eos: two rows, the Bigram's even weights on the two source words."""
    assert lecture.attention_map(bigram_translator(), "ein hund") == {
        "source_pieces": ["ein", "hund"], "target_pieces": ["a", "</s>"], "weights": [[0.5, 0.5], [0.5, 0.5]]}


def test_an_untrained_model_is_refused_with_the_target_that_trains_it(tmp_path):
    with pytest.raises(NotRunYet) as refused:
        lecture.load_translator(workspace(tmp_path), "lstm")
    assert str(refused.value) == (f"{tmp_path}/models/lstm/seed42/best.ckpt is not there: its training has not run; "
                                  f"`make repro` in {tmp_path}")


def test_sentence_bleu_by_hand_step_by_step():
    """6 hypothesis words (13a splits off the full stop) against 7: 4 of 6 unigrams match, 'the' once only (the
    reference has one), 2 of 5 bigrams, 1 of 4 trigrams, no 4-gram: that order counts 1/2 match of 3."""
    steps = lecture.bleu_by_hand("the the cat sat down.", "the cat sat on a mat.")
    assert (steps.hypothesis_length, steps.reference_length) == (6, 7)
    assert steps.brevity_penalty == math.exp(1 - 7 / 6)
    assert steps.table.to_dict("list") == {
        "hypothesis n-grams": [6, 5, 4, 3], "matched (clipped)": [4, 2, 1, 0],
        "precision %": [400 / 6, 40.0, 25.0, 0.0], "used %": [400 / 6, 40.0, 25.0, 100 / 6],
        "matched n-grams": ["the, cat, sat, .", "the cat, cat sat", "the cat sat", ""]}
    assert steps.bleu == math.exp(1 - 7 / 6) * math.exp(sum(map(math.log, (400 / 6, 40.0, 25.0, 100 / 6))) / 4)
    assert steps.bleu == lecture.sacrebleu_sentence("the the cat sat down.", "the cat sat on a mat.")


@pytest.mark.parametrize("hypothesis, reference", [
    ("a man", "a man rides a bike ."),  # too short for 3- and 4-grams: the effective order is 2
    ("x y z", "a b c"),  # no match at all: 0
    ("", "a b"),  # nothing: 0, no brevity penalty to divide by
    ("a a a a", "a a b"),  # clipped to the reference's two
    ("Ein Mann fährt Rad, schnell.", "Ein Mann fährt Rad."),  # longer than the reference: no penalty
])
def test_sentence_bleu_by_hand_is_sacrebleus_exactly(hypothesis, reference):
    assert lecture.bleu_by_hand(hypothesis, reference).bleu == lecture.sacrebleu_sentence(hypothesis, reference)


def test_corpus_bleu_pools_the_counts_and_is_not_the_mean_of_sentence_bleus():
    """An exact sentence and a one-word one: pooled, every n-gram matches and the brevity penalty is of 8 words
    against 10 (77.88); averaged, the short one's own penalty, of 1 word against 3 (13.53), drags the mean to
    56.77."""
    hypotheses, references = ["a dog runs on the grass .", "cat"], ["a dog runs on the grass .", "a cat sleeps"]
    pooled = lecture.corpus_bleu_by_hand(hypotheses, references)
    assert pooled.table["hypothesis n-grams"].tolist() == [8, 6, 5, 4]
    assert pooled.table["matched (clipped)"].tolist() == [8, 6, 5, 4]
    assert (pooled.hypothesis_length, pooled.reference_length) == (8, 10)
    assert pooled.bleu == lecture.sacrebleu_corpus(hypotheses, references) == pytest.approx(math.exp(1 - 10 / 8) * 100)
    mean = sum(map(lecture.sacrebleu_sentence, hypotheses, references)) / 2
    assert mean == pytest.approx((100 + math.exp(1 - 3) * 100) / 2)


def test_the_translated_split_lines_up_sources_references_and_translations(make_data_mirror, tmp_path):
    """The tiny mirror's test_2016_flickr (A cat. / Two birds fly.), its first sentence translated word for word."""
    mirror, checksums = make_data_mirror()
    write_tiny_project(tmp_path, mirror, checksums)
    ws = workspace(tmp_path)
    with pytest.raises(NotRunYet, match="test_2016_flickr.txt is not there: the evaluation has not run; `make repro`"):
        lecture.translated_split(ws, "lstm")
    ws.run("lstm").results_dir.mkdir(parents=True)
    ws.run("lstm").translation(SPLIT).write_text("Eine Katze.\n", encoding="utf-8")  # #69: a line short
    with pytest.raises(NotRunYet, match=r"test_2016_flickr.txt has 1 lines for the 2 sentences of test_2016_flickr, "
                                        r"so it is not the translation the evaluation wrote; `make repro` in "):
        lecture.translated_split(ws, "lstm")
    ws.run("lstm").translation(SPLIT).write_text("Eine Katze.\nVögel.\n", encoding="utf-8")
    frame = lecture.translated_split(ws, "lstm")
    assert frame.drop(columns="sentence BLEU").to_dict("list") == {
        "source": ["A cat.", "Two birds fly."], "reference": ["Eine Katze.", "Zwei Vögel fliegen."],
        "hypothesis": ["Eine Katze.", "Vögel."]}
    assert frame["sentence BLEU"].tolist() == [lecture.sacrebleu_sentence(h, r) for h, r in (
        ("Eine Katze.", "Eine Katze."), ("Vögel.", "Zwei Vögel fliegen."))]


def test_claims_frame_and_plots(tmp_path):
    (tmp_path / "results/claims").mkdir(parents=True)
    verdicts = [{"claim": n, "text": f"claim {n}", "measurement": f"m{n}", "verdict": "holds",
                 "plot": "claims/complexity.png"} for n in (1, 2, 3)]
    (tmp_path / "results/claims.json").write_text(json.dumps({"verdicts": verdicts}))
    (tmp_path / "results/claims/complexity.png").write_bytes(b"png")
    frame = lecture.claims_frame(workspace(tmp_path), [3, 2])
    assert frame.to_dict("index") == {n: {"text": f"claim {n}", "measurement": f"m{n}", "verdict": "holds",
                                          "plot": "claims/complexity.png"} for n in (3, 2)}
    assert list(frame.index) == [3, 2]
    assert lecture.claim_plot(workspace(tmp_path), "claims/complexity.png") == b"png"


def test_the_experiment_command_changes_one_models_block():
    assert lecture.experiment_command("lstm", {"hidden_dim": 64, "train.budget": {"kind": "flops", "value": 1e12}},
                                      "wider") == [
        "dvc", "exp", "run", "-n", "wider", "-S", "++models.lstm.hidden_dim=64",
        "-S", "++models.lstm.train.budget={kind:flops,value:1000000000000.0}"]


SHOWN = [{"rev": "workspace", "name": None, "data": {"metrics": {"results/bleu.json": {"data": {
             "transformer": 25.0, "lstm": 12.0}}}}},
         {"rev": "abc1234def", "name": "main", "data": {}, "experiments": [{"revs": [
             {"rev": "e1", "name": "wider", "data": {"metrics": {"results/bleu.json": {"data": {
                 "transformer": 25.0, "lstm": 18.5}}}}}]}]}]


def test_the_experiments_run_lands_among_the_workspaces_models(tmp_path, monkeypatch):
    monkeypatch.setattr(lecture, "dvc_exp_show", lambda root: SHOWN)
    frame = lecture.experiments_frame(workspace(tmp_path))
    assert list(frame.columns) == ["workspace", "main", "wider"] and frame["main"].isna().all()
    assert frame[["workspace", "wider"]].to_dict() == {"workspace": {"transformer": 25.0, "lstm": 12.0},
                                                       "wider": {"transformer": 25.0, "lstm": 18.5}}
    landed = lecture.where_it_lands(workspace(tmp_path), "lstm", "wider")  # among the workspace as it was opened
    assert landed["BLEU"].to_dict() == {"outside": 30.0, "lstm_attention_dot": 26.0, "transformer": 25.0,
                                        "transformer_sparse": 24.0, "lstm_attention_general": 23.0,
                                        "lstm (wider)": 18.5, "lstm": 12.0}
    assert list(landed.index) == ["outside", "lstm_attention_dot", "transformer", "transformer_sparse",
                                  "lstm_attention_general", "lstm (wider)", "lstm"]


def test_an_experiment_runs_once_under_its_name(tmp_path, monkeypatch):
    monkeypatch.setattr(lecture, "dvc_exp_show", lambda root: SHOWN)
    ran = []
    monkeypatch.setattr(lecture.subprocess, "run", lambda command, **kwargs: ran.append((command, kwargs["cwd"]))
                        or subprocess.CompletedProcess(command, 0, "", ""))
    ws = workspace(tmp_path)
    lecture.run_experiment(ws, "lstm", {"hidden_dim": 64}, "wider")  # there already: nothing runs
    lecture.run_experiment(ws, "lstm", {"hidden_dim": 64}, "wide")
    assert [(command[2:], cwd) for command, cwd in ran] == [
        (["dvc", "exp", "run", "-n", "wide", "-S", "++models.lstm.hidden_dim=64"], tmp_path)]
