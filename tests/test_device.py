"""Where and how decoding runs: evaluate.device, evaluate.batch_tokens and evaluate.precision, on CPU.

The same on a GPU is tests/test_gpu.py (skipped without CUDA).
"""
import math
import random

import pytest
import torch

from helpers.models import make_tiny_model
from nmtbench.config import ConfigError, DecodeConfig, from_dict
from nmtbench.decoding.translator import Translator
from nmtbench.loading import resolve_device

FAMILIES = ["transformer_post", "lstm_general", "gru_additive_2layers", "decoder_only", "cnn", "hybrid_transformer_cnn",
            "hybrid_gru_transformer_source_target"]


@pytest.mark.parametrize("setting, gpu, expected", [
    ("auto", False, "cpu"), ("auto", True, "cuda"), ("cpu", True, "cpu"), ("cpu", False, "cpu"), ("cuda", True, "cuda"),
])
def test_a_device_setting_resolves_to_cuda_only_where_torch_sees_a_gpu(monkeypatch, setting, gpu, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert resolve_device(setting, "evaluate.device") == torch.device(expected)


def test_cuda_without_a_gpu_names_the_key_and_the_fix(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as refused:
        resolve_device("cuda", "evaluate.device")
    assert str(refused.value) == ("evaluate.device: cuda, but torch finds no CUDA GPU on this machine; use "
                                  "evaluate.device auto or cpu, or run where a GPU and a CUDA build of torch are")


@pytest.mark.parametrize("block, message", [
    ({"device": "gpu"}, "evaluate.device: 'gpu' is not valid; choose one of auto, cpu, cuda"),
    ({"precision": "16"}, "evaluate.precision: '16' is not valid; choose one of 32, bf16"),
    ({"batch_tokens": 0}, "evaluate.batch_tokens: must be > 0, got 0"),
])
def test_bad_decoding_keys_are_refused(block, message):
    with pytest.raises(ConfigError) as refused:
        DecodeConfig(**block)
    assert str(refused.value) == message


def test_precision_32_may_be_written_as_a_number():
    assert from_dict(DecodeConfig, {"precision": 32}, "evaluate").precision == "32"


def sources(n=16, seed=0):
    """Sources of 1 to 6 tokens from the tiny vocabulary (4 specials, ids 4-19), some of equal length."""
    rng = random.Random(seed)
    return [[rng.randrange(4, 20) for _ in range(rng.randint(1, 6))] for _ in range(n)]


SHORT = {"max_len_a": 1.0, "max_len_b": 2}  # an untrained model rarely ends: keep its searches short


def tokens(found):
    return [[(h.tokens, h.ended) for h in hyps] for hyps in found]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_translations_do_not_depend_on_how_sentences_are_batched(name):
    model, data = make_tiny_model(name), sources()
    one_batch = Translator(model, None, DecodeConfig(beam=3, batch_size=64, **SHORT)).translate_ids(data, nbest=2)
    alone = Translator(model, None, DecodeConfig(beam=3, batch_size=1, **SHORT)).translate_ids(data, nbest=2)
    # at most 10 padded source tokens: batches of 10 one-token sentences down to 6-token ones alone
    by_tokens = Translator(model, None, DecodeConfig(beam=3, batch_tokens=10, **SHORT)).translate_ids(data, nbest=2)
    assert tokens(one_batch) == tokens(alone) == tokens(by_tokens)
    for a, b in zip(one_batch, by_tokens):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_batch_tokens_bounds_the_padded_source_tokens_of_every_batch(monkeypatch):
    from nmtbench.decoding import translator

    seen = []

    def spy(model, src, *args, **kwargs):
        seen.append(tuple(src.shape))
        return decode(model, src, *args, **kwargs)

    decode = translator.beam_search
    monkeypatch.setattr(translator, "beam_search", spy)
    data = sources()
    cfg = DecodeConfig(beam=2, batch_tokens=10, **SHORT)
    Translator(make_tiny_model("transformer_post"), None, cfg).translate_ids(data)
    assert sum(rows for rows, _ in seen) == len(data) and len(seen) > 1
    assert all(rows * width <= 10 or rows == 1 for rows, width in seen)


# not the LSTM: oneDNN has no bf16 LSTM kernel on a CPU without bf16 instructions (tests/test_gpu.py covers it)
@pytest.mark.parametrize("name", [name for name in FAMILIES if not name.startswith("lstm")])
def test_bf16_decoding_runs_under_autocast_on_cpu(monkeypatch, name):
    model, data = make_tiny_model(name), sources(12)
    step, autocast = model.decode_step, []

    def recording_step(*args):
        autocast.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return step(*args)

    monkeypatch.setattr(model, "decode_step", recording_step)
    found = Translator(model, None, DecodeConfig(beam=2, precision="bf16", **SHORT)).translate_ids(data)
    assert set(autocast) == {(True, torch.bfloat16)}
    assert len(found) == len(data)
    for (best,) in found:
        assert all(0 <= t < 20 for t in best.tokens) and math.isfinite(best.score)
    assert not torch.is_autocast_enabled("cpu")
