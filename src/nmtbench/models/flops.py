"""Counted floating-point operations of a model: the currency of equal-cost comparisons.

torch.utils.flop_counter counts matrix products and convolutions, but on CPU two fused kernels that
our models run escape it: oneDNN's LSTM layer (`mkldnn_rnn_layer`) and the CPU flash attention of
`scaled_dot_product_attention`. Both are added here with the same conventions (a multiply-add is 2
FLOPs; element-wise work is not counted), so every family is counted alike.
"""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

aten = torch.ops.aten


def _recurrent_layer_flops(input_shape, w_ih_shape, w_hh_shape, backward: bool) -> int:
    """Input and recurrent projections of every time step: 2 (T B) (G H) (I + H); backward twice that."""
    steps_times_batch = 1
    for size in input_shape[:-1]:
        steps_times_batch *= size
    gates_times_hidden, input_size = w_ih_shape
    forward = 2 * steps_times_batch * gates_times_hidden * (input_size + w_hh_shape[1])
    return 2 * forward if backward else forward


def _shapes(*tensors):
    return [tuple(t.shape) for t in tensors]


def _rnn_layer(input, weight0, weight1, *args, out_val=None, **kwargs) -> int:
    return _recurrent_layer_flops(*_shapes(input, weight0, weight1), backward=False)


def _rnn_layer_backward(input, weight1, weight2, *args, out_val=None, **kwargs) -> int:
    return _recurrent_layer_flops(*_shapes(input, weight1, weight2), backward=True)


def _attention(query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_flop_count(*_shapes(query, key, value))


def _attention_backward(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_backward_flop_count(*_shapes(grad_out, query, key, value))


for _formula in (_rnn_layer, _rnn_layer_backward, _attention, _attention_backward):
    _formula._get_raw = True  # FlopCounterMode passes these the tensors themselves

CPU_KERNELS = {
    aten.mkldnn_rnn_layer: _rnn_layer,
    aten.mkldnn_rnn_layer_backward: _rnn_layer_backward,
    aten._scaled_dot_product_flash_attention_for_cpu: _attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _attention_backward,
}


def flop_counter() -> FlopCounterMode:
    """A FlopCounterMode that also counts the CPU kernels above; use as a context manager."""
    return FlopCounterMode(display=False, custom_mapping=CPU_KERNELS)


def training_step_flops(model: torch.nn.Module, src: torch.Tensor, src_mask: torch.Tensor,
                        tgt_in: torch.Tensor) -> tuple[int, int]:
    """(forward, backward) FLOPs of one teacher-forced step on this batch; gradients are left cleared."""
    with flop_counter() as forward:
        logits = model(src, src_mask, tgt_in)  # (B, T, V)
    with flop_counter() as backward:
        logits.float().sum().backward()
    model.zero_grad(set_to_none=True)
    return forward.get_total_flops(), backward.get_total_flops()
