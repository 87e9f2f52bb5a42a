"""The lecture companion (examples/lecture_companion.ipynb): a workspace's results, trained models and claims as the
notebook shows them, one function per idea of the course "RNNs or Transformers?".

Every figure comes from the stages' outputs or from the trained models' own weights; nothing here trains or scores
anew, except BLEU worked out by hand, which agrees with sacreBLEU's figure exactly. Each reader of a stage output
refuses a workspace where that stage has not run with one line naming the make target that runs it.
"""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from sacrebleu.metrics import BLEU

from nmtbench import figures
from nmtbench.config import ConfigError, Params, load_params
from nmtbench.data.subwords import BOS, EOS, PAD
from nmtbench.data.tokenizer import load_tokenized
from nmtbench.decoding.search import BeamStep, beam_search, greedy
from nmtbench.decoding.translator import Translator
from nmtbench.experiments import columns_of, dvc_exp_show, scores_of
from nmtbench.files import read_json
from nmtbench.run_paths import RESULTS, RunPaths

COMPARISON, FLOPS_CURVES, CLAIMS = RESULTS / "comparison.json", RESULTS / "flops_curves.csv", RESULTS / "claims.json"
# what the notebook reads, and the make target that writes it when run in the workspace
NEEDED = {COMPARISON: "make repro", FLOPS_CURVES: "make repro", CLAIMS: "make claims"}


class NotRunYet(Exception):
    """A stage output the notebook reads is missing; the message names the make target that writes it."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows what this returns in place of the traceback: the notebook's cell stops with the one line
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class Workspace:
    root: Path
    params: Params
    comparison: dict  # results/comparison.json

    @property
    def seed(self) -> int:
        return self.params.seeds[0]  # each model is shown by its first seed's run

    @property
    def split(self) -> str:
        return self.comparison["splits"][0]  # the first test set: the headline's

    def run(self, model: str) -> RunPaths:
        return RunPaths(model, self.seed, self.root)


def open_workspace(folder: str | Path) -> Workspace:
    """The workspace in folder (the project itself, or one `nmtbench workspace` made), with every output the
    notebook reads; NotRunYet names what is missing and the make target that writes it."""
    root = Path(folder).resolve()
    if not (root / "params.yaml").is_file():
        raise NotRunYet(f"{root} has no params.yaml, so it is no workspace: `make smoke` in the project builds "
                        "runs/smoke, or name the project's own folder after `make repro`")
    missing = [f"{path} (`{target}`)" for path, target in NEEDED.items() if not (root / path).is_file()]
    if missing:
        raise NotRunYet(f"{root} lacks {', '.join(missing)}; the make target beside each, run in {root}, writes it")
    try:
        comparison = read_json(root / COMPARISON, f"delete it and rerun `{NEEDED[COMPARISON]}` in {root}")
    except ConfigError as error:  # a copy cut short: the notebook's one line, not json's traceback
        raise NotRunYet(str(error)) from None
    return Workspace(root, load_params(root / "params.yaml"), comparison)


def lecture_pair(ws: Workspace) -> tuple[str, str]:
    """(RNN, Transformer): the recurrent model with attention and the encoder-decoder Transformer with the best
    validation figures (best val BLEU, else val loss), as the verdict picks its contrasts: never on the test sets."""
    def on_val(name: str) -> float:
        row = ws.comparison["models"][name]
        return row["best_val_bleu"]["mean"] if row["best_val_bleu"] else -row["best_val_loss"]["mean"]

    trained = [name for name in ws.comparison["models"] if name in ws.params.models]  # outside systems aside
    blocks = {name: ws.params.models[name] for name in trained}
    rnns = [name for name, block in blocks.items() if block["family"] == "rnn"
            and block.get("attention", "none") != "none"]
    transformers = [name for name, block in blocks.items() if block["family"] == "transformer"]
    if not (rnns and transformers):
        raise NotRunYet(f"{ws.root}: the notebook compares an RNN with attention and an encoder-decoder Transformer; "
                        f"params.yaml's models have {'none of either' if not rnns + transformers else 'only one'} "
                        "(add e.g. lstm_attention_general and transformer, then `make repro`)")
    return max(rnns, key=on_val), max(transformers, key=on_val)


def comparison_frame(ws: Workspace) -> pd.DataFrame:
    """The comparison on the first test set, a row per model: size, BLEU with its bootstrap 95% interval and
    whether it differs from the baseline's (p < 0.05), decoding and training speed; means over seeds."""
    split, rows = ws.split, {}
    for name, row in ws.comparison["models"].items():
        test = row[split]["bootstrap"]
        rows[name] = {"parameters": row.get("params"), "BLEU": row[split]["bleu"]["mean"],
                      "95% CI": f"[{test['mean'] - test['ci']:.2f}, {test['mean'] + test['ci']:.2f}]",
                      "p vs baseline": test["p_value"], "differs": test["significant"],
                      "decoding sentences/s": _mean(row[split].get("sentences_per_s")),
                      "training tokens/s": _mean(row.get("train_tokens_per_s")),
                      "training minutes": _mean(row.get("train_seconds"), 1 / 60)}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = f"model ({split}; baseline {ws.comparison['baseline']})"
    return frame


