"""The comparison's verdict: the grid's main contrasts, the per-side contrasts of its encoders and decoders, and
the two published findings about the halves, measured. Each contrast is a BLEU difference with its 95% interval
over seeds and test sentences (significance.bleu_difference); compare.py renders them.

A per-side contrast pairs two models that share one half exactly (models.hybrid.halves: the same family and the
same values of the keys that half reads) and differ in the other half's family: self-attention against
recurrence (or convolution) in the encoder with the decoder fixed, or in the decoder with the encoder fixed. In an
encoder x decoder 2 x 2 of self-attention (T) and recurrence (R), with TR the Transformer encoder and the
recurrent decoder, the encoder's mean gain from self-attention minus the decoder's is
((TT - RT) + (TR - RR)) / 2 - ((TT - TR) + (RT - RR)) / 2 = TR - RT: Domhan's question and Chen et al.'s meet in
the one difference between the two hybrids.
"""
from __future__ import annotations

import itertools

from nmtbench.config import CompareConfig
from nmtbench.evaluation.significance import bleu_difference
from nmtbench.models.family import MECHANISMS
from nmtbench.models.hybrid_config import halves
from nmtbench.models.registry import FAMILIES

# the words of every verdict: the published findings' here, the textbook claims' (analysis.claims); a published
# finding does not hold here only where the contrast is decided against it, and is otherwise not decided
HOLDS, CAVEAT, FAILS, UNDECIDED = "holds", "holds with a caveat", "does not hold here", "not decided"
SIDES = ("encoder", "decoder")
MAIN = "best attention RNN vs best Transformer"  # the grid's question, also read by source length (by_length)
FINDINGS = {
    "domhan": "Domhan (ACL 2018), How Much Attention Do You Need?: self-attention matters more in the encoder than "
              "in the decoder, where a recurrent one does about as well",
    "chen": "Chen et al. (ACL 2018), The Best of Both Worlds (RNMT+): a Transformer encoder with a recurrent decoder "
            "is the best hybrid",
}


# keys whose true value lets every source position see the whole sentence: an RNN encoder read both ways, a
# decoder-only model's prefix attention over its source. Two blocks equal but in one of them are its contrast.
BOTH_WAYS = ("bidirectional", "prefix_attention")


def contrasts(models: dict, blocks: dict[str, dict], baseline: str) -> list[tuple[str, str, str]]:
    """(question, model, other model) for the main questions the grid can answer; "best" is chosen on val
    (the final runs' best val BLEU, else their val loss), never on the test sets that score the contrast."""
    def on_val(name):
        row = models[name]
        return row["best_val_bleu"]["mean"] if row["best_val_bleu"] else -row["best_val_loss"]["mean"]

    def best(names):
        return max(names, key=on_val) if names else None

    models = {name: row for name, row in models.items() if name in blocks}  # outside systems answer no contrast
    rnns = [name for name in models if mechanism(blocks[name]) == "recurrence"]
    attention = best([name for name in rnns if blocks[name].get("attention", "none") != "none"])
    plain = best([name for name in rnns if blocks[name].get("attention", "none") == "none"])
    transformers = [name for name in models if mechanism(blocks[name]) == "self-attention"]
    reference = baseline if baseline in transformers else (transformers[0] if transformers else None)
    convolutions = [name for name in models if mechanism(blocks[name]) == "convolution"]
    found = [("attention vs none within the RNNs", attention, plain),
             (MAIN, attention, best(transformers)),
             *((f"{name} vs the baseline Transformer", name, reference)
               for name in transformers + convolutions if name != reference),
             *((f"bidirectionality ({key}): {a} vs {b}", a, b) for key in BOTH_WAYS
               for a, b in itertools.permutations(models, 2)
               if blocks[a].get(key) is True and blocks[b].get(key) is False
               and _without(blocks[a], key) == _without(blocks[b], key))]
    return [(question, a, b) for question, a, b in found if a and b]


def _without(block: dict, key: str) -> dict:
    return {name: value for name, value in block.items() if name != key}


