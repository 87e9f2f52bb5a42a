"""Paired bootstrap resampling of BLEU (sacreBLEU's own test) of several systems against a baseline.

Every system is scored on the same resampled test sets as the baseline, so the p-value answers:
how often would a difference as large as the observed one arise if the two systems were equally
good? The 95% confidence interval is that of each system's BLEU over the resamples.
"""
from __future__ import annotations

import os
from unittest import mock

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest


def paired_bootstrap(systems: dict[str, list[str]], references: list[str], baseline: str,
                     resamples: int, seed: int) -> tuple[dict[str, dict], str]:
    """Return ({system: {bleu, mean, ci, p_value}}, signature) for cased 13a BLEU; the baseline's p_value is None.

    `mean` +- `ci` is the 95% confidence interval of the system's BLEU over `resamples` resampled test
    sets; `p_value` is that of the paired test against `baseline`. Figures are rounded as sacreBLEU
    prints them (2 decimals, p-values 4).
    """
    if baseline not in systems:
        raise ValueError(f"paired bootstrap: baseline {baseline!r} is not among the systems {', '.join(systems)}")
    if seed <= 0:  # sacreBLEU treats seed 0 as "no seed", which would make the figures irreproducible
        raise ValueError(f"paired bootstrap: the seed must be a positive integer, got {seed}")
    named = [(baseline, systems[baseline]), *((name, hyps) for name, hyps in systems.items() if name != baseline)]
    # sacreBLEU reads its seed from the environment, for the baseline's resamples and for each test
    with mock.patch.dict(os.environ, {"SACREBLEU_SEED": str(seed)}):
        test = PairedTest(named, {"bleu": BLEU()}, [references], test_type="bs", n_samples=resamples)
        signatures, table = test()
    results = {name: {"bleu": round(r.score, 2), "mean": round(float(r.mean), 2), "ci": round(float(r.ci), 2),
                      "p_value": None if r.p_value is None else round(float(r.p_value), 4)}
               for name, r in zip(table["System"], table["BLEU"])}
    return {name: results[name] for name in systems}, str(signatures["BLEU"])
