"""W&B in tests: offline, silent, and writing nowhere but a scratch folder."""
from __future__ import annotations

from pathlib import Path


def quiet_offline_env(monkeypatch, root: Path) -> None:
    """Keep wandb offline, silent and inside root (no network, nothing written to $HOME)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(root))
