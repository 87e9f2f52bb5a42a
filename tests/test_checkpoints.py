"""Atomic checkpoint writes, the run fingerprint, resuming only the same run, and exact averaging."""
import pytest
import torch

from nmtbench.training.checkpoints import AtomicCheckpointIO, average_state_dicts, resumable_checkpoint, run_fingerprint
from nmtbench.training.module import TranslationModule

BLOCK, TRAIN = {"family": "transformer", "d_model": 16}, {"seed": 1, "lr": 0.001}


def test_a_failed_save_leaves_the_previous_checkpoint_whole(tmp_path):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"step": 1}, path)
    with pytest.raises(Exception, match="pickle"):
        AtomicCheckpointIO().save_checkpoint({"step": 2, "bad": lambda: None}, path)  # a lambda cannot be pickled
    assert torch.load(path, weights_only=False) == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_the_fingerprint_changes_with_model_train_and_vocabulary_only():
    fingerprint = run_fingerprint(BLOCK, TRAIN, "abc", 1)
    assert fingerprint == run_fingerprint(dict(reversed(BLOCK.items())), TRAIN, "abc", 1)  # key order does not count
    assert fingerprint != run_fingerprint({**BLOCK, "d_model": 32}, TRAIN, "abc", 1)
    assert fingerprint != run_fingerprint(BLOCK, {**TRAIN, "lr": 2.0}, "abc", 1)
    assert fingerprint != run_fingerprint(BLOCK, TRAIN, "abd", 1)
    assert fingerprint != run_fingerprint(BLOCK, TRAIN, "abc", 2)


def test_train_keys_added_later_count_only_where_a_run_sets_them_otherwise_than_every_earlier_run_trained():
    fingerprint = run_fingerprint(BLOCK, TRAIN, "abc", 1)  # a run described before the keys existed
    assert fingerprint == run_fingerprint(BLOCK, {**TRAIN, "batching": "nmtbench", "average_at": "validations"},
                                          "abc", 1)
    assert fingerprint != run_fingerprint(BLOCK, {**TRAIN, "batching": "fairseq"}, "abc", 1)
    assert fingerprint != run_fingerprint(BLOCK, {**TRAIN, "average_at": "epoch_ends"}, "abc", 1)


def test_the_epoch_ceiling_and_the_budget_are_not_part_of_the_fingerprint_unless_a_cosine_schedule_stretches():
    fingerprint = run_fingerprint(BLOCK, {**TRAIN, "max_epochs": 30}, "abc", 1)
    assert fingerprint == run_fingerprint(BLOCK, {**TRAIN, "max_epochs": 100}, "abc", 1) == run_fingerprint(
        BLOCK, TRAIN, "abc", 1)
    assert fingerprint == run_fingerprint(BLOCK, {**TRAIN, "budget": {"kind": "time", "value": 399}}, "abc", 1) \
        == run_fingerprint(BLOCK, {**TRAIN, "budget": {"kind": "flops", "value": 3.3e13}}, "abc", 1)
    cosine = {**TRAIN, "schedule": "cosine"}
    assert run_fingerprint(BLOCK, {**cosine, "max_epochs": 30}, "abc", 1) != run_fingerprint(
        BLOCK, {**cosine, "max_epochs": 100}, "abc", 1)
    # checkpoints written before kept the budget in theirs, and earlier ones the ceiling too: the module accepts all
    train = {"lr": 0.001, "max_epochs": 30, "budget": {"kind": "time", "value": 399}}
    with_budget = run_fingerprint(BLOCK, train, "abc", 1, earlier="budget")
    with_ceiling = run_fingerprint(BLOCK, train, "abc", 1, earlier="ceiling")
    assert len({run_fingerprint(BLOCK, train, "abc", 1), with_budget, with_ceiling}) == 3
    assert with_budget == run_fingerprint(BLOCK, {**train, "max_epochs": 5}, "abc", 1, earlier="budget")
    vocab = {"size": 20, "pad": 0, "unk": 1, "bos": 2, "eos": 3, "sha256": "abc"}
    module = TranslationModule("m", BLOCK, vocab, train, 1)
    assert module.resumable_fingerprints == (run_fingerprint(BLOCK, train, "abc", 1), with_budget, with_ceiling)


