"""Third-party noise is silenced at its source: each library's own chatter, provoked in a fresh process."""
import subprocess
import sys

import pytest

# Each block provokes one library's noise the way a stage does; the process starts clean, because datasets and
# huggingface_hub read their settings at import and W&B warns once per process.
PROVOKE = """
import sys
from pathlib import Path
from nmtbench.quiet import quiet_third_parties
from nmtbench.config import WandbConfig
quiet_third_parties()
root = Path(sys.argv[1])

from datasets import Dataset
Dataset.from_generator(lambda: iter([{"src": "a", "tgt": "b"}]), cache_dir=str(root / "cache")).save_to_disk(
    str(root / "saved"))

from huggingface_hub.utils import http_backoff
try:
    http_backoff("HEAD", "http://127.0.0.1:9/README.md", max_retries=1, base_wait_time=0.01)
except Exception as error:
    print("the project's own message:", type(error).__name__)

import lightning as L
L.Trainer(logger=False, enable_checkpointing=False, default_root_dir=str(root))
from lightning.pytorch.utilities._pytree import _tree_flatten
_tree_flatten({"loss": 1.0})

from nmtbench.tracking import make_wandb_logger, start_run
logger = make_wandb_logger(WandbConfig(mode="offline", project="p", group="g"), "m", root / "runs", {})
logger.experiment.finish()
start_run(WandbConfig(mode="offline", project="p", group="g"), "e", root / "runs", {}).finish()
"""
NOISE = ["Generating train split", "Saving the dataset", "thrown while requesting", "Retrying in",
         "litlogger", "GPU available", "LeafSpec", "anonymous setting", "Run history", "Tracking run with wandb"]


@pytest.mark.slow
def test_no_third_party_noise_reaches_a_stages_output(tmp_path):
    env = {"PATH": "", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path), "OMP_NUM_THREADS": "1",
           **{var: str(tmp_path) for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")}}
    found = subprocess.run([sys.executable, "-c", PROVOKE, str(tmp_path)], capture_output=True, text=True, env=env,
                           timeout=300)
    output = found.stdout + found.stderr
    assert found.returncode == 0, output
    assert "the project's own message: " in output  # the error itself still reaches the project
    assert (tmp_path / "saved" / "dataset_info.json").is_file() and list((tmp_path / "runs" / "wandb").iterdir())
    assert [line for line in NOISE if line in output] == []
