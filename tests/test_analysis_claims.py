"""Verdict logic on hand-made measurements: each claim holds, holds with a caveat, or fails as stated."""
import copy

import pytest

from nmtbench.analysis.claims import CAVEAT, FAILS, HOLDS, UNDECIDED, crossover, overtakes, slope, table, verdicts

LENGTHS = [8, 16, 32, 64, 128]
ROLES = {"rnn": "rnn", "gru": "gru", "lstm": "lstm", "transformer": "transformer", "cnn": "cnn",
         "bottleneck": "lstm", "attention": "lstm_attention", "sinusoidal": "transformer",
         "learned": "transformer_learned", "decoder_only": "decoder_only", "encoder_decoder": "transformer",
         "linformer": "transformer_linformer", "sparse": "transformer_sparse"}
LONG_LENGTHS = [64, 128, 256, 512]


def long_model(flops, memory, seconds):
    return {"rows": [{"length": T, "forward_flops": flops(T), "backward_flops": 2 * flops(T),
                      "activation_bytes": memory(T), "peak_bytes": None, "step_seconds": seconds(T)}
                     for T in LONG_LENGTHS]}


def model(flops, memory, seconds, steps, path, params=1000, layer_params=(100, 400)):
    rows = [{"length": T, "forward_flops": flops(T), "backward_flops": 2 * flops(T), "activation_bytes": memory(T),
             "peak_bytes": None, "step_seconds": seconds(T), "sequential_steps": steps(T), "path_length": path(T)}
            for T in LENGTHS]
    return {"params": params, "layer_params_by_width": dict(zip((16, 32), layer_params)), "rows": rows}


def accuracy(short, long, beyond, L=10):
    return {"accuracy": {n: (short if n <= 6 else long) if n <= L else beyond for n in range(5, 2 * L + 1)},
            "final_loss": 0.1}


def probe(span, spikes=0):
    curve = [1.0 * 0.5 ** k for k in range(8)] if span is not None else [1.0] * 8
    norms = [1.0] * 20 + [100.0] * spikes
    return {"curve": curve, "span": span, "gradient_norms": norms, "losses": [2.0] * 10}


def measurements():
    d = 16
    recurrent = dict(flops=lambda T: 4 * T * d * d, memory=lambda T: 100 * T, seconds=lambda T: 0.01 * T,
                     steps=lambda T: 3 * T + 2, path=lambda T: 3 * T)
    lstm = {**recurrent, "flops": lambda T: 16 * T * d * d, "memory": lambda T: 400 * T}
    attention = dict(flops=lambda T: 24 * T * d * d + 8 * T * T * d, memory=lambda T: 10 * T * T,
                     seconds=lambda T: 0.01 + 0.0001 * T, steps=lambda T: 40, path=lambda T: 12)
    cnn = dict(flops=lambda T: 12 * T * d * d, memory=lambda T: 50 * T, seconds=lambda T: 0.002 * T,
               steps=lambda T: 30, path=lambda T: 10 if T <= 8 else None)
    complexity = {"rnn": model(**recurrent, params=1000), "gru": model(**recurrent), "lstm": model(**lstm, params=4000),
                  "lstm_attention": model(**lstm), "transformer": model(**attention, params=2000),
                  "transformer_learned": model(**attention), "decoder_only": model(**attention, params=1000),
                  "cnn": model(**cnn)}
    synthetic = {task: {"lstm": accuracy(1.0, 0.2, 0.0), "lstm_attention": accuracy(1.0, 0.9, 0.3),
                        "transformer": accuracy(1.0, 1.0, 0.6), "transformer_learned": accuracy(1.0, 1.0, 0.0),
                        "decoder_only": accuracy(1.0, 0.95, 0.5), "transformer_linformer": accuracy(0.9, 0.8, 0.4),
                        "transformer_sparse": accuracy(1.0, 0.9, 0.5)} for task in ("copy", "reverse", "agreement")}
    # full attention 24 T d^2 + 8 T^2 d; linformer and sparse 40 T d^2 (k, or the keys each query sees, 2 d):
    # cheaper in FLOPs beyond T = 32, in time beyond 0.0001 T + 0.00001 T^2 = 0.0005 T, i.e. T = 40
    long = {"transformer": long_model(lambda T: 24 * T * d * d + 8 * T * T * d, lambda T: 10 * T * T,
                                      lambda T: 0.0001 * T + 0.00001 * T * T),
            "transformer_linformer": long_model(lambda T: 40 * T * d * d, lambda T: 300 * T, lambda T: 0.0005 * T),
            "transformer_sparse": long_model(lambda T: 40 * T * d * d, lambda T: 300 * T, lambda T: 0.0005 * T)}
    gradients = {"rnn": {"clipped": probe(3), "unclipped": probe(3, spikes=2)},
                 "lstm": {"clipped": probe(6), "unclipped": probe(6)},
                 "transformer": {"clipped": probe(None), "unclipped": probe(None)}}
    return {"width": d, "device": "CPU", "train_length": 10, "min_length": 5, "span_threshold": 0.01,
            "roles": ROLES, "complexity": complexity, "long": long, "gradients": gradients, "synthetic": synthetic}