def test_a_run_is_fingerprinted_by_both_vocabularies_and_a_joint_one_as_before():
    """A run started before one vocabulary per side existed keeps its fingerprint, so it still resumes."""
    joint = {"size": 20, "pad": 0, "unk": 1, "bos": 2, "eos": 3, "sha256": "abc"}
    separate = {**joint, "target_size": 24, "target_sha256": "def"}
    train = {"lr": 0.001}
    assert TranslationModule("m", BLOCK, joint, train, 1).fingerprint == run_fingerprint(BLOCK, train, "abc", 1)
    assert TranslationModule("m", BLOCK, separate, train, 1).fingerprint == run_fingerprint(BLOCK, train, "abc+def", 1)


def write_last(folder, fingerprint, step=7):
    folder.mkdir(exist_ok=True)
    torch.save({"global_step": step, "nmtbench": {"run": fingerprint}}, folder / "last.ckpt")


def test_only_the_same_run_resumes_and_another_is_set_aside(tmp_path, capsys):
    unfinished = tmp_path / "unfinished"
    assert resumable_checkpoint(unfinished, ("mine",)) is None  # nothing to resume
    write_last(unfinished, "mine")
    assert resumable_checkpoint(unfinished, ("mine",)) == unfinished / "last.ckpt"
    assert f"resuming {unfinished / 'last.ckpt'} at step 7" in capsys.readouterr().err
    write_last(unfinished, "theirs")
    assert resumable_checkpoint(unfinished, ("mine",), set_aside=False) is None and unfinished.is_dir()
    assert resumable_checkpoint(unfinished, ("mine",)) is None
    (aside,) = tmp_path.glob("unfinished.set-aside-*")
    assert not unfinished.exists()
    assert torch.load(aside / "last.ckpt", weights_only=False)["nmtbench"]["run"] == "theirs"
    assert "holds another run's checkpoints" in capsys.readouterr().err


def test_an_unreadable_last_checkpoint_is_set_aside(tmp_path):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "last.ckpt").write_bytes(b"half a checkpoint")
    assert resumable_checkpoint(unfinished, ("mine",)) is None
    (aside,) = tmp_path.glob("unfinished.set-aside-*")
    assert (aside / "last.ckpt").read_bytes() == b"half a checkpoint"


def test_averaged_weights_are_the_exact_mean(tmp_path):
    paths = []
    for i, value in enumerate([1.0, 2.0, 6.0]):
        state = {"w": torch.full((2, 3), value), "half": torch.full((2,), value, dtype=torch.bfloat16),
                 "count": torch.tensor(i)}
        paths.append(tmp_path / f"{i}.ckpt")
        torch.save({"state_dict": state}, paths[-1])
    averaged = average_state_dicts(paths)
    assert torch.equal(averaged["w"], torch.full((2, 3), 3.0))
    assert averaged["half"].dtype == torch.bfloat16
    assert torch.equal(averaged["half"], torch.full((2,), 3.0, dtype=torch.bfloat16))
    assert averaged["count"] == 2  # integer buffers are not averaged: the last checkpoint's


def test_averaging_random_weights_equals_the_float64_mean(tmp_path):
    torch.manual_seed(0)
    weights = [torch.randn(4, 5) for _ in range(4)]
    for i, w in enumerate(weights):
        torch.save({"state_dict": {"w": w}}, tmp_path / f"{i}.ckpt")
    averaged = average_state_dicts([tmp_path / f"{i}.ckpt" for i in range(4)])
    expected = (torch.stack([w.double() for w in weights]).sum(0) / 4).float()
    assert torch.equal(averaged["w"], expected)
