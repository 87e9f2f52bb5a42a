"""Stage `evaluate@<name>-<seed>`: decode the test sets, detokenize, score against the untouched references."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from nmtbench.config import Params, run_dir
from nmtbench.data.tokenizer import Tokenizer, load_tokenized
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.scoring import score
from nmtbench.files import write_json, write_text
from nmtbench.training.train import load_model


def evaluate(params: Params, name: str, seed: int | None = None, tokenized_dir: Path = Path("data/tokenized"),
             checkpoint: Path | None = None, out_dir: Path | None = None, metrics_path: Path | None = None) -> dict:
    """Evaluate one run of the grid: model `name` trained with `seed` (default: the first of params.seeds)."""
    params.model_block(name)
    run = run_dir(name, params.seeds[0] if seed is None else seed)
    checkpoint = checkpoint or Path("models") / run / "best.ckpt"
    out_dir = out_dir or Path("results") / run
    metrics_path = metrics_path or Path("metrics") / run / "eval.json"
    tokenizer = Tokenizer(tokenized_dir)
    translator = Translator(load_model(checkpoint, tokenizer), tokenizer, params.evaluate)
    dataset = load_tokenized(tokenized_dir)
    metrics = {}
    for split in params.data.eval_splits:
        started = time.perf_counter()
        found = translator.translate_ids(dataset[split]["src_ids"])
        seconds = time.perf_counter() - started
        hypotheses = [one_line(tokenizer.decode(hyps[0].tokens)) for hyps in found]
        text = "".join(h + "\n" for h in hypotheses)
        write_text(out_dir / f"{split}.txt", text)
        metrics[split] = {**score(hypotheses, dataset[split]["tgt"]), "sentences": len(hypotheses),
                          # compare reads the translation and checks it is this one; through this hash,
                          # DVC sees a changed translation in the metrics compare depends on
                          "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest(),
                          "decode_seconds": round(seconds, 2),
                          "sentences_per_s": round(len(hypotheses) / seconds, 1),
                          "beam": params.evaluate.beam}
    write_json(metrics_path, metrics)
    return metrics


def one_line(text: str) -> str:
    """A translation as one line of the output file: a model can emit a line break (byte fallback),
    which would shift every later line. What is written is what is scored."""
    return text.replace("\r", " ").replace("\n", " ")
