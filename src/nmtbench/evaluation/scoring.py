"""Corpus BLEU, lowercased BLEU, chrF and TER with sacreBLEU, reported together with their signatures.

The signature records tokenisation, casing, smoothing and the sacreBLEU version, so figures
from different runs or papers are only compared when their signatures match.
"""
from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER
from sacremoses import MosesTokenizer

SCORES = ("bleu", "bleu_lc", "chrf", "ter")
PUBLISHED = "bleu_lc_tok"  # BLEU as most Multi30k papers report it: lowercased, Moses-tokenized (multi-bleu.perl)


def score(hypotheses: list[str], references: list[str], lang: str | None = None, tokenized: bool = False) -> dict:
    """Score detokenised hypotheses against one untouched reference each, as the sacrebleu command line does.

    bleu: cased BLEU with the 13a tokenizer, the headline; bleu_lc: the same lowercased; chrf: chrF2; ter:
    TER (lower is better). Given the target language, also bleu_lc_tok, the published papers' convention.
    tokenized: both sides are the papers' own lowercased Moses tokens (data.preprocess moses_lowercase), so
    bleu_lc_tok scores them as they are, as multi-bleu.perl does, and every signature starts with
    `moses-lc-text:<lang>|` to tell these figures from those of detokenized text.
    """
    _check(hypotheses, references)
    metrics = {"bleu": BLEU(), "bleu_lc": BLEU(lowercase=True), "chrf": CHRF(), "ter": TER()}
    prefix = f"moses-lc-text:{lang}|" if tokenized else ""
    result = {key: round(metric.corpus_score(hypotheses, [references]).score, 2) for key, metric in metrics.items()}
    result.update({f"{key}_signature": prefix + str(metric.get_signature()) for key, metric in metrics.items()})
    if tokenized:
        found, signature = tokens_bleu(hypotheses, references)
        result[PUBLISHED], result[f"{PUBLISHED}_signature"] = found, prefix + signature
    elif lang is not None:
        result[PUBLISHED], result[f"{PUBLISHED}_signature"] = tokenized_lowercase_bleu(hypotheses, references, lang)
    return result


def tokens_bleu(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """(BLEU, signature) of text split at spaces only, as multi-bleu.perl scores tokenized text."""
    metric = BLEU(tokenize="none", force=True)  # force: the input is tokenized on purpose
    return round(metric.corpus_score(hypotheses, [references]).score, 2), str(metric.get_signature())


def tokenized_lowercase_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[float, str]:
    """(BLEU, signature) the way multi-bleu.perl scores Multi30k papers' outputs: both sides lowercased and
    tokenized by the Moses tokenizer of the target language (sacremoses, no escaping, no aggressive hyphen
    splitting), then scored on those tokens as they are."""
    tokenizer = MosesTokenizer(lang=lang)
    tokens = lambda lines: [tokenizer.tokenize(line.lower(), escape=False, return_str=True) for line in lines]  # noqa: E731
    found, signature = tokens_bleu(tokens(hypotheses), tokens(references))
    return found, f"moses-tok:{lang}|lc|{signature}"


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """Cased 13a BLEU alone, e.g. of the sentences of one length bucket."""
    _check(hypotheses, references)
    return round(BLEU().corpus_score(hypotheses, [references]).score, 2)


def _check(hypotheses: list[str], references: list[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"cannot score {len(hypotheses)} hypotheses against {len(references)} references; "
                         "decode every sentence of the split")
    if not hypotheses:
        raise ValueError("nothing to score: the hypotheses and references are empty")
