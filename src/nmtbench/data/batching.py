"""Token-budget batches of length-sorted pairs, padded and ready for teacher forcing."""
from __future__ import annotations

import random
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Sampler

from nmtbench.data.tokenizer import BOS, EOS, PAD


def pad(sequences: list[list[int]]) -> torch.Tensor:
    width = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in sequences], dtype=torch.long)


def collate(pairs: list[tuple[int, list[int], list[int]]]) -> dict[str, torch.Tensor]:
    """(index, src_ids, tgt_ids) pairs -> padded batch; tgt_in starts with bos, tgt_out ends with eos."""
    index, src, tgt = zip(*pairs)
    src = pad(list(src))  # (B, S)
    return {
        "index": torch.tensor(index),
        "src": src,
        "src_mask": src != PAD,
        "tgt_in": pad([[BOS] + t for t in tgt]),  # (B, T)
        "tgt_out": pad([t + [EOS] for t in tgt]),  # (B, T)
    }


class PairDataset(torch.utils.data.Dataset):
    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]]):
        self.src_ids, self.tgt_ids = src_ids, tgt_ids

    def __len__(self):
        return len(self.src_ids)

    def __getitem__(self, i):
        return i, self.src_ids[i], self.tgt_ids[i]


class TokenBatchSampler(Sampler[list[int]]):
    """Batches whose padded source + target size stays within batch_tokens.

    Pairs are sorted by length so a batch wastes little on padding; with shuffle, ties are broken and
    the batch order drawn from a generator seeded with seed + epoch, so every epoch differs yet a run is
    reproducible. A pair too long for the budget on its own gets a batch of its own.

    Under data parallelism every rank builds the same batch list and takes every num_replicas-th
    batch from position rank. With even_shards (training), the last len % num_replicas batches are
    left out so all ranks make the same number of steps: an uneven count would hang the gradient
    all-reduce. Validation keeps every batch, since it makes no collective call per batch.

    A run resumed in the middle of an epoch calls resume(epoch, batches_done): that epoch's order is
    rebuilt and its first batches_done batches are skipped, once. The length stays the whole epoch's,
    as Lightning counts the skipped batches among the epoch's batches.
    """

    def __init__(self, src_lens: list[int], tgt_lens: list[int], batch_tokens: int, shuffle: bool, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, even_shards: bool = True):
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self.batch_tokens, self.shuffle, self.seed, self.epoch = batch_tokens, shuffle, seed, 0
        self.num_replicas, self.rank, self.even_shards = num_replicas, rank, even_shards
        self.start = 0  # batches of this epoch trained before an interruption

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.start = epoch, 0

    def resume(self, epoch: int, batches_done: int) -> None:
        """Continue epoch after its first batches_done batches; a finished epoch continues with the next."""
        self.epoch, self.start = epoch, batches_done
        if batches_done >= len(self):
            self.epoch, self.start = epoch + 1, 0

    def batches(self) -> list[list[int]]:
        rng = random.Random(self.seed + self.epoch)
        tie = [rng.random() for _ in self.src_lens] if self.shuffle else [0.0] * len(self.src_lens)
        order = sorted(range(len(self.src_lens)), key=lambda i: (self.src_lens[i], self.tgt_lens[i], tie[i]))
        batches, batch, longest_src, longest_tgt = [], [], 0, 0
        for i in order:
            s, t = max(longest_src, self.src_lens[i]), max(longest_tgt, self.tgt_lens[i] + 1)  # +1: bos/eos
            if batch and (len(batch) + 1) * (s + t) > self.batch_tokens:
                batches.append(batch)
                batch, s, t = [], self.src_lens[i], self.tgt_lens[i] + 1
            batch.append(i)
            longest_src, longest_tgt = s, t
        if batch:
            batches.append(batch)
        if self.shuffle:
            rng.shuffle(batches)
        if self.even_shards:
            batches = batches[: len(batches) - len(batches) % self.num_replicas]
        return batches[self.rank :: self.num_replicas]

    def __iter__(self):
        start, self.start = self.start, 0
        return iter(self.batches()[start:])

    def __len__(self):
        return len(self.batches())


class TranslationData(L.LightningDataModule):
    """Train and val splits of the tokenized dataset, batched by tokens."""

    def __init__(self, tokenized_dir: Path, batch_tokens: int, seed: int):
        super().__init__()
        self.tokenized_dir, self.batch_tokens, self.seed = Path(tokenized_dir), batch_tokens, seed
        self.resume_at: dict | None = None  # where a restored checkpoint stopped in its epoch

    def setup(self, stage: str | None = None) -> None:
        from nmtbench.data.tokenizer import load_tokenized

        dataset = load_tokenized(self.tokenized_dir)
        self.splits = {name: PairDataset(dataset[name]["src_ids"], dataset[name]["tgt_ids"])
                       for name in ("train", "val")}

    def loader(self, split: str, train: bool) -> DataLoader:
        data = self.splits[split]
        world, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        sampler = TokenBatchSampler([len(s) for s in data.src_ids], [len(t) for t in data.tgt_ids],
                                    self.batch_tokens, shuffle=train, seed=self.seed,
                                    num_replicas=world, rank=rank, even_shards=train)
        if train and self.resume_at:
            sampler.resume(**self.resume_at)
            self.resume_at = None
        # a generator of its own: each new iterator draws a seed from it, which would otherwise come
        # from the global generator that dropout draws from, shifting dropout masks after a resume
        return DataLoader(data, batch_sampler=sampler, collate_fn=collate, generator=torch.Generator())

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
