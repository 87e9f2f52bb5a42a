"""Token-budget batches of length-sorted pairs, read from the memory-mapped tokenized dataset a batch at a
time and padded for teacher forcing."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, Sampler

from nmtbench.data.subwords import BOS, EOS, PAD
from nmtbench.data.tokenized import read_split

IDS = ["src_ids", "tgt_ids"]  # the columns a batch is read from


def pad(sequences: list[list[int]]) -> torch.Tensor:
    width = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in sequences], dtype=torch.long)


def pad_flat(ids: np.ndarray, lengths: np.ndarray, first: int | None = None, last: int | None = None) -> torch.Tensor:
    """B sequences given as their ids end to end and their lengths -> (B, W) padded with PAD, each with an
    optional first token before its ids and last token after them."""
    start = int(first is not None)
    width = int(lengths.max(initial=0)) + start + int(last is not None)
    out = np.full((len(lengths), width), PAD, dtype=np.int64)  # (B, W)
    column = np.arange(width)
    out[(column >= start) & (column < lengths[:, None] + start)] = ids  # fills row by row, as ids are laid out
    if first is not None:
        out[:, 0] = first
    if last is not None:
        out[np.arange(len(lengths)), lengths + start] = last
    return torch.from_numpy(out)


class PairDataset(torch.utils.data.Dataset):
    """The src_ids/tgt_ids pairs of a tokenized split, indexed by a whole batch of pair indices at once.

    The ids stay in the Arrow table (memory-mapped when the split was loaded from disk), so a training
    process holds only the length arrays and the batch being read, however large the corpus.
    """

    def __init__(self, table: pa.Table, folder: Path | None = None):
        self.table, self.folder = table.select(IDS), folder
        self.src_lens, self.tgt_lens = (pc.list_value_length(self.table[side]).to_numpy()
                                        for side in IDS)

    @classmethod
    def from_disk(cls, folder: Path) -> PairDataset:
        """A tokenized split's folder, memory-mapped: the training splits, without `datasets` (seconds to import,
        paid by every training process)."""
        return cls(read_split(folder), folder)

    @classmethod
    def from_lists(cls, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> PairDataset:
        """Pairs held in memory (the analysis stage's synthetic tasks)."""
        ids = pa.list_(pa.int32())
        return cls(pa.table({"src_ids": pa.array(src_ids, ids), "tgt_ids": pa.array(tgt_ids, ids)}))

    def __getstate__(self) -> dict:
        """A split from disk travels to a spawned data-loader worker as its folder, mapped again there, not as a
        copy of its rows."""
        state = dict(self.__dict__)
        if self.folder is not None:
            del state["table"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.folder is not None:
            self.table = read_split(self.folder).select(IDS)

    def __len__(self):
        return len(self.src_lens)

    def __getitem__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """A padded batch; tgt_in starts with bos, tgt_out ends with eos."""
        rows = self.table.take(indices)
        (src, src_lens), (tgt, tgt_lens) = ((pc.list_flatten(rows[side]).to_numpy(),
                                             pc.list_value_length(rows[side]).to_numpy())
                                            for side in IDS)
        padded_src = pad_flat(src, src_lens)  # (B, S)
        return {
            "index": torch.tensor(indices),
            "src": padded_src,
            "src_mask": padded_src != PAD,
            "src_lengths": src_lens.tolist(),  # a host list, never moved to the GPU: what a recurrent encoder packs by
            "tgt_in": pad_flat(tgt, tgt_lens, first=BOS),  # (B, T)
            "tgt_out": pad_flat(tgt, tgt_lens, last=EOS),  # (B, T)
        }


def random_floats(rng: random.Random, n: int) -> np.ndarray:
    """[rng.random() for _ in range(n)] as an array, drawn by numpy from the same Mersenne Twister state,
    which rng then continues from: numpy's doubles are built from the generator's words the same way."""
    version, state, gauss = rng.getstate()
    twister = np.random.MT19937()
    twister.state = {"bit_generator": "MT19937",
                     "state": {"key": np.array(state[:-1], dtype=np.uint32), "pos": state[-1]}}
    floats = np.random.Generator(twister).random(n)
    after = twister.state["state"]
    rng.setstate((version, (*after["key"].tolist(), int(after["pos"])), gauss))
    return floats


def length_order(src_lens: np.ndarray, tgt_lens: np.ndarray, tie: np.ndarray | None) -> np.ndarray:
    """Pair indices sorted by (source length, target length, tie), equal keys kept in index order; tie holds
    doubles in [0, 1), as random_floats draws them.

    One np.sort of 64-bit keys holding, from the high bits to the low, the source length, the target length,
    as many of the tie's top bits as fit and the pair index: several times faster than an argsort or a
    stable sort per key. Pairs whose keys agree down to the index (the same lengths and tie bits, a few
    among millions) are then put in order by their whole tie.
    """
    src_lens, tgt_lens = np.asarray(src_lens, dtype=np.uint64), np.asarray(tgt_lens, dtype=np.uint64)
    index_bits, src_bits, tgt_bits = (int(v).bit_length() for v in
                                      (len(src_lens) - 1, src_lens.max(initial=0), tgt_lens.max(initial=0)))
    spare_bits = 64 - src_bits - tgt_bits - index_bits
    if spare_bits < 0:  # lengths too long to share 64 bits with the index: a stable sort key by key
        return np.lexsort((tgt_lens, src_lens) if tie is None else (tie, tgt_lens, src_lens))
    tie_bits = 0 if tie is None else min(spare_bits, 53)  # a double's 53 bits: all of it
    key = src_lens << np.uint64(tgt_bits)
    key |= tgt_lens
    if tie_bits:
        key <<= np.uint64(tie_bits)
        key |= (tie * 2.0**tie_bits).astype(np.uint64)  # the top bits, in the same order as the doubles
    key <<= np.uint64(index_bits)
    key |= np.arange(len(key), dtype=np.uint64)
    key.sort()
    order = (key & np.uint64((1 << index_bits) - 1)).astype(np.int64)
    if tie_bits:
        same = (key[1:] >> np.uint64(index_bits)) == (key[:-1] >> np.uint64(index_bits))  # same as the next pair
        if same.any():
            runs = np.flatnonzero(np.r_[False, same] | np.r_[same, False])  # positions in a run of equal keys
            run = np.cumsum(~np.r_[False, same][runs])  # which run each of them is in
            tied = order[runs]  # in index order within each run
            order[runs] = tied[np.lexsort((tie[tied], run))]  # stable: equal whole ties keep index order
    return order


def pack(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int) -> np.ndarray:
    """Where each batch starts among length-sorted pairs, plus the end: [0, ..., len(src_lens)].

    The greedy packing of one pair at a time (a pair joins the open batch while its padded size, with the
    longest source and target so far, stays within batch_tokens) done a run of equal-length pairs at a
    time: within a run the padded width stops changing after its first pair, so the batch sizes follow.
    """
    n = len(src_lens)
    starts = np.flatnonzero(np.diff(src_lens, prepend=-1) | np.diff(tgt_lens, prepend=-1))
    counts = np.diff(starts, append=n)
    cuts, size, longest_src, longest_tgt = [], 0, 0, 0
    for start, count, s, t in zip(starts.tolist(), counts.tolist(),
                                  src_lens[starts].tolist(), tgt_lens[starts].tolist()):
        width = max(longest_src, s) + max(longest_tgt, t)
        joining = min(count, batch_tokens // width - size) if size and (size + 1) * width <= batch_tokens else 0
        size, longest_src, longest_tgt = size + joining, max(longest_src, s), max(longest_tgt, t)
        if rest := count - joining:  # the others open batches of their own width, a lone over-long pair included
            capacity = max(batch_tokens // (s + t), 1)
            cuts.extend(range(start + joining, start + count, capacity))
            size, longest_src, longest_tgt = (rest - 1) % capacity + 1, s, t
    return np.array([*cuts, n], dtype=np.int64)


def pack_longer_side(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int, multiple: int = 8) -> np.ndarray:
    """fairseq's batches of length-sorted pairs (data/data_utils_fast.pyx batch_by_size_fast, v0.9.0): a batch costs
    its sentences times the longest side of any pair in it, source or target; when the next pair would take it over
    batch_tokens, it is cut to a multiple of `multiple` sentences (--required-batch-size-multiple, 8 by default; a
    batch of fewer is kept whole) and the pairs cut off open the next. Returns where each batch starts, plus the end,
    as pack does. One pair at a time, in Python: once for a run (fairseq keeps its batches), 29,000 pairs in
    milliseconds."""
    costs = np.maximum(src_lens, tgt_lens).tolist()  # each pair's longer side
    cuts, start, longest = [0], 0, 0  # longest: of the open batch and the pair joining it
    for i, cost in enumerate(costs):
        longest = max(longest, cost)
        size = i - start  # pairs in the open batch before this one
        if size and (size + 1) * longest > batch_tokens:
            start += max(multiple * (size // multiple), size % multiple)
            cuts.append(start)
            longest = max(costs[start : i + 1])
    return np.array([*cuts, len(src_lens)] if len(src_lens) else [0], dtype=np.int64)


# how a sampler forms its batches (train.batching)
BATCHINGS = ("nmtbench", "fairseq")


class TokenBatchSampler(Sampler[list[int]]):
    """Batches whose padded source + target size stays within batch_tokens; with batching fairseq, fairseq's batches
    (pack_longer_side), formed once for the run, their order alone drawn anew each epoch, as fairseq freezes them.

    Pairs are sorted by length so a batch wastes little on padding; with shuffle, ties are broken and
    the batch order drawn from a generator seeded with seed + epoch, so every epoch differs yet a run is
    reproducible. A pair too long for the budget on its own gets a batch of its own. The plan is built
    from the length arrays once per epoch and kept, so len() costs nothing after the first call.

    Under data parallelism every rank builds the same batch list and takes every num_replicas-th
    batch from position rank. With even_shards (training), the last len % num_replicas batches are
    left out so all ranks make the same number of steps: an uneven count would hang the gradient
    all-reduce. Validation keeps every batch, since it makes no collective call per batch.

    A run resumed in the middle of an epoch calls resume(epoch, batches_done): that epoch's order is
    rebuilt and its first batches_done batches are skipped, once. The length stays the whole epoch's,
    as Lightning counts the skipped batches among the epoch's batches.
    """

    def __init__(self, src_lens, tgt_lens, batch_tokens: int, shuffle: bool, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, even_shards: bool = True, batching: str = "nmtbench"):
        self.src_lens, self.tgt_lens = np.asarray(src_lens), np.asarray(tgt_lens)
        self.batch_tokens, self.shuffle, self.seed, self.epoch = batch_tokens, shuffle, seed, 0
        self.batching, self.frozen = batching, None  # frozen: fairseq's (order, bounds), formed once
        self.num_replicas, self.rank, self.even_shards = num_replicas, rank, even_shards
        self.start = 0  # batches of this epoch trained before an interruption
        self.planned: tuple | None = None  # (epoch, order, bounds, this rank's batch numbers)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.start = epoch, 0

    def resume(self, epoch: int, batches_done: int) -> None:
        """Continue epoch after its first batches_done batches; a finished epoch continues with the next."""
        self.epoch, self.start = epoch, batches_done
        if batches_done >= len(self):
            self.epoch, self.start = epoch + 1, 0

    def plan(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """This epoch's (order, bounds, picked).

        This rank's k-th batch is order[bounds[b] : bounds[b + 1]], b = picked[k].
        """
        if self.planned is None or self.planned[0] != self.epoch:
            rng = random.Random(self.seed + self.epoch)
            if self.batching == "fairseq":
                if self.frozen is None:  # from the seed alone, so that every epoch and a resumed run have the same
                    self.frozen = self.formed(random.Random(self.seed), pack_longer_side, 1)
                order, bounds = self.frozen
            else:
                order, bounds = self.formed(rng, pack, 0)
            picked = list(range(len(bounds) - 1))
            if self.shuffle:
                rng.shuffle(picked)
            if self.even_shards:
                picked = picked[: len(picked) - len(picked) % self.num_replicas]
            self.planned = (self.epoch, order, bounds, picked[self.rank :: self.num_replicas])
        return self.planned[1:]

    def formed(self, rng: random.Random, packing, source_eos: int) -> tuple[np.ndarray, np.ndarray]:
        """The pairs sorted by length, ties drawn from rng when shuffling, and where packing starts each batch. The
        target counts its bos or eos (+1); the source its eos where the toolkit followed appends one (fairseq)."""
        tie = random_floats(rng, len(self.src_lens)) if self.shuffle else None
        order = length_order(self.src_lens, self.tgt_lens, tie)
        return order, packing(self.src_lens[order] + source_eos, self.tgt_lens[order] + 1, self.batch_tokens)

    def batches(self) -> list[list[int]]:
        order, bounds, picked = self.plan()
        return [order[bounds[b] : bounds[b + 1]].tolist() for b in picked]

    def __iter__(self):
        start, self.start = self.start, 0
        order, bounds, picked = self.plan()
        return (order[bounds[b] : bounds[b + 1]].tolist() for b in picked[start:])

    def __len__(self):
        return len(self.plan()[2])


def batch_loader(data: PairDataset, sampler: TokenBatchSampler, num_workers: int = 0,
                 pin_memory: bool = False) -> DataLoader:
    """Batches in the sampler's order; the sampler yields whole batches of indices, which data reads at once."""
    # a generator of its own: each new iterator draws a seed from it, which would otherwise come
    # from the global generator that dropout draws from, shifting dropout masks after a resume
    return DataLoader(data, sampler=sampler, batch_size=None, num_workers=num_workers, pin_memory=pin_memory,
                      persistent_workers=num_workers > 0, generator=torch.Generator())
