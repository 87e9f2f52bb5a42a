"""The T sweep's counters: FLOPs of tiny layers by hand, derived sequential steps and path lengths."""
import torch
from torch import nn

from helpers.models import PAD, TRANSFORMER, V, make_tiny_model
from helpers.project import ROOT
from nmtbench.analysis.complexity import (
    DependencyTracker,
    activation_bytes,
    layer_parameters,
    long_sweep,
    path_length,
    sequential_steps,
    sweep,
)
from nmtbench.config import load_params
from nmtbench.models.flops import flop_counter, training_step_flops
from nmtbench.models.registry import build_model
from nmtbench.models.transformer import MultiHeadAttention
from nmtbench.models.vocabulary import Vocab


def counted(fn) -> int:
    with flop_counter() as counter:
        fn()
    return counter.get_total_flops()


def batch(length: int, rows: int = 2):
    generator = torch.Generator().manual_seed(length)
    src = torch.randint(4, 20, (rows, length), generator=generator)
    tgt = torch.randint(4, 20, (rows, length), generator=generator)
    return src, src != 0, tgt


def test_recurrent_layer_costs_two_flops_per_multiply_add_of_both_projections():
    B, T, D, H = 2, 5, 3, 4  # D: input size
    rnn, x = nn.RNN(D, H, batch_first=True, bias=False), torch.randn(B, T, D)
    assert counted(lambda: rnn(x)) == 2 * B * T * H * (D + H)  # O(T d^2)


def test_attention_layer_costs_projections_plus_quadratic_scores():
    B, T, d = 2, 6, 8
    layer, x = MultiHeadAttention(d, heads=2, dropout=0.0), torch.randn(B, T, d)
    k, v = layer.project_kv(x)
    projections = 4 * 2 * B * T * d * d  # q, k, v and output: O(T d^2)
    scores_and_sum = 2 * 2 * B * T * T * d  # q k^T and weights v over all heads: O(T^2 d)
    assert counted(lambda: layer(x, *layer.project_kv(x), None)) == projections + scores_and_sum
    assert counted(lambda: layer(x, k, v, None)) == projections // 2 + scores_and_sum  # q and output only


def test_convolution_costs_kernel_times_channels_squared_per_position():
    B, T, C, k = 2, 7, 4, 3
    conv, x = nn.Conv1d(C, C, k, bias=False), torch.randn(B, C, T + k - 1)
    assert counted(lambda: conv(x)) == 2 * B * T * k * C * C  # O(T k d^2)


def test_transformer_path_length_and_sequential_steps_do_not_depend_on_length():
    for name in ("transformer_post", "decoder_only", "transformer_relative"):
        model = make_tiny_model(name)
        paths = {path_length(model, *batch(T)) for T in (2, 5, 9, 17)}
        steps = {sequential_steps(model, *batch(T)) for T in (2, 5, 9, 17)}
        assert len(paths) == 1 and len(steps) == 1 and None not in paths, name


def test_more_transformer_layers_lengthen_the_path_by_the_same_amount_per_layer():
    paths = [path_length(build_model("t", {**TRANSFORMER, "layers": n}, Vocab.of(V, pad_id=PAD)).eval(), *batch(6))
             for n in (1, 2, 3)]
    assert paths[2] - paths[1] == paths[1] - paths[0] > 0


def test_recurrent_path_length_and_sequential_steps_grow_by_the_same_amount_per_step():
    for name in ("rnn_none", "gru_none", "lstm_none", "lstm_uni_no_feeding", "lstm_additive"):
        model = make_tiny_model(name)
        paths = [path_length(model, *batch(T)) for T in (2, 3, 4, 5, 9)]
        steps = [sequential_steps(model, *batch(T)) for T in (2, 3, 4, 5, 9)]
        for values in (paths, steps):
            per_step = values[1] - values[0]
            assert per_step > 0, name
            assert values == [values[0] + per_step * (T - 2) for T in (2, 3, 4, 5, 9)], name


def test_convolution_path_ends_at_its_receptive_field():
    model = make_tiny_model("cnn_wide_kernel")  # one decoder layer of kernel 5: sees 4 tokens back
    assert path_length(model, *batch(5)) is not None
    assert path_length(model, *batch(6)) is None
    assert len({sequential_steps(model, *batch(T)) for T in (3, 8, 16)}) == 1


