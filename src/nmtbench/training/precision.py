"""train.precision: what `auto` picks on a machine, and the Lightning plugin each precision trains with.

`auto` is bf16 (bf16-mixed) where it was measured faster than fp32 at the same quality, fp32 (32-true)
elsewhere: on a CPU with bf16 instructions (the `avx512_bf16` or `amx_bf16` flag of /proc/cpuinfo; other
systems are taken to have none), where bf16 trained 1.2-1.95 times as fast on an Intel Xeon with AMX
(docs/results/2026-12-03-bf16-amx-cpu.md) and 1.4-1.6 times on an AMD EPYC with AVX-512 bf16 dot products only
(docs/results/2026-11-25-train-speed.md),
and on a CUDA GPU that supports bf16. A CPU without them emulates bf16 in fp32 arithmetic plus casts, so
fp32 is the faster there. The choice is a pure function of the detected hardware, so it is tested for
each case without that hardware.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.utilities import GradClipAlgorithmType

from nmtbench.param_blocks import ConfigError

BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Hardware:
    device: str  # where training runs: "cpu" or "cuda"
    cpu_flags: frozenset[str]  # the CPU's feature flags (empty where /proc/cpuinfo is not)
    cuda_bf16: bool  # whether the CUDA GPU computes in bf16


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The feature flags of the first CPU listed in cpuinfo; none where the file is missing."""
    if not cpuinfo.exists():
        return frozenset()
    for line in cpuinfo.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def detect_hardware(accelerator: str) -> Hardware:
    """The hardware a run with train.accelerator (cpu, gpu or auto) trains on."""
    cuda = accelerator == "gpu" or (accelerator == "auto" and torch.cuda.is_available())
    return Hardware("cuda" if cuda else "cpu", cpu_flags(), cuda and torch.cuda.is_bf16_supported())


def resolve_precision(precision: str, hardware: Hardware) -> str:
    """train.precision with `auto` replaced by what the hardware computes fastest as accurately."""
    if precision != "auto":
        return precision
    native_bf16 = hardware.cuda_bf16 if hardware.device == "cuda" else bool(BF16_CPU_FLAGS & hardware.cpu_flags)
    return "bf16-mixed" if native_bf16 else "32-true"


def refuse_unsupported(precision: str, hardware: Hardware, model: torch.nn.Module) -> None:
    """Refuses, in one line, bf16 for a model with an LSTM on a CPU without bf16 instructions: oneDNN has no bf16
    LSTM kernel there, and the first step would end in its 'could not create a primitive descriptor'."""
    native = BF16_CPU_FLAGS & hardware.cpu_flags
    if precision == "bf16-mixed" and hardware.device == "cpu" and not native and any(
            isinstance(module, torch.nn.LSTM) for module in model.modules()):
        raise ConfigError("train.precision: bf16-mixed, but this CPU has no bf16 instructions (avx512_bf16 or "
                          "amx_bf16) and oneDNN has no bf16 LSTM kernel for it; set train.precision: auto (fp32 here) "
                          "or 32-true")


class BF16Autocast(MixedPrecision):
    """Lightning's bf16-mixed (bf16 autocast, fp32 weights, gradients and optimizer state), with two changes.

    Autocast's cache of weight casts is on: Lightning turns it off, so every use of a weight casts it
    again, and a recurrent decoder that runs step by step recasts its weights at every target position.
    The cache lives for one forward (Lightning leaves the autocast context before backward and the
    optimizer step), so no cast outlives the weights it was made from.
    Gradient clipping is allowed with a fused optimizer: Lightning refuses the pair for any autocast
    precision because fp16's gradient scaler must unscale before clipping, but bf16 has no scaler.
    """

    def __init__(self, device: str):
        super().__init__("bf16-mixed", device)

    def autocast_context_manager(self) -> torch.autocast:
        return torch.autocast(self.device, dtype=torch.bfloat16)

    def clip_gradients(self, optimizer, clip_val=0.0, gradient_clip_algorithm=GradClipAlgorithmType.NORM) -> None:
        Precision.clip_gradients(self, optimizer, clip_val, gradient_clip_algorithm)


def precision_plugin(precision: str, device: str) -> Precision:
    """The Lightning plugin for a resolved train.precision on device ("cpu" or "cuda")."""
    if precision == "bf16-mixed":
        return BF16Autocast(device)
    if precision == "16-mixed":
        return MixedPrecision("16-mixed", device)
    return Precision()