def side_contrasts(models: dict, blocks: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """(side, question, model, other) for every two models of the grid that share one half exactly and differ in
    the other half's mechanism; model holds the mechanism listed first in MECHANISMS (self-attention first)."""
    found = {name: pair for name in models if name in blocks and (pair := halves(blocks[name]))}
    rows = []
    for index, side in enumerate(SIDES):
        fixed = 1 - index
        for a, b in itertools.permutations(found, 2):
            held = [FAMILIES[found[model][index][0]].mechanism for model in (a, b)]
            if found[a][fixed] == found[b][fixed] and MECHANISMS.index(held[0]) < MECHANISMS.index(held[1]):
                question = (f"{side}: {held[0]} vs {held[1]}, the {SIDES[fixed]} fixed "
                            f"({FAMILIES[found[a][fixed][0]].mechanism})")
                rows.append((side, question, a, b))
    return rows


def mechanism(block: dict) -> str | None:
    """What a model block's family stands for (Family.mechanism); None for a hybrid or an own model."""
    family = FAMILIES.get(block.get("family"))
    return family.mechanism if family else None


def verdict(models: dict, blocks: dict[str, dict], seeds: list[int], baseline: str, translations: dict,
            references: dict[str, list[str]], cfg: CompareConfig) -> list[dict]:
    """Each contrast's BLEU difference with its 95% interval over seeds and test sets, and in words; the per-side
    contrasts carry their side."""
    found = [*((None, question, a, b) for question, a, b in contrasts(models, blocks, baseline)),
             *side_contrasts(models, blocks)]
    rows = []
    for side, question, a, b in found:
        result = difference(a, b, seeds, translations, references, cfg)
        rows.append({"question": question, "model": a, "other": b, "side": side, **result,
                     "decided": decided(result, cfg.rerun_margin),
                     "text": verdict_text(a, b, result, cfg.rerun_margin)})
    return rows


def difference(a: str, b: str, seeds: list[int], translations: dict, references: dict[str, list[str]],
               cfg: CompareConfig) -> dict:
    """BLEU(a) - BLEU(b), paired by seed, with its interval (significance.bleu_difference)."""
    runs = [[{split: translations[split][name, seed] for split in references} for seed in seeds] for name in (a, b)]
    return bleu_difference(*runs, references, cfg.bootstrap_resamples, cfg.bootstrap_seed)


def by_length(rows: list[dict], seeds: list[int], translations: dict, references: dict[str, list[str]],
              buckets: dict[str, list[int]], labels: list[str], cfg: CompareConfig) -> dict | None:
    """The main contrast (MAIN) within each source-length bucket, each with its interval: whether the
    Transformer's lead grows with the sentence, as its constant path between any two words predicts (the
    attention RNN's path through the decoder's state grows with the distance). buckets[split][i] is sentence i's
    bucket, an index into labels; a bucket empty on a test set is scored on the others. None without the
    contrast."""
    main = next((row for row in rows if row["question"] == MAIN), None)
    if main is None:
        return None
    found = []
    for index, label in enumerate(labels):
        picked = {split: [i for i, bucket in enumerate(buckets[split]) if bucket == index] for split in references}
        picked = {split: chosen for split, chosen in picked.items() if chosen}
        if not picked:
            continue
        within = {split: {run: [text[i] for i in chosen] for run, text in translations[split].items()}
                  for split, chosen in picked.items()}
        result = difference(main["model"], main["other"], seeds, within,
                            {split: [references[split][i] for i in chosen] for split, chosen in picked.items()}, cfg)
        found.append({"bucket": label, "sentences": {split: len(chosen) for split, chosen in picked.items()},
                      **result})
    return {"question": MAIN, "model": main["model"], "other": main["other"], "buckets": found}


def direction(result: dict) -> int:
    """+1 where a contrast's interval lies above 0, -1 below, 0 where it holds 0."""
    low, high = result["ci"]
    return 1 if low > 0 else -1 if high < 0 else 0


def decided(result: dict, margin: float) -> int:
    """+1 where a is decided better than b, -1 worse, 0 not decided: the interval (over seeds and sentences) must
    exclude 0, and every seed's difference must share its sign (Clark et al. 2011: a difference that a rerun
    reverses is the optimiser's, not the model's); a contrast of fewer than two seeds, whose interval holds no rerun,
    must clear margin, what a rerun of one recipe moves a model (compare.rerun_margin)."""
    side, (low, high) = direction(result), result["ci"]
    per_seed = result.get("per_seed", [])
    if len(per_seed) > 1:
        return side if all(seed * side > 0 for seed in per_seed) else 0
    return side if min(abs(low), abs(high)) > margin else 0


def verdict_text(a: str, b: str, result: dict, margin: float) -> str:
    low, high = result["ci"]
    measured = f"{result['difference']:+.2f} BLEU, 95% CI [{low:.2f}, {high:.2f}]"
    per_seed = result.get("per_seed", [])
    seeds = (f" over {len(per_seed)} seeds (sd {result['seed_sd']:.2f}: " + ", ".join(f"{d:+.2f}" for d in per_seed)
             + ")") if len(per_seed) > 1 else " (one seed)"
    verdict = decided(result, margin)
    if verdict:
        return f"{a} is {'better' if verdict > 0 else 'worse'} than {b}: {measured}{seeds}"
    if not direction(result):
        return f"not decided between {a} and {b}: {measured}{seeds}, the interval holds 0"
    why = ("its seeds disagree in sign" if len(per_seed) > 1 else
           f"with one seed the interval comes within {margin:g} BLEU of 0, what a rerun moves a model here")
    return f"not decided between {a} and {b}: {measured}{seeds}; {why}"


def two_by_two(blocks: dict[str, dict]) -> dict[str, str] | None:
    """The models of an encoder x decoder 2 x 2 of self-attention (T) and recurrence (R), keyed TT, TR, RT, RR
    (encoder first), each half shared exactly where the 2 x 2 says; None where the grid holds none."""
    found = {name: pair for name, block in blocks.items() if (pair := halves(block))}
    held = {name: tuple(FAMILIES[family].mechanism for family, _ in pair) for name, pair in found.items()}
    for tr, (attending, recurrent) in found.items():
        for rt, (reading, decoding) in found.items():
            if held[tr] + held[rt] != ("self-attention", "recurrence", "recurrence", "self-attention"):
                continue
            tt = [name for name, pair in found.items() if pair == (attending, decoding)]
            rr = [name for name, pair in found.items() if pair == (reading, recurrent)]
            if tt and rr:
                return {"TT": tt[0], "TR": tr, "RT": rt, "RR": rr[0]}
    return None


def findings(blocks: dict[str, dict], rows: list[dict], seeds: list[int], translations: dict,
             references: dict[str, list[str]], cfg: CompareConfig) -> list[dict]:
    """Domhan's and Chen et al.'s findings against the grid's 2 x 2 (two_by_two), each with the measurement in
    words and a verdict: holds (TR - RT decided above 0, decided), does not hold here (decided below 0), or not
    decided. Empty without a 2 x 2."""
    grid = two_by_two(blocks)
    if grid is None:
        return []
    TT, TR, RT, RR = (grid[key] for key in ("TT", "TR", "RT", "RR"))
    measured = {(row["model"], row["other"]): row for row in rows if row["side"]}
    hybrids = difference(TR, RT, seeds, translations, references, cfg)
    low, high = hybrids["ci"]
    said = {1: HOLDS, -1: FAILS, 0: UNDECIDED}[decided(hybrids, cfg.rerun_margin)]
    between = f"{TR} - {RT}: {hybrids['difference']:+.2f} BLEU, 95% CI [{low:.2f}, {high:.2f}]"

    def gain(a, b):
        return f"{measured[a, b]['difference']:+.2f} [{measured[a, b]['ci'][0]:.2f}, {measured[a, b]['ci'][1]:.2f}]"

    domhan = (f"self-attention over recurrence in the encoder: {gain(TT, RT)} with the self-attention decoder, "
              f"{gain(TR, RR)} with the recurrent one; in the decoder: {gain(TT, TR)} with the self-attention "
              f"encoder, {gain(RT, RR)} with the recurrent one. The encoder's mean gain minus the decoder's is "
              f"{between}")
    chen = (f"the Transformer encoder with the recurrent decoder against the reverse hybrid, {between}; against "
            f"the Transformer ({TT}) {0.0 - measured[TT, TR]['difference']:+.2f}, against the recurrent model ({RR}) "
            f"{measured[TR, RR]['difference']:+.2f}")
    return [{"finding": FINDINGS["domhan"], "measurement": domhan, "verdict": said, "models": grid},
            {"finding": FINDINGS["chen"], "measurement": chen, "verdict": said, "models": grid}]
