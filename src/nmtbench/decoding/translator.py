"""Text in, text out: batching, beam search and detokenization around a trained model.

The one path from sentences to translations, used by the evaluate stage, the beam sweep, the
speed benchmark and `nmtbench translate`.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from nmtbench.config import DecodeConfig
from nmtbench.data.batching import pad
from nmtbench.data.tokenizer import BOS, EOS, PAD, Tokenizer, model_files
from nmtbench.decoding.search import Hypothesis, beam_search, max_lengths
from nmtbench.loading import CheckpointError, load_model, resolve_device
from nmtbench.models.interface import Seq2Seq


def length_sorted_batches(lengths: list[int], max_sentences: int, max_tokens: int | None = None) -> Iterator[list[int]]:
    """Indices in batches of similar length: at most max_sentences, and max_tokens padded source tokens."""
    batch: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if batch and (len(batch) == max_sentences or (max_tokens and (len(batch) + 1) * lengths[i] > max_tokens)):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


class Translator:
    """Decodes on the device the model is on (see from_model_dir), in fp32 or under bf16 autocast."""

    def __init__(self, model: Seq2Seq, tokenizer: Tokenizer, cfg: DecodeConfig):
        self.model, self.tokenizer, self.cfg = model.eval(), tokenizer, cfg

    @classmethod
    def from_model_dir(cls, model_dir: Path, cfg: DecodeConfig) -> Translator:
        """A trained model folder (best.ckpt beside the tokenizer it was trained with), on cfg.device."""
        model_dir = Path(model_dir)
        example = "a trained model folder such as models/transformer/seed42"
        if not model_dir.is_dir():
            found = "is a file, not a model folder" if model_dir.exists() else "does not exist"
            raise CheckpointError(f"{model_dir} {found}; pass {example} (train one with dvc repro train@<name>-<seed>)")
        if not model_files(model_dir):
            raise CheckpointError(f"{model_dir} has no spm.model (nor spm.src.model and spm.tgt.model); pass "
                                  f"{example}, which holds best.ckpt, its sentencepiece model(s) and vocab.json once "
                                  "its training has finished")
        tokenizer = Tokenizer(model_dir)
        device = resolve_device(cfg.device, "evaluate.device")
        return cls(load_model(model_dir / "best.ckpt", tokenizer, device), tokenizer, cfg)

    def translate_ids(self, sources: list[list[int]], nbest: int = 1, progress=None) -> list[list[Hypothesis]]:
        """Beam search over every source, in length-sorted batches (at most cfg.batch_size sentences and
        cfg.batch_tokens padded source tokens); results in input order.

        An empty source (a blank input line) translates to the empty output, for every model: nothing
        to attend to would give NaN scores in attention and an error in a packed RNN.
        """
        cfg = self.cfg
        results = [[] if s else [Hypothesis([], 0.0, 0.0, True)] for s in sources]
        device = next(self.model.parameters()).device  # a GPU during training's validation BLEU
        nonempty = [i for i, s in enumerate(sources) if s]
        for batch in length_sorted_batches([len(sources[i]) for i in nonempty], cfg.batch_size, cfg.batch_tokens):
            rows = [nonempty[j] for j in batch]
            src = pad([sources[i] for i in rows]).to(device)  # (B, S)
            mask = src != PAD
            with torch.autocast(device.type, torch.bfloat16, enabled=cfg.precision == "bf16"):
                found = beam_search(self.model, src, mask, BOS, EOS, max_lengths(mask, cfg.max_len_a, cfg.max_len_b),
                                    beam=cfg.beam, nbest=nbest, alpha=cfg.alpha, penalty=cfg.length_penalty,
                                    min_len=cfg.min_len, no_repeat_ngram=cfg.no_repeat_ngram)
            for i, hyps in zip(rows, found):
                results[i] = hyps
            if progress is not None:
                progress.update(len(rows))
        if progress is not None:
            progress.update(len(sources) - len(nonempty))
        return results

    def translate(self, sentences: list[str], nbest: int = 1, progress=None) -> list[list[tuple[str, float]]]:
        """Detokenized nbest translations with their scores, per input sentence."""
        found = self.translate_ids([self.tokenizer.encode(s) for s in sentences], nbest, progress)
        return [[(one_line(self.tokenizer.decode(h.tokens)), h.score) for h in hyps] for hyps in found]


def one_line(text: str) -> str:
    """A translation as one line of output: a model can emit a line break (byte fallback), which
    would shift every later line. What is written is what is scored."""
    return text.replace("\r", " ").replace("\n", " ")
