"""Corpus BLEU, lowercased BLEU, chrF and TER with sacreBLEU, reported together with their signatures.

The signature records tokenisation, casing, smoothing and the sacreBLEU version, so figures
from different runs or papers are only compared when their signatures match.
"""
from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.bleu import BLEUScore

SCORES = ("bleu", "bleu_lc", "chrf", "ter")
PUBLISHED = "bleu_lc_tok"  # BLEU as most Multi30k papers report it: lowercased, Moses-tokenized (multi-bleu.perl)


def score(hypotheses: list[str], references: list[str], lang: str | None = None, tokenized: bool = False) -> dict:
    """Score detokenised hypotheses against one untouched reference each, as the sacrebleu command line does.

    bleu: cased BLEU with the 13a tokenizer, the headline; bleu_lc: the same lowercased; chrf: chrF2; ter:
    TER (lower is better). Given the target language, also bleu_lc_tok, the published papers' convention.
    bleu_breakdown and bleu_lc_tok_breakdown: what each BLEU is made of (`breakdown`).
    tokenized: both sides are the papers' own lowercased Moses tokens (data.preprocess moses_lowercase), so
    bleu_lc_tok scores them as they are, as multi-bleu.perl does, and every signature starts with
    `moses-lc-text:<lang>|` to tell these figures from those of detokenized text.
    """
    _check(hypotheses, references)
    metrics = {"bleu": BLEU(), "bleu_lc": BLEU(lowercase=True), "chrf": CHRF(), "ter": TER()}
    prefix = f"moses-lc-text:{lang}|" if tokenized else ""
    found = {key: metric.corpus_score(hypotheses, [references]) for key, metric in metrics.items()}
    result = {key: round(scored.score, 2) for key, scored in found.items()}
    result.update({f"{key}_signature": prefix + str(metric.get_signature()) for key, metric in metrics.items()})
    result["bleu_breakdown"] = breakdown(found["bleu"])
    if tokenized:
        published, signature = tokens_bleu(hypotheses, references)
        signature = prefix + signature
    elif lang is not None:
        published, signature = tokenized_lowercase_bleu(hypotheses, references, lang)
    if tokenized or lang is not None:
        result[PUBLISHED], result[f"{PUBLISHED}_signature"] = round(published.score, 2), signature
        result[f"{PUBLISHED}_breakdown"] = breakdown(published)
    return result


def breakdown(found: BLEUScore) -> str:
    """sacreBLEU's verbose line: the four n-gram precisions, then the brevity penalty, the length ratio and the
    lengths, e.g. `70.9/47.4/34.1/24.7 (BP = 0.967 ratio = 0.967 hyp_len = 11707 ref_len = 12103)`. fairseq and
    multi-bleu.perl print the same after a paper's BLEU, so a gap to it reads as n-grams or as length."""
    return (f"{found.prec_str} (BP = {found.bp:.3f} ratio = {found.ratio:.3f} hyp_len = {found.sys_len:d} "
            f"ref_len = {found.ref_len:d})")


def tokens_bleu(hypotheses: list[str], references: list[str]) -> tuple[BLEUScore, str]:
    """(BLEU, signature) of text split at spaces only, as multi-bleu.perl scores tokenized text."""
    metric = BLEU(tokenize="none", force=True)  # force: the input is tokenized on purpose
    return metric.corpus_score(hypotheses, [references]), str(metric.get_signature())


def tokenized_lowercase_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[BLEUScore, str]:
    """(BLEU, signature) the way multi-bleu.perl scores Multi30k papers' outputs: both sides lowercased and
    tokenized by the Moses tokenizer of the target language (sacremoses, no escaping, no aggressive hyphen
    splitting), then scored on those tokens as they are."""
    # imported here: only data.tokenized's scores need it, and every stage that scores would pay its import
    from sacremoses import MosesTokenizer

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
