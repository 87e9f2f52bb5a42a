"""Stage `evaluate@<name>`: decode the test sets, detokenize, score against the untouched references."""
from __future__ import annotations

import time
from pathlib import Path

from nmtbench.config import Params
from nmtbench.data.batching import pad
from nmtbench.data.tokenizer import BOS, EOS, PAD, Tokenizer, load_tokenized
from nmtbench.decoding.search import greedy, max_lengths
from nmtbench.evaluation.scoring import score
from nmtbench.models.interface import Seq2Seq
from nmtbench.files import write_json
from nmtbench.training.train import load_model, read_vocab


def translate_ids(model: Seq2Seq, sources: list[list[int]], batch_size: int, a: float, b: int) -> list[list[int]]:
    """Decode in batches of similar length (less padding), returning outputs in input order."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        src = pad([sources[i] for i in rows])  # (B, S)
        mask = src != PAD
        for i, hyp in zip(rows, greedy(model, src, mask, BOS, EOS, max_lengths(mask, a, b))):
            outputs[i] = hyp
    return outputs


def evaluate(params: Params, name: str, tokenized_dir: Path = Path("data/tokenized"),
             checkpoint: Path | None = None, out_dir: Path | None = None, metrics_path: Path | None = None) -> dict:
    params.model_block(name)
    checkpoint = checkpoint or Path("models") / name / "best.ckpt"
    out_dir = out_dir or Path("results") / name
    metrics_path = metrics_path or Path("metrics") / name / "eval.json"
    model = load_model(checkpoint, read_vocab(tokenized_dir))
    tokenizer = Tokenizer(tokenized_dir)
    dataset = load_tokenized(tokenized_dir)
    cfg = params.evaluate
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = {}
    for split in params.data.eval_splits:
        started = time.perf_counter()
        hyp_ids = translate_ids(model, dataset[split]["src_ids"], cfg.batch_size, cfg.max_len_a, cfg.max_len_b)
        seconds = time.perf_counter() - started
        hypotheses = [tokenizer.decode(ids) for ids in hyp_ids]
        (out_dir / f"{split}.txt").write_text("".join(h + "\n" for h in hypotheses))
        metrics[split] = {**score(hypotheses, dataset[split]["tgt"]), "sentences": len(hypotheses),
                          "decode_seconds": round(seconds, 2)}
    write_json(metrics_path, metrics)
    return metrics