def test_tracker_counts_chains_and_forgets_what_a_window_drops():
    x, w = torch.randn(1, 3), torch.randn(3, 3)
    with DependencyTracker() as tracker:
        tracker.mark_source(x)
        y = (x @ w).tanh()  # two ops
        other = torch.ones(1, 3) @ w
        window = torch.cat([y, other])  # (2, 3): row 0 from x, row 1 not
        kept, dropped = window[1:], window[:1]
        z = y @ w + other
    assert tracker.depth[y] == 2 and tracker.distance[y] == 2
    assert tracker.distance[dropped] == 2 and kept not in tracker.distance
    assert tracker.distance[z] == 4 and tracker.depth[z] == 4  # matmul, then the add


def test_activation_bytes_count_saved_inputs_not_weights():
    layer = nn.Linear(3, 5)
    model = nn.Module()
    model.forward = lambda src, src_mask, tgt_in: torch.tanh(layer(src))
    model.layer = layer
    x = torch.randn(4, 3, requires_grad=True)
    assert activation_bytes(model, x, None, None) == 4 * 3 * 4 + 4 * 5 * 4  # x for the weight grad, tanh's output


def test_layer_parameters_leave_out_embedding_tables_and_count_the_rest():
    model = make_tiny_model("transformer_learned")
    tables = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding))
    assert layer_parameters(model) == model.num_parameters() - tables


def test_training_step_flops_grow_linearly_for_rnn_and_faster_for_attention():
    rnn, transformer = make_tiny_model("rnn_none"), make_tiny_model("transformer_post")
    rnn_flops = [sum(training_step_flops(rnn, *batch(T))) for T in (8, 16, 32)]
    attention_flops = [sum(training_step_flops(transformer, *batch(T))) for T in (8, 16, 32)]
    assert rnn_flops[2] - rnn_flops[1] == 2 * (rnn_flops[1] - rnn_flops[0])  # exactly linear in T
    assert attention_flops[2] - attention_flops[1] > 2 * (attention_flops[1] - attention_flops[0])  # a T^2 term


def test_layer_parameters_leave_out_linformer_length_projections():
    model = make_tiny_model("transformer_linformer")  # E and F: 2 layers x 2 heads x k 5 x 16 positions, twice
    assert model.num_parameters() - layer_parameters(model) == model.embed.weight.numel() + 2 * 2 * 2 * 5 * 16


def test_long_sweep_costs_grow_linearly_for_linformer_and_sparse_and_faster_for_full_attention(monkeypatch):
    import nmtbench.analysis.complexity as complexity

    monkeypatch.setattr(complexity, "step_seconds", lambda *args: 0.0)  # timing is not what this test checks
    cfg = load_params(ROOT / "params.yaml").analyze.model_copy(
        update={"width": 16, "long_lengths": [8, 16, 24], "batch_size": 1, "repeats": 1})
    long = long_sweep(cfg)
    assert list(long) == ["transformer", "transformer_linformer", "transformer_sparse"]
    for name, result in long.items():
        assert [row["length"] for row in result["rows"]] == [8, 16, 24]
        flops = [row["forward_flops"] + row["backward_flops"] for row in result["rows"]]
        if name == "transformer":
            assert flops[2] - flops[1] > flops[1] - flops[0] > 0  # a T^2 term
        else:
            assert flops[2] - flops[1] == flops[1] - flops[0] > 0  # exactly linear in T


def test_the_main_sweep_leaves_the_attention_variants_to_the_long_sweep(monkeypatch):
    import nmtbench.analysis.complexity as complexity

    monkeypatch.setattr(complexity, "measure", lambda model, length, cfg, generator: {"length": length})
    analyze = load_params(ROOT / "params.yaml").analyze
    models = {name: analyze.models[name] for name in ("transformer", "transformer_linformer", "transformer_sparse")}
    cfg = analyze.model_copy(update={"models": models, "width": 8, "param_widths": [8, 16]})
    assert list(sweep(cfg)) == ["transformer"]
    roles = {**cfg.roles, "sinusoidal": "transformer_sparse"}  # a model with another role is swept too
    assert list(sweep(cfg.model_copy(update={"roles": roles}))) == ["transformer", "transformer_sparse"]
