"""The tokenized train and val splits as Lightning's data module: the batches of batching.py, sharded by rank, and
where in its epoch a resumed run starts. Apart from batching.py so that decoding, which needs none of Lightning,
does not import it (about 4 s of a 2-core CPU's time for each evaluate or translate command)."""
from __future__ import annotations

from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader

from nmtbench.data.batching import PairDataset, TokenBatchSampler, batch_loader
from nmtbench.data.tokenized import TokenizedSplits


class TranslationData(L.LightningDataModule):
    """Train and val splits of the tokenized dataset, batched by tokens."""

    def __init__(self, tokenized_dir: Path, batch_tokens: int, seed: int, num_workers: int = 0,
                 batching: str = "nmtbench"):
        super().__init__()
        self.tokenized_dir, self.batch_tokens, self.seed = Path(tokenized_dir), batch_tokens, seed
        self.batching = batching  # train.batching, for the training split: validation is batched as always
        self.num_workers = num_workers
        self.resume_at: dict | None = None  # where a restored checkpoint stopped in its epoch

    def setup(self, stage: str | None = None) -> None:
        folder = TokenizedSplits(self.tokenized_dir).folder  # refuses a missing dataset, naming the stage to run
        # train and val alone, so that nothing training does (tuning above all) can read a test set
        self.splits = {name: PairDataset.from_disk(folder / name) for name in ("train", "val")}

    def loader(self, split: str, train: bool) -> DataLoader:
        data = self.splits[split]
        world, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        sampler = TokenBatchSampler(data.src_lens, data.tgt_lens, self.batch_tokens, shuffle=train, seed=self.seed,
                                    num_replicas=world, rank=rank, even_shards=train,
                                    batching=self.batching if train else "nmtbench")
        if train and self.resume_at:
            sampler.resume(**self.resume_at)
            self.resume_at = None
        on_gpu = self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"
        return batch_loader(data, sampler, self.num_workers, pin_memory=on_gpu)

    def train_dataloader(self):
        return self.loader("train", train=True)

    def val_dataloader(self):
        return self.loader("val", train=False)

    def state_dict(self) -> dict:
        """Saved in every checkpoint: the epoch and how many of its batches this rank has trained."""
        trained = self.trainer.fit_loop.epoch_loop.batch_progress.current.processed
        return {"epoch": self.trainer.current_epoch, "batches_done": trained}

    def load_state_dict(self, state: dict) -> None:
        self.resume_at = state
