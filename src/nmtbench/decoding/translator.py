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
from nmtbench.data.subwords import BOS, EOS, PAD, Tokenizer, model_files
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
        self.longest = model.longest_source()  # the most source tokens it translates; None for any number

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
        to attend to would give NaN scores in attention and an error in a packed RNN. A source longer than the
        model translates is refused, since a test set scored without it would be another test set (translate
        leaves such sentences out); each output stops where the decoder's positions end, if not sooner.
        """
        cfg = self.cfg
        if over := self.too_long(sources):
            index, length = next(iter(over.items()))
            raise ValueError(f"sentence {index + 1} has {length:,} tokens, more than the {self.longest:,} this model "
                             "translates (max_positions of its model block); leave it out, or raise max_positions "
                             "and retrain")
        results = [[] if s else [Hypothesis([], 0.0, 0.0, True)] for s in sources]
        device = next(self.model.parameters()).device  # a GPU during training's validation BLEU
        nonempty = [i for i, s in enumerate(sources) if s]
        for batch in length_sorted_batches([len(sources[i]) for i in nonempty], cfg.batch_size, cfg.batch_tokens):
            rows = [nonempty[j] for j in batch]
            src = pad([sources[i] for i in rows]).to(device)  # (B, S)
            mask = src != PAD
            with torch.autocast(device.type, torch.bfloat16, enabled=cfg.precision == "bf16"):
                found = beam_search(self.model, src, mask, BOS, EOS, self.budget(mask, [sources[i] for i in rows]),
                                    beam=cfg.beam, nbest=nbest, alpha=cfg.alpha, penalty=cfg.length_penalty,
                                    min_len=cfg.min_len, no_repeat_ngram=cfg.no_repeat_ngram)
            for i, hyps in zip(rows, found):
                results[i] = hyps
            if progress is not None:
                progress.update(len(rows))
        if progress is not None:
            progress.update(len(sources) - len(nonempty))
        return results

    def too_long(self, sources: list[list[int]]) -> dict[int, int]:
        """The index and length of each source longer than the model translates (Seq2Seq.longest_source)."""
        if self.longest is None:
            return {}
        return {i: len(source) for i, source in enumerate(sources) if len(source) > self.longest}

    def budget(self, mask: torch.Tensor, sources: list[list[int]]) -> torch.Tensor:
        """Each source's output budget, max_len_a * length + max_len_b, cut to the positions its decoder has left."""
        budget = max_lengths(mask, self.cfg.max_len_a, self.cfg.max_len_b)  # (B,)
        room = [self.model.longest_target(len(source)) for source in sources]
        return budget if None in room else torch.minimum(budget, torch.tensor(room, device=budget.device))

    def translate(self, sentences: list[str], nbest: int = 1, progress=None,
                  too_long: dict[int, int] | None = None) -> list[list[tuple[str, float]]]:
        """Detokenized nbest translations with their scores, per input sentence.

        Given a dict, too_long receives the index and length (in tokens) of each sentence longer than the model
        translates, whose one translation is then the empty line at score -inf, and the others are translated;
        without it, such a sentence is refused (translate_ids).
        """
        sources = [self.tokenizer.encode(s) for s in sentences]
        if too_long is not None:
            too_long.update(self.too_long(sources))
        kept = [i for i in range(len(sources)) if i not in (too_long or {})]
        found = dict(zip(kept, self.translate_ids([sources[i] for i in kept], nbest, progress)))
        if progress is not None:
            progress.update(len(sources) - len(kept))
        return [[(one_line(self.tokenizer.decode(h.tokens)), h.score) for h in found[i]] if i in found
                else [("", float("-inf"))] for i in range(len(sources))]


def one_line(text: str) -> str:
    """A translation as one line of output: a model can emit a line break (byte fallback), which
    would shift every later line. What is written is what is scored."""
    return text.replace("\r", " ").replace("\n", " ")