def verdict_of(m, claim):
    return verdicts(m)[claim - 1]["verdict"]


def test_slope_and_crossover():
    assert slope([8, 16], [3.0, 12.0]) == pytest.approx(2.0)
    assert slope([8, 16, 32], [1.0, 5.0, 5.0]) == 0.0
    assert slope([8, 16], [None, 4.0]) is None
    m = measurements()
    assert crossover(m["complexity"], "transformer", "rnn") == pytest.approx(4 * 16 * 16 / (8 * 16))  # c / b
    assert crossover(m["complexity"], "cnn", "rnn") is None  # no T^2 term


def test_every_claim_holds_on_textbook_like_measurements():
    rows = verdicts(measurements())
    assert [r["claim"] for r in rows] == list(range(1, 11))
    assert {r["claim"]: r["verdict"] for r in rows} == dict.fromkeys(range(1, 11), HOLDS)


def test_claim_one_fails_when_recurrent_flops_grow_faster_than_linearly_and_notes_a_far_crossover():
    m = measurements()
    for row in m["complexity"]["rnn"]["rows"]:
        row["forward_flops"] *= 100  # the crossover moves from 8 to 800, beyond 4 d = 64
    assert verdict_of(m, 1) == CAVEAT and "T = 800" in verdicts(m)[0]["measurement"]
    for row in m["complexity"]["rnn"]["rows"]:
        row["forward_flops"] = row["length"] ** 2
    assert verdict_of(m, 1) == FAILS


def test_claim_two_has_a_caveat_when_transformer_time_grows_faster():
    m = measurements()
    for row in m["complexity"]["transformer"]["rows"]:
        row["step_seconds"] = row["length"] ** 2
    assert verdict_of(m, 2) == CAVEAT


def test_claim_three_fails_when_the_transformer_path_grows():
    m = measurements()
    m["complexity"]["transformer"]["rows"][-1]["path_length"] = 13
    assert verdict_of(m, 3) == FAILS
    assert "up to T = 8" in verdicts(measurements())[2]["measurement"]


def test_claim_four_caveat_without_explosions_and_failure_without_vanishing():
    m = measurements()
    m["gradients"]["rnn"]["unclipped"] = probe(3)
    assert verdict_of(m, 4) == CAVEAT and "no explosion" in verdicts(m)[3]["measurement"]
    m["gradients"]["rnn"]["clipped"] = probe(None)
    assert verdict_of(m, 4) == FAILS


def test_claim_four_fails_to_show_taming_when_clipping_ends_worse():
    m = measurements()
    m["gradients"]["rnn"]["clipped"]["losses"] = [3.0] * 10
    assert verdict_of(m, 4) == CAVEAT


