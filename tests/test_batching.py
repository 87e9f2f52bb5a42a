import pickle
import random

import datasets
import numpy as np
import pytest
import torch

from nmtbench.data.batching import (
    PairDataset,
    TokenBatchSampler,
    batch_loader,
    length_order,
    pack_longer_side,
    random_floats,
)
from nmtbench.data.subwords import BOS, EOS, PAD

SRC_LENS = [3, 9, 1, 4, 4, 12, 2, 7, 5, 30]
TGT_LENS = [2, 8, 2, 5, 3, 10, 1, 6, 6, 28]


def sampler(shuffle=True, budget=40, seed=7):
    return TokenBatchSampler(SRC_LENS, TGT_LENS, budget, shuffle, seed)


def test_every_pair_appears_exactly_once():
    assert sorted(i for b in sampler().batches() for i in b) == list(range(len(SRC_LENS)))


def test_batches_stay_within_the_token_budget_except_a_lone_long_pair():
    for batch in sampler().batches():
        padded = len(batch) * (max(SRC_LENS[i] for i in batch) + max(TGT_LENS[i] + 1 for i in batch))
        assert padded <= 40 or len(batch) == 1
    assert [9] in sampler().batches()  # 30 + 29 tokens: over budget alone


def test_unshuffled_batches_are_length_sorted():
    assert sampler(shuffle=False).batches() == [[2, 6, 0, 4], [3, 8], [7, 1], [5], [9]]


def test_order_depends_on_seed_plus_epoch_only():
    a, b = sampler(), sampler()
    assert a.batches() == b.batches()
    first = a.batches()
    orders = set()
    for epoch in range(5):
        a.set_epoch(epoch)
        orders.add(tuple(map(tuple, a.batches())))
    assert len(orders) > 1
    a.set_epoch(0)
    assert a.batches() == first


def reference_batches(src_lens, tgt_lens, batch_tokens, shuffle, seed):
    """The batch plan as first written, one pair at a time in Python: the vectorised plan must equal it."""
    rng = random.Random(seed)
    tie = [rng.random() for _ in src_lens] if shuffle else [0.0] * len(src_lens)
    order = sorted(range(len(src_lens)), key=lambda i: (src_lens[i], tgt_lens[i], tie[i]))
    batches, batch, longest_src, longest_tgt = [], [], 0, 0
    for i in order:
        s, t = max(longest_src, src_lens[i]), max(longest_tgt, tgt_lens[i] + 1)
        if batch and (len(batch) + 1) * (s + t) > batch_tokens:
            batches.append(batch)
            batch, s, t = [], src_lens[i], tgt_lens[i] + 1
        batch.append(i)
        longest_src, longest_tgt = s, t
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("trial", range(40))
def test_the_plan_equals_the_pair_by_pair_reference_on_random_lengths(trial):
    rng = np.random.default_rng(trial)
    n, longest = int(rng.integers(1, 3000)), int(rng.choice([3, 12, 60, 300]))
    src, tgt = rng.integers(1, longest + 1, n).tolist(), rng.integers(1, longest + 1, n).tolist()
    budget, shuffle, seed = int(rng.choice([16, 64, 500, 4096])), bool(trial % 4), int(rng.integers(0, 100))
    batches = TokenBatchSampler(src, tgt, budget, shuffle, seed=seed).batches()
    assert batches == reference_batches(src, tgt, budget, shuffle, seed)


@pytest.mark.parametrize("longest", [60, 2**20, 2**40])
def test_length_order_is_a_stable_sort_by_lengths_then_tie(longest):
    """At 2**20 only 12 of the tie's bits fit in the sort key beside the lengths and the index, so many
    pairs agree in them and are settled by their whole tie; at 2**40 nothing fits and lexsort takes over."""
    rng = np.random.default_rng(longest)
    n = 2000
    src, tgt = rng.choice([1, longest], n), rng.choice([2, longest], n)
    tie = rng.integers(0, 2**16, n) / 2**16  # about 30 exactly equal ties, which keep index order
    expected = sorted(range(n), key=lambda i: (src[i], tgt[i], tie[i]))
    assert length_order(src, tgt, tie).tolist() == expected
    assert length_order(src, tgt, None).tolist() == sorted(range(n), key=lambda i: (src[i], tgt[i]))


def test_random_floats_are_python_randoms_and_the_generator_continues_after_them():
    ours, python = random.Random(5), random.Random(5)
    assert random_floats(ours, 1000).tolist() == [python.random() for _ in range(1000)]
    assert ours.random() == python.random()
    ours.shuffle(a := list(range(50)))
    python.shuffle(b := list(range(50)))
    assert a == b


def test_the_plan_is_built_once_per_epoch():
    s = sampler()
    first = s.plan()
    assert len(s) == 5 and s.plan()[0] is first[0]  # len() and a second plan() reuse it
    s.set_epoch(1)
    assert s.plan()[0] is not first[0]