def _mean(spread: dict | None, scale: float = 1.0) -> float | None:
    return None if not spread else spread["mean"] * scale


def compute_plot(ws: Workspace) -> bytes:
    """Validation BLEU against training FLOPs, a line per run (results/flops_curves.csv), as PNG."""
    curves: dict[str, list[dict]] = {}
    with (ws.root / FLOPS_CURVES).open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            curves.setdefault(row["run"], []).append({"train_flops": float(row["train_flops"]),
                                                      "val_bleu": float(row["val_bleu"])})
    return figures.flops_curves(curves)


def load_translator(ws: Workspace, model: str) -> Translator:
    """The model's first-seed run, decoding with the workspace's evaluate settings."""
    paths = ws.run(model)
    if not paths.checkpoint.is_file():
        raise NotRunYet(f"{paths.checkpoint} is not there: its training has not run; `make repro` in {ws.root}")
    return Translator.from_model_dir(paths.model_dir, ws.params.evaluate)


def translations(translators: dict[str, Translator], sentence: str, beams: tuple[int, ...] = (1, 5)) -> pd.DataFrame:
    """Each model's translation of sentence at each beam size (beam 1 is greedy decoding exactly)."""
    return pd.DataFrame({f"beam {beam}": {name: _with_beam(translator, beam).translate([sentence])[0][0][0]
                                          for name, translator in translators.items()} for beam in beams})


def _with_beam(translator: Translator, beam: int) -> Translator:
    return Translator(translator.model, translator.tokenizer, translator.cfg.model_copy(update={"beam": beam}))


def _source(translator: Translator, sentence: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """sentence as a batch of one on the model's device: (src (1, S), mask (1, S), length budget (1,)), the budget
    the translator decodes it with."""
    source = translator.tokenizer.encode(sentence)
    src = torch.tensor([source], device=next(translator.model.parameters()).device)  # (1, S)
    mask = src != PAD
    return src, mask, translator.budget(mask, [source])


def beam_trace(translator: Translator, sentence: str, beam: int = 5) -> pd.DataFrame:
    """The beam search of sentence step by step, as the evaluate stage decodes (its length penalty and budget):
    a row per step, a column per live beam (its text and summed log-probability, best first) and the hypotheses
    that ended at that step with their length-penalised scores, the figure that ranks them."""
    cfg = translator.cfg
    src, mask, budget = _source(translator, sentence)
    trace: list[list[BeamStep]] = [[]]
    beam_search(translator.model, src, mask, BOS, EOS, budget, beam=beam, alpha=cfg.alpha, penalty=cfg.length_penalty,
                min_len=cfg.min_len, no_repeat_ngram=cfg.no_repeat_ngram, trace=trace)
    text = translator.tokenizer.decode
    rows = [{**{f"beam {k + 1}": f"{text(tokens)} ({lp:.2f})" for k, (tokens, lp) in enumerate(step.live)},
             "ended here": "; ".join(f"{text(h.tokens)}{' </s>' if h.ended else ' (budget)'} ({h.score:.2f})"
                                     for h in step.ended)}
            for step in trace[0]]
    frame = pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1, name="step")).fillna("")
    return frame[[*(column for column in frame if column != "ended here"), "ended here"]]


def attention_map(translator: Translator, sentence: str) -> dict:
    """Greedy decoding of sentence with the weights each output step puts on the source pieces, in the form of
    the evaluate stage's attention.json (figures.attention_grid draws it); weights None for a model without
    attention. A Transformer's are its last decoder layer's cross-attention, heads averaged."""
    src, mask, budget = _source(translator, sentence)
    attention = [[]]
    (target,) = greedy(translator.model, src, mask, BOS, EOS, budget, attention)
    ended = len(target) < int(budget[0])  # the last step chose eos, and has a row of weights too
    length = src.size(1)
    return {"source_pieces": translator.tokenizer.source.sp.id_to_piece(src[0].tolist()),
            "target_pieces": translator.tokenizer.target.sp.id_to_piece(target) + (["</s>"] if ended else []),
            # a decoder-only model also attends to its own output: keep the weights on the source
            "weights": [[float(w) for w in row[:length]] for row in attention[0]] or None}