def test_claims_five_to_seven_follow_the_accuracies_and_parameters():
    m = measurements()
    for task in m["synthetic"].values():
        task["lstm"] = accuracy(1.0, 1.0, 0.0)  # no drop, and attention brings nothing
    assert verdict_of(m, 5) == FAILS
    m = measurements()
    for task in m["synthetic"].values():
        task["transformer_learned"] = accuracy(1.0, 1.0, 0.5)
    assert verdict_of(m, 6) == FAILS
    m = measurements()
    m["complexity"]["decoder_only"]["params"] = 1900
    assert verdict_of(m, 7) == CAVEAT


def test_claim_five_is_not_decided_without_a_copy_or_reverse_task():
    m = measurements()
    m["synthetic"] = {"agreement": m["synthetic"]["agreement"]}
    row = verdicts(m)[4]
    assert row["verdict"] == UNDECIDED and row["measurement"].startswith("not measured")
    assert verdict_of(m, 6) == HOLDS  # the other synthetic claims read agreement alone


def test_claims_eight_and_nine_follow_the_ratios_and_memory_growth():
    m = measurements()
    m["complexity"]["lstm"] = copy.deepcopy(m["complexity"]["rnn"])
    assert verdict_of(m, 8) == FAILS
    m = measurements()
    for row in m["complexity"]["transformer"]["rows"]:
        row["activation_bytes"] = 7 * row["length"]
    assert verdict_of(m, 9) == FAILS


def test_table_has_one_row_per_claim_with_its_plot():
    m = measurements()
    text = table(verdicts(m), m)
    assert text.count("\n| ") == 10 + 1  # header and ten claims
    assert "[complexity.png](claims/complexity.png)" in text and "**holds**" in text


def test_overtakes_interpolates_where_the_variant_becomes_cheaper():
    long = measurements()["long"]
    assert overtakes(long, "transformer", "transformer_sparse", "forward_flops") == 64  # cheaper from the first T

    def sparse_after(full, sparse):  # step seconds at T = 64, 128, 256, 512
        for name, seconds in (("transformer", full), ("transformer_sparse", sparse)):
            for row, value in zip(long[name]["rows"], seconds):
                row["step_seconds"] = value
        return overtakes(long, "transformer", "transformer_sparse", "step_seconds")

    assert sparse_after([1, 2, 4, 8], [9, 9, 9, 9]) is None  # never cheaper
    assert sparse_after([1, 2, 4, 8], [9, 9, 4, 2]) == pytest.approx(256)  # as dear at 256, cheaper at 512
    assert sparse_after([1, 2, 4, 8], [9, 9, 8, 2]) == pytest.approx(256 * 2 ** (1 / 3))  # 2x dearer, then 4x cheaper
    assert sparse_after([1, 2, 4, 8], [0.5, 4, 1, 1]) == pytest.approx(128 * 2 ** (1 / 3))  # cheaper again from 256
    assert sparse_after([1, 2, 4, 8], [0.5, 1, 2, 9]) is None  # falls behind at the longest T


def test_claim_ten_needs_linear_growth_and_a_crossover():
    m = measurements()
    text = verdicts(m)[9]["measurement"]
    assert "FLOPs transformer 1.88, linformer 1.00, sparse 1.00;" in text
    assert "in FLOPs from linformer T = 64, sparse T = 64" in text
    assert "in step time from linformer T = 64" in text and "linformer 0.83 / 0.40" in text
    for row in m["long"]["transformer_sparse"]["rows"]:
        row["step_seconds"] = 10.0  # never faster than full attention (2.7 s at T = 512)
    assert verdict_of(m, 10) == CAVEAT and "sparse never in the sweep" in verdicts(m)[9]["measurement"]
    for row in m["long"]["transformer_linformer"]["rows"]:
        row["forward_flops"] = row["length"] ** 2  # quadratic after all
    assert verdict_of(m, 10) == FAILS


def test_the_long_sweep_is_drawn_with_every_variant():
    from nmtbench import figures

    png = figures.long_attention(measurements()["long"], 16)
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
