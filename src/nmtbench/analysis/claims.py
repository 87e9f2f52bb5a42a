"""The verdicts: each textbook claim checked against the measurements with the thresholds below, and
written out as results/claims.md with its plots in results/claims/.

Growth orders are log-log slopes between the two longest lengths of the sweep (the asymptotic regime),
or between the two widths for parameters. A verdict is `holds`, `holds with a caveat` (the direction
holds, a stated part does not or cannot be seen here) or `does not hold here`; `not decided` where the claim's
task was not run, which refutes nothing.
"""
from __future__ import annotations

import math

import numpy as np

from nmtbench.evaluation.verdict import CAVEAT, FAILS, HOLDS, UNDECIDED
from nmtbench.tables import Table

LINEAR = (0.8, 1.2)  # a log-log slope in this range is linear growth
QUADRATIC = 1.5  # a slope of at least this is quadratic growth (the T^2 term dominating)
CONSTANT = 0.05  # a slope of at most this (in absolute value) is no growth
PARAMETERS_QUADRATIC = (1.7, 2.3)  # parameters against width
EXPLOSION = 10.0  # a step whose gradient norm exceeds this many times the run's median is an explosion
ACCURACY_GAP = 0.2  # accuracies closer than this count as equal
SEVERAL = 3.0  # "several times"
HALF = (0.4, 0.65)  # "about half"
NEAR = 4.0  # a crossover within this factor of d agrees with the textbook (constants differ by model)


def slope(xs: list[float], ys: list[float | None]) -> float | None:
    """Log-log slope between the last two points; None where a value is missing or not positive."""
    (x1, x2), (y1, y2) = xs[-2:], ys[-2:]
    if not (y1 and y2) or y1 <= 0 or y2 <= 0:
        return None
    return math.log(y2 / y1) / math.log(x2 / x1)


def column(sweep: dict, name: str, key: str) -> tuple[list[int], list]:
    rows = sweep[name]["rows"]
    return [r["length"] for r in rows], [r[key] for r in rows]


def growth(sweep: dict, name: str, key: str) -> float | None:
    return slope(*column(sweep, name, key))


def linear(value: float | None) -> bool:
    return value is not None and LINEAR[0] <= value <= LINEAR[1]