@dataclass(frozen=True)
class BleuSteps:
    """BLEU worked out by hand: the n-gram table, the lengths and the brevity penalty, and the figure."""
    table: pd.DataFrame  # a row per n-gram order
    hypothesis_length: int
    reference_length: int
    brevity_penalty: float
    bleu: float


ORDERS = 4  # BLEU's n-grams: 1 to 4
# sacreBLEU's settings for one sentence: 13a tokens, exp smoothing (a k-th order with no match counts 1 / 2^k
# matches), and effective order (orders the hypothesis is too short to have are left out)
SENTENCE_BLEU = BLEU(effective_order=True)
CORPUS_BLEU = BLEU()  # the compare stage's: 13a, exp smoothing, all four orders


def _ngrams(text: str) -> tuple[int, list[Counter]]:
    """(length in 13a tokens, a Counter of n-grams per order 1 to 4)."""
    tokens = SENTENCE_BLEU.tokenizer(text.rstrip()).split()  # sacreBLEU's own 13a tokenizer, as it applies it
    return len(tokens), [Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
                         for n in range(1, ORDERS + 1)]


def _statistics(hypothesis: str, reference: str) -> tuple[int, int, list[Counter], list[Counter]]:
    """(hypothesis length, reference length, hypothesis n-grams, the matched ones: each clipped to the
    number of times the reference has it)."""
    hyp_length, hyp = _ngrams(hypothesis)
    ref_length, ref = _ngrams(reference)
    return hyp_length, ref_length, hyp, [counts & theirs for counts, theirs in zip(hyp, ref)]


def bleu_by_hand(hypothesis: str, reference: str) -> BleuSteps:
    """Sentence BLEU step by step, with SENTENCE_BLEU's settings; its bleu equals sacreBLEU's exactly."""
    hyp_length, ref_length, hyp, matched = _statistics(hypothesis, reference)
    steps = _steps([sum(c.values()) for c in matched], [sum(c.values()) for c in hyp], hyp_length, ref_length, True)
    steps.table["matched n-grams"] = [", ".join(" ".join(g) + (f" x{k}" if k > 1 else "") for g, k in c.items())
                                      for c in matched]
    return steps


def corpus_bleu_by_hand(hypotheses: list[str], references: list[str]) -> BleuSteps:
    """Corpus BLEU step by step, with CORPUS_BLEU's settings: the matches, n-grams and lengths of every sentence
    summed first, then one precision per order and one brevity penalty; its bleu equals sacreBLEU's exactly."""
    matches, totals, hyp_length, ref_length = [0] * ORDERS, [0] * ORDERS, 0, 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        h, r, hyp, matched = _statistics(hypothesis, reference)
        hyp_length, ref_length = hyp_length + h, ref_length + r
        matches = [m + sum(c.values()) for m, c in zip(matches, matched)]
        totals = [t + sum(c.values()) for t, c in zip(totals, hyp)]
    return _steps(matches, totals, hyp_length, ref_length, False)


def _steps(matches: list[int], totals: list[int], hyp_length: int, ref_length: int, effective: bool) -> BleuSteps:
    """Precisions (exp-smoothed), brevity penalty and BLEU from the counts, in sacreBLEU's order of operations
    (precisions in percent, BLEU = BP x exp(mean log precision)), so the two figures agree to the last bit."""
    brevity = 1.0 if hyp_length >= ref_length else math.exp(1 - ref_length / hyp_length) if hyp_length else 0.0
    used, zeros = [], 0  # the precision each order contributes, in percent; None: left out
    for matched, total in zip(matches, totals):
        if total == 0:  # the hypothesis is shorter than n: no n-gram of this order or higher
            used += [None] * (ORDERS - len(used))
            break
        if matched == 0:
            zeros += 1
        used.append(100.0 * matched / total if matched else 100.0 / (2 ** zeros * total))
    kept = [p for p in used if p is not None]
    if not any(matches) or (not effective and len(kept) < ORDERS):
        bleu = 0.0  # no match at all; or, over all four orders, an order with nothing to match
    else:
        bleu = brevity * math.exp(sum(math.log(p) for p in kept) / len(kept))
    table = pd.DataFrame({"hypothesis n-grams": totals, "matched (clipped)": matches,
                          "precision %": [100.0 * m / t if t else None for m, t in zip(matches, totals)],
                          "used %": used}, index=pd.RangeIndex(1, ORDERS + 1, name="n"))
    return BleuSteps(table, hyp_length, ref_length, brevity, bleu)