def test_a_batch_is_read_padded_with_bos_and_eos():
    data = PairDataset.from_lists([[1, 1], [5, 6, 7], [10]], [[1], [8], [11, 12]])
    assert (data.src_lens.tolist(), data.tgt_lens.tolist()) == ([2, 3, 1], [1, 1, 2])
    out = data[[1, 2]]
    assert out["index"].tolist() == [1, 2]
    assert out["src"].tolist() == [[5, 6, 7], [10, PAD, PAD]]
    assert out["src_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert out["tgt_in"].tolist() == [[BOS, 8, PAD], [BOS, 11, 12]]
    assert out["tgt_out"].tolist() == [[8, EOS, PAD], [11, 12, EOS]]
    assert out["src"].dtype == out["tgt_in"].dtype == out["tgt_out"].dtype == torch.long


def test_a_split_from_disk_reads_as_the_same_pairs_held_in_memory_and_travels_as_its_folder(tmp_path):
    src, tgt = [[7] * n for n in SRC_LENS], [[8 + n] * n for n in TGT_LENS]
    ids = datasets.List(datasets.Value("int32"))
    datasets.Dataset.from_dict({"src_ids": src, "tgt_ids": tgt, "src": ["x"] * len(src)},
                               features=datasets.Features({"src_ids": ids, "tgt_ids": ids, "src": datasets.Value(
                                   "string")})).save_to_disk(str(tmp_path / "train"))  # as the tokenize stage writes
    on_disk, in_memory = PairDataset.from_disk(tmp_path / "train"), PairDataset.from_lists(src, tgt)
    assert on_disk.src_lens.tolist() == SRC_LENS and on_disk.tgt_lens.tolist() == TGT_LENS
    shipped = pickle.dumps(on_disk)  # what a spawned data-loader worker receives
    assert len(shipped) < len(pickle.dumps(in_memory))
    as_lists = lambda batch: {key: value.tolist() if torch.is_tensor(value) else value  # noqa: E731
                              for key, value in batch.items()}
    for data in (on_disk, pickle.loads(shipped)):
        for indices in ([0], [9, 1, 5], list(range(10))):
            assert as_lists(data[indices]) == as_lists(in_memory[indices])


def test_the_loader_yields_the_samplers_batches_with_or_without_workers():
    data = PairDataset.from_lists([[7] * n for n in SRC_LENS], [[8] * n for n in TGT_LENS])
    planned = sampler().batches()
    for workers in (0, 2):
        got = [batch["index"].tolist() for batch in batch_loader(data, sampler(), num_workers=workers)]
        assert got == planned


def test_data_parallel_ranks_get_disjoint_batches_and_equal_step_counts():
    whole = TokenBatchSampler(SRC_LENS, TGT_LENS, 40, True, seed=7).batches()  # 5 batches
    shards = [TokenBatchSampler(SRC_LENS, TGT_LENS, 40, True, seed=7, num_replicas=2, rank=r).batches() for r in (0, 1)]
    assert [len(s) for s in shards] == [2, 2]  # the fifth batch is left out this epoch
    assert not set(map(tuple, shards[0])) & set(map(tuple, shards[1]))
    assert sorted(map(tuple, shards[0] + shards[1])) == sorted(map(tuple, whole[:4]))


def test_validation_shards_keep_every_batch():
    shards = [TokenBatchSampler(SRC_LENS, TGT_LENS, 40, False, num_replicas=2, rank=r, even_shards=False).batches()
              for r in (0, 1)]
    assert [len(s) for s in shards] == [3, 2]
    assert sorted(i for s in shards for b in s for i in b) == list(range(len(SRC_LENS)))


def test_a_resumed_epoch_skips_its_trained_batches_once_and_keeps_its_length():
    epoch_two = sampler()
    epoch_two.set_epoch(2)
    resumed = sampler()
    resumed.resume(epoch=2, batches_done=2)
    assert len(resumed) == len(epoch_two) == 5  # Lightning counts the skipped batches in the epoch
    assert list(resumed) == epoch_two.batches()[2:]
    assert list(resumed) == epoch_two.batches()  # the skip applies to one pass only
    resumed.resume(epoch=2, batches_done=2)
    resumed.set_epoch(3)
    epoch_two.set_epoch(3)
    assert list(resumed) == epoch_two.batches()  # a new epoch starts from its first batch


def test_resuming_after_the_last_batch_of_an_epoch_starts_the_next():
    resumed = sampler()
    resumed.resume(epoch=1, batches_done=5)
    next_epoch = sampler()
    next_epoch.set_epoch(2)
    assert (resumed.epoch, list(resumed)) == (2, next_epoch.batches())


def test_fairseq_batches_cost_sentences_times_the_longer_side_cut_to_multiples_of_eight():
    # ten pairs of longer side 3, then five of 10: 3 x 10 = 30 fits 32, an eleventh would not (11 x 3 = 33)
    src, tgt = np.array([3] * 10 + [10] * 5), np.array([2] * 10 + [4] * 5)
    # at the eleventh pair the open ten are cut to eight; the two left open the next batch with it, which the
    # first pair of length 10 then takes over 32 (4 x 10), cut to its three (fewer than eight: kept whole)
    assert pack_longer_side(src, tgt, 32).tolist() == [0, 8, 11, 14, 15]
    assert pack_longer_side(src, tgt, 32, multiple=1).tolist() == [0, 10, 13, 15]
    assert pack_longer_side(np.array([50, 1]), np.array([1, 1]), 32).tolist() == [0, 1, 2]  # a lone long pair
    assert pack_longer_side(np.array([], dtype=int), np.array([], dtype=int), 32).tolist() == [0]


def test_fairseq_batching_keeps_its_batches_for_the_run_and_draws_their_order_each_epoch():
    fairseq = TokenBatchSampler(SRC_LENS, TGT_LENS, 40, True, 7, batching="fairseq")
    first = fairseq.batches()
    fairseq.set_epoch(1)
    second = fairseq.batches()
    assert sorted(map(tuple, first)) == sorted(map(tuple, second)) and first != second
    again = TokenBatchSampler(SRC_LENS, TGT_LENS, 40, True, 7, batching="fairseq")
    again.resume(1, 0)
    assert again.batches() == second  # a resumed run rebuilds the same batches in the same order
    for batch in first:  # each within 40 at sentences x the longer side, eos counted on both sides
        longest = max(max(SRC_LENS[i], TGT_LENS[i]) + 1 for i in batch)
        assert len(batch) * longest <= 40 or len(batch) == 1