def fmt(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def crossover(sweep: dict, attention: str, recurrent: str) -> float | None:
    """The T at which attention's T^2 term costs as much per position as the recurrence: a T + b T^2
    fitted to the attention model's forward FLOPs by least squares, c T to the recurrent one's; T = c / b.
    The textbook's per-layer version of this (T^2 d against T d^2) is T = d."""
    lengths, flops = column(sweep, attention, "forward_flops")
    (a, b), *_ = np.linalg.lstsq(np.array([[n, n * n] for n in lengths], dtype=float), np.array(flops, dtype=float),
                                 rcond=None)
    _, recurrent_flops = column(sweep, recurrent, "forward_flops")
    return None if b <= 0 else float(recurrent_flops[-1] / lengths[-1] / b)


def overtakes(sweep: dict, full: str, variant: str, key: str) -> float | None:
    """The T beyond which variant costs less than full, interpolated on log T between the two swept lengths
    around it; the first length if it is cheaper from the start, None if it never is or falls behind again."""
    lengths, ours = column(sweep, variant, key)
    _, theirs = column(sweep, full, key)
    cheaper = [a < b for a, b in zip(ours, theirs)]
    if not cheaper[-1]:
        return None
    first = len(cheaper) - cheaper[::-1].index(False) if False in cheaper else 0  # cheaper from here to the end
    if first == 0:
        return float(lengths[0])
    (t1, t2), (g1, g2) = lengths[first - 1:first + 1], [math.log(theirs[i] / ours[i]) for i in (first - 1, first)]
    return math.exp(math.log(t1) + (math.log(t2) - math.log(t1)) * -g1 / (g2 - g1))  # where the log ratio is 0


def long_setting(m: dict) -> str:
    """What the long sweep measures: an encoder of T tokens under a one-token target."""
    return f"the encoder up to T = {m['long'][m['roles']['transformer']]['rows'][-1]['length']} (one-token target)"


def long_orders(m: dict, key: str) -> str:
    """Growth orders at the longest T of the long sweep."""
    return ", ".join(f"{role} {fmt(growth(m['long'], m['roles'][role], key))}"
                     for role in ("transformer", "linformer", "sparse"))


def claim_complexity(m: dict) -> dict:
    sweep, roles, d = m["complexity"], m["roles"], m["width"]
    recurrent = {role: growth(sweep, roles[role], "forward_flops") for role in ("rnn", "gru", "lstm")}
    attention = growth(sweep, roles["transformer"], "forward_flops")
    convolution = growth(sweep, roles["cnn"], "forward_flops")  # reported: ConvS2S also attends to the source
    params = {name: slope(list(map(float, v["layer_params_by_width"])), list(v["layer_params_by_width"].values()))
              for name, v in sweep.items()}
    crossing = crossover(sweep, roles["transformer"], roles["rnn"])
    ok_order = all(map(linear, recurrent.values())) and attention is not None and attention >= QUADRATIC
    ok_params = all(p is not None and PARAMETERS_QUADRATIC[0] <= p <= PARAMETERS_QUADRATIC[1] for p in params.values())
    near_d = crossing is not None and d / NEAR <= crossing <= d * NEAR
    verdict = FAILS if not ok_order else (HOLDS if ok_params and near_d else CAVEAT)
    text = (f"FLOPs growth order at the longest T: {', '.join(f'{r} {fmt(v)}' for r, v in recurrent.items())}, "
            f"transformer {fmt(attention)}, cnn {fmt(convolution)} (its decoder layers attend to the source); "
            f"parameters against d: "
            f"{', '.join(f'{n} {fmt(p)}' for n, p in params.items())} (embedding tables left out); "
            f"attention's T^2 term costs as much per position as the vanilla RNN at T = {fmt(crossing, 0)} "
            f"(textbook: T = d = {d}); FLOPs growth order of {long_setting(m)}: "
            f"{long_orders(m, 'forward_flops')}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/complexity.png"}


def claim_sequential(m: dict) -> dict:
    sweep, roles, d = m["complexity"], m["roles"], m["width"]
    steps = {role: growth(sweep, roles[role], "sequential_steps") for role in ("rnn", "lstm", "transformer", "cnn")}
    lengths = [r["length"] for r in sweep[roles["rnn"]]["rows"]]
    short = sum(n <= d for n in lengths)  # the regime of the claim: T up to d
    time = {role: slope(lengths[:short], column(sweep, roles[role], "step_seconds")[1][:short]) if short >= 2 else None
            for role in ("rnn", "transformer")}
    ok_steps = linear(steps["rnn"]) and linear(steps["lstm"]) and abs(steps["transformer"] or 0) <= CONSTANT
    ok_time = None not in time.values() and time["transformer"] < time["rnn"]
    verdict = FAILS if not ok_steps else (HOLDS if ok_time else CAVEAT)
    text = (f"growth order of sequential steps: {', '.join(f'{r} {fmt(v)}' for r, v in steps.items())}; "
            f"step time growth for T <= d: rnn {fmt(time['rnn'])}, transformer {fmt(time['transformer'])}"
            f" ({m['device']})")
    return {"measurement": text, "verdict": verdict, "plot": "claims/complexity.png"}


def claim_path(m: dict) -> dict:
    sweep, roles = m["complexity"], m["roles"]
    paths = {role: column(sweep, roles[role], "path_length")[1] for role in ("rnn", "lstm", "transformer", "cnn")}
    lengths = [r["length"] for r in sweep[roles["rnn"]]["rows"]]
    recurrent = {role: slope(lengths, paths[role]) for role in ("rnn", "lstm")}
    constant = len(set(paths["transformer"])) == 1 and paths["transformer"][0] is not None
    reach = [n for n, p in zip(lengths, paths["cnn"]) if p is not None]
    cnn = (f"cnn has a path up to T = {max(reach)}, none beyond (its receptive field)" if reach else
           f"cnn has no path at any swept T (its receptive field is shorter than T = {lengths[0]})")
    verdict = HOLDS if constant and all(map(linear, recurrent.values())) else FAILS
    text = (f"path from the first to the last target position: rnn grows with order {fmt(recurrent['rnn'])}, "
            f"lstm {fmt(recurrent['lstm'])}; transformer {paths['transformer'][0]} ops at every T "
            f"({'constant' if constant else 'not constant'}); {cnn}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/complexity.png"}


def exploded(norms: list[float]) -> int:
    median = sorted(norms)[len(norms) // 2]
    return sum(n > EXPLOSION * median for n in norms)


def final_loss(losses: list[float]) -> float:
    tail = losses[-10:]
    return sum(tail) / len(tail)


def claim_gradients(m: dict) -> dict:
    probe, roles = m["gradients"], m["roles"]
    rnn, lstm = probe[roles["rnn"]]["clipped"], probe[roles["lstm"]]["clipped"]
    far = len(rnn["curve"]) - 1
    span_of = lambda run: far + 1 if run["span"] is None else run["span"]  # noqa: E731  not reached in the probe
    vanishes = rnn["span"] is not None and span_of(lstm) > span_of(rnn)
    spikes = {name: exploded(runs["unclipped"]["gradient_norms"]) for name, runs in probe.items()}
    tamed = all(final_loss(runs["clipped"]["losses"]) <= final_loss(runs["unclipped"]["losses"]) + 0.05
                for name, runs in probe.items() if spikes[name])
    verdict = FAILS if not vanishes else (HOLDS if any(spikes.values()) and tamed else CAVEAT)
    spans = ", ".join(f"{name} {'> ' + str(far) if r['clipped']['span'] is None else r['clipped']['span']}"
                      for name, r in probe.items())
    text = (f"distance at which d loss_t / d x_j falls below {m['span_threshold']:g} of its value at distance 0 "
            f"(after training, probe of {far + 1} steps): {spans}; steps with a gradient norm over {EXPLOSION:g}x "
            f"the median without clipping: {', '.join(f'{n} {s}' for n, s in spikes.items())}"
            f"{'' if any(spikes.values()) else ' (no explosion to tame)'}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/gradients.png"}


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def accuracy_in(m: dict, task: str, name: str, low: int, high: int) -> float:
    return mean(a for n, a in m["synthetic"][task][name]["accuracy"].items() if low <= int(n) <= high)


def claim_bottleneck(m: dict) -> dict:
    roles, L, low = m["roles"], m["train_length"], m["min_length"]
    tasks = [t for t in ("copy", "reverse") if t in m["synthetic"]]
    if not tasks:
        return {"measurement": "not measured: analyze.tasks holds neither copy nor reverse", "verdict": UNDECIDED,
                "plot": ""}
    third = max(1, (L - low) // 3)
    short = lambda name: mean(accuracy_in(m, t, name, low, low + third) for t in tasks)  # noqa: E731
    long = lambda name: mean(accuracy_in(m, t, name, L - third, L) for t in tasks)  # noqa: E731
    drop = short(roles["bottleneck"]) - long(roles["bottleneck"])
    gain = long(roles["attention"]) - long(roles["bottleneck"])
    verdict = HOLDS if drop >= ACCURACY_GAP and gain >= ACCURACY_GAP else (CAVEAT if gain >= ACCURACY_GAP else FAILS)
    text = (f"{' and '.join(tasks)}, trained up to L = {L}: {roles['bottleneck']} exact match "
            f"{short(roles['bottleneck']):.2f} on lengths {low}-{low + third}, {long(roles['bottleneck']):.2f} on "
            f"{L - third}-{L}; {roles['attention']} {short(roles['attention']):.2f} and {long(roles['attention']):.2f}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/synthetic.png"}


def claim_positions(m: dict) -> dict:
    roles, L = m["roles"], m["train_length"]
    tasks = list(m["synthetic"])
    beyond = {role: mean(accuracy_in(m, t, roles[role], L + 1, 2 * L) for t in tasks)
              for role in ("sinusoidal", "learned")}
    within = {role: mean(accuracy_in(m, t, roles[role], m["min_length"], L) for t in tasks) for role in beyond}
    better = beyond["sinusoidal"] - beyond["learned"] >= ACCURACY_GAP
    verdict = (HOLDS if beyond["learned"] < ACCURACY_GAP else CAVEAT) if better else FAILS
    text = (f"exact match over {', '.join(tasks)}, lengths {L + 1}-{2 * L} (never trained): sinusoidal "
            f"{beyond['sinusoidal']:.2f}, learned {beyond['learned']:.2f}; within the trained lengths "
            f"{within['sinusoidal']:.2f} and {within['learned']:.2f}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/synthetic.png"}


def claim_decoder_only(m: dict) -> dict:
    roles, sweep, L = m["roles"], m["complexity"], m["train_length"]
    ratio = sweep[roles["decoder_only"]]["params"] / sweep[roles["encoder_decoder"]]["params"]
    tasks = list(m["synthetic"])
    acc = {role: mean(accuracy_in(m, t, roles[role], m["min_length"], L) for t in tasks)
           for role in ("decoder_only", "encoder_decoder")}
    half = HALF[0] <= ratio <= HALF[1]
    as_good = acc["decoder_only"] >= acc["encoder_decoder"] - ACCURACY_GAP / 2
    verdict = HOLDS if half and as_good else (CAVEAT if half or as_good else FAILS)
    text = (f"parameters {sweep[roles['decoder_only']]['params']:,} "
            f"against {sweep[roles['encoder_decoder']]['params']:,} "
            f"(ratio {ratio:.2f}); exact match within the trained lengths {acc['decoder_only']:.2f} against "
            f"{acc['encoder_decoder']:.2f}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/synthetic.png"}


def claim_lstm_cost(m: dict) -> dict:
    roles, sweep = m["roles"], m["complexity"]
    last = lambda role, key: sweep[roles[role]]["rows"][-1][key]  # noqa: E731
    flops = last("lstm", "forward_flops") / last("rnn", "forward_flops")
    memory = last("lstm", "activation_bytes") / last("rnn", "activation_bytes")
    params = sweep[roles["lstm"]]["params"] / sweep[roles["rnn"]]["params"]
    verdict = HOLDS if flops >= SEVERAL and memory >= SEVERAL else (CAVEAT if max(flops, memory) >= SEVERAL else FAILS)
    text = (f"lstm / rnn at T = {sweep[roles['rnn']]['rows'][-1]['length']}: forward FLOPs x{flops:.1f}, "
            f"activation memory x{memory:.1f}, parameters x{params:.1f} (whole models, embeddings included)")
    return {"measurement": text, "verdict": verdict, "plot": "claims/complexity.png"}


def claim_attention_memory(m: dict) -> dict:
    roles, sweep = m["roles"], m["complexity"]
    order = growth(sweep, roles["transformer"], "activation_bytes")
    recurrent = growth(sweep, roles["rnn"], "activation_bytes")
    verdict = HOLDS if order is not None and order >= QUADRATIC else (CAVEAT if order and order > LINEAR[1] else FAILS)
    text = (f"growth order of the activation memory kept for backward at the longest T: transformer {fmt(order)}, "
            f"rnn {fmt(recurrent)} ({m['device']}; a fused attention kernel keeps no T x T matrix); "
            f"{long_setting(m)}: {long_orders(m, 'activation_bytes')}")
    return {"measurement": text, "verdict": verdict, "plot": "claims/complexity.png"}


def claim_efficient_attention(m: dict) -> dict:
    long, roles, L = m["long"], m["roles"], m["train_length"]
    full, variants = roles["transformer"], {role: roles[role] for role in ("linformer", "sparse")}
    flops = {role: growth(long, name, "forward_flops") for role, name in variants.items()}
    cost = {(role, key): overtakes(long, full, name, key) for role, name in variants.items()
            for key in ("forward_flops", "step_seconds")}
    quadratic = (growth(long, full, "forward_flops") or 0) >= QUADRATIC
    ok_flops = (quadratic and all(map(linear, flops.values()))
                and None not in (cost[r, "forward_flops"] for r in variants))
    ok_time = None not in (cost[r, "step_seconds"] for r in variants)
    verdict = FAILS if not ok_flops else (HOLDS if ok_time else CAVEAT)
    tasks = list(m["synthetic"])
    exact = {role: (mean(accuracy_in(m, t, roles[role], m["min_length"], L) for t in tasks),
                    mean(accuracy_in(m, t, roles[role], L + 1, 2 * L) for t in tasks))
             for role in ("transformer", "linformer", "sparse")}
    at = lambda value: "never in the sweep" if value is None else f"T = {value:.0f}"  # noqa: E731
    text = (f"growth order of {long_setting(m)}: FLOPs {long_orders(m, 'forward_flops')}; step time "
            f"{long_orders(m, 'step_seconds')}; cheaper than full attention in FLOPs from "
            + ", ".join(f"{role} {at(cost[role, 'forward_flops'])}" for role in variants)
            + "; in step time from " + ", ".join(f"{role} {at(cost[role, 'step_seconds'])}" for role in variants)
            + f" ({m['device']}); exact match over {', '.join(tasks)} within / beyond the trained lengths: "
            + ", ".join(f"{role} {a:.2f} / {b:.2f}" for role, (a, b) in exact.items()))
    return {"measurement": text, "verdict": verdict, "plot": "claims/long_attention.png"}


CLAIMS = {
    1: ("Per layer: self-attention O(T^2 d), recurrent O(T d^2), convolution O(T k d^2) operations; parameters "
        "O(d^2); attention is cheaper when T < d", claim_complexity),
    2: ("Sequential steps: O(T) for an RNN, O(1) per layer for a Transformer, so its training time grows more "
        "slowly with T on parallel hardware", claim_sequential),
    3: ("Maximum path length: O(T) for an RNN, O(1) for attention", claim_path),
    4: ("Gradients vanish over distance in a vanilla RNN, an LSTM keeps them longer; clipping tames explosions",
        claim_gradients),
    5: ("Without attention the encoder's last state is a bottleneck: quality drops on long inputs; attention "
        "removes it", claim_bottleneck),
    6: ("Sinusoidal positions may extrapolate to longer sequences; learned positions cannot", claim_positions),
    7: ("A decoder-only Transformer does the encoder-decoder's job with about half the parameters",
        claim_decoder_only),
    8: ("An LSTM costs several times the memory and compute of a vanilla RNN of the same width", claim_lstm_cost),
    9: ("Attention memory grows as T^2 (the T x T score matrix)", claim_attention_memory),
    10: ("Linformer and sparse attention grow linearly in T and overtake full attention beyond a crossover length",
         claim_efficient_attention),
}


def verdicts(measurements: dict) -> list[dict]:
    """One row per claim: its number, text, measurement, verdict and plot."""
    return [{"claim": number, "text": claim, **check(measurements)} for number, (claim, check) in CLAIMS.items()]


def link(plot: str) -> str:
    return f"[{plot.split('/')[-1]}]({plot})" if plot else ""


def table(rows: list[dict], measurements: dict) -> str:
    lines = ["# The textbook claims, measured", "",
             f"Models at width d = {measurements['width']} on {measurements['device']}; synthetic tasks trained up to "
             f"L = {measurements['train_length']} and tested up to 2L. Thresholds: linear growth is a log-log slope in "
             f"{LINEAR}, quadratic at least {QUADRATIC}, constant at most {CONSTANT}; accuracies closer than "
             f"{ACCURACY_GAP} count as equal; an explosion is a gradient norm over {EXPLOSION:g}x the run's median; "
             f"'several times' is at least {SEVERAL:g}x; 'about half' is a ratio in {HALF}; a crossover within "
             f"{NEAR:g}x of d agrees with T = d.", "",
             Table(["#", "claim", "measurement", "verdict", "plot"],
                   [[str(r["claim"]), r["text"], r["measurement"], f"**{r['verdict']}**", link(r["plot"])]
                    for r in rows], "r----").markdown()]
    return "\n".join(lines + [""])