def sacrebleu_sentence(hypothesis: str, reference: str) -> float:
    return SENTENCE_BLEU.sentence_score(hypothesis, [reference]).score


def sacrebleu_corpus(hypotheses: list[str], references: list[str]) -> float:
    return CORPUS_BLEU.corpus_score(hypotheses, [references]).score


def translated_split(ws: Workspace, model: str) -> pd.DataFrame:
    """The first test set's sources and references beside the model's translations as evaluate wrote them, and
    each translation's own sentence BLEU."""
    split = load_tokenized(ws.root / "data/tokenized")[ws.split]
    path = ws.run(model).translation(ws.split)
    if not path.is_file():
        raise NotRunYet(f"{path} is not there: the evaluation has not run; `make repro` in {ws.root}")
    hypotheses = path.read_text(encoding="utf-8").split("\n")[:-1]
    if len(hypotheses) != len(split):  # a line lost would shift every translation off its source
        raise NotRunYet(f"{path} has {len(hypotheses)} lines for the {len(split)} sentences of {ws.split}, so it is "
                        f"not the translation the evaluation wrote; `make repro` in {ws.root} writes it again")
    return pd.DataFrame({"source": split["src"], "reference": split["tgt"], "hypothesis": hypotheses,
                         "sentence BLEU": list(map(sacrebleu_sentence, hypotheses, split["tgt"]))})


def claims_frame(ws: Workspace, numbers: list[int]) -> pd.DataFrame:
    """The analyze stage's verdicts on these claims (results/claims.json), a row per claim."""
    rows = {row["claim"]: row for row in json.loads((ws.root / CLAIMS).read_text())["verdicts"]}
    frame = pd.DataFrame([rows[n] for n in numbers]).set_index("claim")
    return frame[["text", "measurement", "verdict", "plot"]]


def claim_plot(ws: Workspace, plot: str) -> bytes:
    """A plot of the analyze stage, as PNG: plot as claims.json names it, e.g. claims/complexity.png."""
    return (ws.root / RESULTS / plot).read_bytes()


def experiment_command(model: str, changes: dict[str, object], name: str) -> list[str]:
    """`dvc exp run` of the pipeline with changes to one model's block ({"hidden_dim": 64}; "train.lr" sets that
    model's own train key). Only that model's stages and those comparing the models run; the others are up to
    date. In the workspace, as DVC runs experiments by default: a temporary copy (--temp) would retrain every
    model, since DVC keeps no run cache for the trainings' persistent model folders."""
    return ["dvc", "exp", "run", "-n", name,
            *(arg for key, value in changes.items() for arg in ("-S", f"++models.{model}.{key}={_hydra(value)}"))]


def _hydra(value) -> str:
    """A value as DVC's -S reads it (Hydra's override grammar): a dict as {key:value,...}."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{_hydra(item)}" for key, item in value.items()) + "}"
    return str(value)


def run_experiment(ws: Workspace, model: str, changes: dict[str, object], name: str) -> None:
    """Run experiment_command in the workspace with this interpreter's dvc, unless an experiment of that name has
    scored the model already (the same changes again would find nothing to do); dvc's output when it fails."""
    if scores_of(columns_of(dvc_exp_show(ws.root)).get(name, {})).get(model) is not None:
        return
    command = experiment_command(model, changes, name)
    # the stages call `nmtbench`: this interpreter's scripts first on PATH, wherever Jupyter was started from
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run([sys.executable, "-m", *command], cwd=ws.root, capture_output=True, text=True,
                          env={**os.environ, "PATH": path})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def experiments_frame(ws: Workspace) -> pd.DataFrame:
    """Every model's BLEU (results/bleu.json, the first test set) in the workspace and each DVC experiment: a
    column each, as `nmtbench experiments` prints them."""
    return pd.DataFrame({label: scores_of(data) for label, data in columns_of(dvc_exp_show(ws.root)).items()})


def where_it_lands(ws: Workspace, model: str, experiment: str) -> pd.DataFrame:
    """The models ranked by BLEU as the workspace was opened (before the experiment), with the experiment's run of
    model among them, best first."""
    bleu = {name: row[ws.split]["bleu"]["mean"] for name, row in ws.comparison["models"].items()}
    ranked = {**bleu, f"{model} ({experiment})": experiments_frame(ws).at[model, experiment]}
    return pd.Series(ranked, name="BLEU").sort_values(ascending=False).to_frame()
