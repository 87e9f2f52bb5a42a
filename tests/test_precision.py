"""train.precision: what auto picks for each kind of hardware, and the plugins the precisions train with."""
import pytest
import torch
from lightning.pytorch.plugins.precision import MixedPrecision, Precision

from helpers.models import make_tiny_model
from nmtbench.param_blocks import ConfigError
from nmtbench.training.precision import (
    BF16Autocast,
    Hardware,
    cpu_flags,
    precision_plugin,
    refuse_unsupported,
    resolve_precision,
)

AMX_CPU = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})


@pytest.mark.parametrize(("hardware", "expected"), [
    (Hardware("cpu", AMX_CPU, False), "bf16-mixed"),
    (Hardware("cpu", frozenset({"avx512f", "avx512_bf16"}), False), "bf16-mixed"),  # bf16 dot products, no AMX
    (Hardware("cpu", frozenset({"amx_bf16"}), False), "bf16-mixed"),
    (Hardware("cpu", frozenset({"avx2", "avx512f", "fma"}), False), "32-true"),  # no bf16 instructions
    (Hardware("cpu", frozenset(), False), "32-true"),  # flags unknown (no /proc/cpuinfo)
    (Hardware("cuda", frozenset(), True), "bf16-mixed"),
    (Hardware("cuda", AMX_CPU, False), "32-true"),  # a GPU without bf16: the CPU's flags do not matter
])
def test_auto_picks_bf16_where_it_was_measured_faster(hardware, expected):
    assert resolve_precision("auto", hardware) == expected


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed", "16-mixed"])
def test_a_precision_that_is_set_is_kept_whatever_the_hardware(precision):
    assert resolve_precision(precision, Hardware("cpu", frozenset(), False)) == precision
    assert resolve_precision(precision, Hardware("cuda", AMX_CPU, True)) == precision


def test_cpu_flags_are_read_from_cpuinfo_and_none_without_it(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx512_bf16 amx_bf16\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx512_bf16", "amx_bf16"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_each_precision_gets_its_plugin():
    assert type(precision_plugin("32-true", "cpu")) is Precision
    fp16 = precision_plugin("16-mixed", "cpu")
    assert type(fp16) is MixedPrecision and fp16.scaler is not None
    bf16 = precision_plugin("bf16-mixed", "cpu")
    assert isinstance(bf16, BF16Autocast) and bf16.scaler is None
    autocast = bf16.autocast_context_manager()
    assert autocast.fast_dtype == torch.bfloat16 and autocast._cache_enabled  # Lightning's own turns the cache off


def test_bf16_clips_the_gradients_of_a_fused_optimizer():
    weight = torch.nn.Parameter(torch.zeros(4))
    weight.grad = torch.tensor([3.0, 4.0, 0.0, 0.0])  # norm 5
    optimizer = torch.optim.Adam([weight], fused=True)
    with pytest.raises(RuntimeError, match="fused"):  # what Lightning's bf16-mixed does
        MixedPrecision("bf16-mixed", "cpu").clip_gradients(optimizer, 1.0)
    precision_plugin("bf16-mixed", "cpu").clip_gradients(optimizer, 1.0)
    assert torch.allclose(weight.grad, torch.tensor([0.6, 0.8, 0.0, 0.0]), atol=1e-5)


def test_bf16_for_an_lstm_on_a_cpu_without_bf16_instructions_is_refused_in_one_line():
    lstm, gru = make_tiny_model("lstm_general"), make_tiny_model("gru_additive_2layers")
    plain, bf16 = Hardware("cpu", frozenset({"avx2"}), False), Hardware("cpu", frozenset({"avx512_bf16"}), False)
    with pytest.raises(ConfigError, match=r"^train.precision: bf16-mixed, but this CPU has no bf16 instructions"):
        refuse_unsupported("bf16-mixed", plain, lstm)
    refuse_unsupported("bf16-mixed", bf16, lstm)  # oneDNN has the kernel there
    refuse_unsupported("bf16-mixed", plain, gru)  # and a GRU's everywhere
    refuse_unsupported("32-true", plain, lstm)
    refuse_unsupported("bf16-mixed", Hardware("cuda", frozenset(), True), lstm)
