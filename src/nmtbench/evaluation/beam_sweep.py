"""Stage `beam_sweep`: BLEU and decoding speed of one model across beam sizes and length penalties."""
from __future__ import annotations

import time
from pathlib import Path

from nmtbench import figures
from nmtbench.config import ConfigError, Params
from nmtbench.data.subwords import Tokenizer
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.rendering import sweep_table
from nmtbench.evaluation.scoring import score
from nmtbench.files import write_bytes, write_json, write_text
from nmtbench.loading import load_model, resolve_device
from nmtbench.progress import progress_bar
from nmtbench.provenance import stamp
from nmtbench.run_paths import RESULTS, RunPaths


def beam_sweep(params: Params, tokenized_dir: Path = Path("data/tokenized"), out_dir: Path = RESULTS) -> dict:
    started = time.perf_counter()
    cfg = params.beam_sweep
    if cfg.model is None:
        raise ConfigError(f"beam_sweep.model: not set; name one of {', '.join(params.models)}")
    tokenizer = Tokenizer(tokenized_dir)
    model = load_model(RunPaths(cfg.model, cfg.seed).checkpoint, tokenizer,
                       resolve_device(params.evaluate.device, "evaluate.device"))
    split_name = cfg.split or params.data.eval_splits[0]
    split = TokenizedSplits(tokenized_dir)[split_name]
    n = min(cfg.max_sentences or len(split), len(split))  # a split shorter than max_sentences: all of it
    sources, references = split["src_ids"][:n], split["tgt"][:n]
    rows = []
    settings = [(alpha, beam) for alpha in cfg.alphas for beam in cfg.beams]
    with progress_bar(len(settings) * n, f"beam sweep of {cfg.model}", "sent") as progress:
        for alpha, beam in settings:
            decode = params.evaluate.model_copy(update={"beam": beam, "alpha": alpha})
            progress.set_postfix_str(f"beam {beam}, alpha {alpha:g}")
            decoding = time.perf_counter()  # not `started`, the whole sweep's, which provenance's wall time reads
            found = Translator(model, tokenizer, decode).translate_ids(sources, progress=progress)
            seconds = time.perf_counter() - decoding
            hypotheses = [tokenizer.decode(hyps[0].tokens) for hyps in found]
            scores = score(hypotheses, references, params.data.tgt_lang, params.data.tokenized)
            rows.append({"beam": beam, "alpha": alpha, "bleu": scores["bleu"],
                         "bleu_breakdown": scores["bleu_breakdown"], "chrf": scores["chrf"],
                         "seconds": round(seconds, 2), "sentences_per_s": round(n / seconds, 1),
                         "target_tokens_per_s": round(sum(len(h[0].tokens) + 1 for h in found) / seconds, 1)})
    result = {"model": cfg.model, "seed": cfg.seed, "split": split_name, "sentences": n,
              "length_penalty": params.evaluate.length_penalty, "bleu_signature": scores["bleu_signature"],
              "rows": rows, "provenance": stamp(started)}  # the speeds are this machine's
    write_json(out_dir / "beam_sweep.json", result)
    write_text(out_dir / "beam_sweep.md", table(result))
    write_bytes(out_dir / "beam_sweep.png", figures.beam_sweep(result))
    return result


def table(result: dict) -> str:
    sweep = sweep_table(result)
    return "\n".join([f"# Beam sweep: {result['model']} (seed {result['seed']}) on {result['split']} "
                      f"({result['sentences']} sentences, {result['length_penalty']} length penalty)", "",
                      sweep.markdown(), "", f"BLEU: `{result['bleu_signature']}`", ""])
