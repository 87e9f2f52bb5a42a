"""The published Multi30k systems' preprocessing, applied by the prepare stage when data.preprocess asks for it.

`moses_lowercase` is what Multi30k's own tokenized release does to every split (its scripts/task1-tokenize.sh):
lowercase, Moses punctuation normalisation and the Moses tokenizer, each side in its own language. Papers train on
that text and score it with multi-bleu.perl, so references and hypotheses are then tokens already
(evaluation/scoring.py scores them as they are). sacremoses stands in for the Perl scripts; it does not escape
(`'` stays `'`, not `&apos;`), which changes no BLEU: escaping maps a token to one other token, both sides alike.
"""
from __future__ import annotations

from functools import cache

from datasets import Dataset
from sacremoses import MosesPunctNormalizer, MosesTokenizer


@cache
def _moses(lang: str) -> tuple[MosesPunctNormalizer, MosesTokenizer]:
    return MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)


def moses_lowercase(text: str, lang: str) -> str:
    """One line as Multi30k's tokenized release has it: lowercased, punctuation normalised, Moses-tokenized."""
    normalizer, tokenizer = _moses(lang)
    return tokenizer.tokenize(normalizer.normalize(text.lower()), escape=False, return_str=True)


def _batch(batch: dict, src_lang: str, tgt_lang: str) -> dict:
    return {"src": [moses_lowercase(text, src_lang) for text in batch["src"]],
            "tgt": [moses_lowercase(text, tgt_lang) for text in batch["tgt"]]}


def preprocess(pairs: Dataset, kind: str, src_lang: str, tgt_lang: str, cache_file: str,
               num_proc: int | None = None) -> Dataset:
    """The pairs of one split with preprocessing `kind` (data.preprocess: none or moses_lowercase) applied to both
    sides."""
    if kind == "none":
        return pairs
    return pairs.map(_batch, batched=True, fn_kwargs={"src_lang": src_lang, "tgt_lang": tgt_lang},
                     num_proc=num_proc, cache_file_name=cache_file, desc=f"{kind} preprocessing")
