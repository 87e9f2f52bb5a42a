"""Stage `evaluate@<name>-<seed>`: decode the test sets, detokenize, score against the untouched references.

Besides the scores it keeps what the report and the dashboard show: the attention of one fixed
sentence (`attention.json` beside the metrics) and, in an evaluation W&B run, every translation.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import torch

from nmtbench.config import ConfigError, Params
from nmtbench.data.subwords import BOS, EOS, PAD, Tokenizer
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.decoding.search import greedy, max_lengths
from nmtbench.decoding.translator import Translator, one_line
from nmtbench.evaluation.scoring import score
from nmtbench.files import atomic_dir, write_json, write_text
from nmtbench.loading import Run, load_model, resolve_device
from nmtbench.models.interface import Seq2Seq
from nmtbench.progress import progress_bar
from nmtbench.provenance import stamp
from nmtbench.run_paths import RunPaths
from nmtbench.tracking import finish_run, log_tables, run_tags, start_run

TRANSLATION_COLUMNS = ["index", "source", "reference", "hypothesis"]


def evaluate(params: Params, name: str, seed: int | None = None, tokenized_dir: Path = Path("data/tokenized"),
             root: Path = Path(".")) -> dict:
    """Evaluate one run of the grid: model `name` trained with `seed` (default: the first of params.seeds), with
    params as the model trains (Params.for_model, with its tuned values), whose run its checkpoint must be.

    Returns the scores of eval.json per split; the file holds them and, after the splits, their provenance.
    """
    started = time.perf_counter()
    block = params.model_block(name)
    seed = params.seeds[0] if seed is None else seed
    paths = RunPaths(name, seed, root)
    tokenizer = Tokenizer(tokenized_dir)
    trained = Run(name, block, params.train.model_dump(), seed, tuple(params.model_train.get(name) or ()))
    model = load_model(paths.checkpoint, tokenizer, resolve_device(params.evaluate.device, "evaluate.device"), trained)
    translator = Translator(model, tokenizer, params.evaluate)
    dataset = TokenizedSplits(tokenized_dir)
    attention = attention_example(model, tokenizer, dataset, params)  # a bad report block fails before any work
    # before decoding: W&B online without an account fails here, not after the work
    run = start_run(params.wandb, f"{name}-seed{seed}", Path("."),
                    {"model": name, "seed": seed, **block, **params.evaluate.model_dump(),
                     "params": model.num_parameters()},
                    run_tags(name, block, seed), job_type="evaluate")
    metrics, translations, texts = {}, {}, {}
    for split in params.data.eval_splits:
        decoding = time.perf_counter()  # this split's; `started`, the stage's, dates the provenance
        with progress_bar(len(dataset[split]), f"decoding {split}", "sent") as progress:
            found = translator.translate_ids(dataset[split]["src_ids"], progress=progress)
        seconds = time.perf_counter() - decoding
        hypotheses = [one_line(tokenizer.decode(hyps[0].tokens)) for hyps in found]
        texts[split] = "".join(h + "\n" for h in hypotheses)
        metrics[split] = {**score(hypotheses, dataset[split]["tgt"], params.data.tgt_lang, params.data.tokenized),
                          "sentences": len(hypotheses),
                          # compare reads the translation and checks it is this one; through this hash,
                          # DVC sees a changed translation in the metrics compare depends on
                          "hypotheses_sha256": hashlib.sha256(texts[split].encode()).hexdigest(),
                          "decode_seconds": round(seconds, 2),
                          "sentences_per_s": round(len(hypotheses) / seconds, 1),
                          "beam": params.evaluate.beam}
        translations[f"translations/{split}"] = (TRANSLATION_COLUMNS, [
            [i, *row] for i, row in enumerate(zip(dataset[split]["src"], dataset[split]["tgt"], hypotheses))])
    # one unit: nothing is written until every split is decoded, the translations replace the old
    # folder at once, and eval.json, whose hashes compare checks them against, comes last
    with atomic_dir(paths.results_dir) as tmp:
        for split, text in texts.items():
            write_text(tmp / f"{split}.txt", text)
    write_json(paths.attention, attention)
    provenance = stamp(started)
    write_json(paths.eval_metrics, {**metrics, "provenance": provenance})
    if run:
        log_tables(run, translations)
        summary = {f"{split}/{key}": value for split, scores in metrics.items() for key, value in scores.items()}
        finish_run(run, summary, provenance)
    return metrics


def attention_example(model: Seq2Seq, tokenizer: Tokenizer, dataset, params: Params) -> dict:
    """Greedy decoding of the sentence `report.attention_sentence` of `report.attention_split` (by default the
    first test set), with the weights each output step puts on the source pieces; weights is None for a model
    without attention."""
    cfg, decode = params.report, params.evaluate
    name = cfg.attention_split or params.data.eval_splits[0]
    if name not in dataset:
        raise ConfigError(f"report.attention_split: {name} is not in data/tokenized; "
                          f"choose one of {', '.join(s for s in dataset if s != 'train')}")
    split = dataset[name]
    if cfg.attention_sentence >= len(split):
        raise ConfigError(f"report.attention_sentence: {cfg.attention_sentence} is beyond the {len(split)} "
                          f"sentences of {name}; choose 0 to {len(split) - 1}")
    source = split[cfg.attention_sentence]["src_ids"]
    src = torch.tensor([source], device=next(model.parameters()).device)  # (1, S)
    mask = src != PAD
    budget = max_lengths(mask, decode.max_len_a, decode.max_len_b)
    attention = [[]]
    (target,) = greedy(model, src, mask, BOS, EOS, budget, attention)
    ended = len(target) < int(budget[0])  # the last step chose eos, and has a row of weights too
    return {
        "split": name,
        "sentence": cfg.attention_sentence,
        "source_pieces": tokenizer.source.sp.id_to_piece(source),
        "target_pieces": tokenizer.target.sp.id_to_piece(target) + (["</s>"] if ended else []),
        # a decoder-only model also attends to its own output: keep the weights on the source
        "weights": [[round(float(w), 4) for w in row[: len(source)]] for row in attention[0]] or None,
    }
