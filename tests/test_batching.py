import torch

from nmtbench.data.batching import TokenBatchSampler, collate
from nmtbench.data.tokenizer import BOS, EOS, PAD

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


def test_collate_pads_and_adds_bos_and_eos():
    out = collate([(4, [5, 6, 7], [8]), (9, [10], [11, 12])])
    assert out["index"].tolist() == [4, 9]
    assert out["src"].tolist() == [[5, 6, 7], [10, PAD, PAD]]
    assert out["src_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert out["tgt_in"].tolist() == [[BOS, 8, PAD], [BOS, 11, 12]]
    assert out["tgt_out"].tolist() == [[8, EOS, PAD], [11, 12, EOS]]
    assert out["src"].dtype == torch.long


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
