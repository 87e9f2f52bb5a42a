"""The one progress bar of the stages' long loops: decoding a test set, a beam sweep, a hyperparameter search.

On standard error, so what a stage prints as its result (and a piped translation) stays clean; redrawn at most
twice a second, so a log file keeps few lines.
"""
from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int, description: str, unit: str, disable: bool = False) -> tqdm:
    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, mininterval=0.5, disable=disable)
