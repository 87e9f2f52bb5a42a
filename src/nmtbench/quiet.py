"""Third-party noise silenced at its source, by each library's own settings, before any command runs.

A stage's output is its own progress and its result. Left alone, the libraries under it add lines a reader can
do nothing about: datasets' bars for generating and saving every split, the Hugging Face hub client's raw request
errors and retries (the project's reader then says in one line what failed and what to do), Lightning's tips,
device banners and its own deprecation warning from torch, W&B's banner and run history. Warnings and errors
that ask something of the user still come through.
"""
from __future__ import annotations

import logging
import os
import warnings

# read when each library is imported, so set before any is; an exported value wins
SETTINGS = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "1",  # "Generating train split", "Saving the dataset"
            "HF_HUB_VERBOSITY": "error"}  # "'...' thrown while requesting HEAD ...", "Retrying in 1s"


def quiet_third_parties() -> None:
    for name, value in SETTINGS.items():
        os.environ.setdefault(name, value)
    # Lightning's rank-zero infos: the litlogger tip, "GPU available", "Loading `train_dataloader`", ...
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    # Lightning's own pytree code uses torch's deprecated LeafSpec: nothing for a user of Lightning to change
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"lightning\.pytorch\.utilities\._pytree")
