import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from nmtbench.evaluation.significance import bleu_difference, holm, paired_bootstrap

REFERENCES = ["The cat sat on a mat.", "The dog runs fast.", "A man sings a song.", "Two birds fly over the lake.",
              "A child plays."]
SYSTEMS = {
    "base": ["The cat sat on the mat.", "a dog runs", "A man sings.", "Two birds fly.", "A child plays."],
    "perfect": REFERENCES,
    "poor": ["cat", "dog", "man", "birds", "child"],
}


def sacrebleu_paired_bs(tmp_path, resamples, seed):
    """The sacrebleu command line's paired bootstrap, baseline first, as JSON rows."""
    (tmp_path / "ref.txt").write_text("\n".join(REFERENCES) + "\n")
    for name, hyps in SYSTEMS.items():
        (tmp_path / name).write_text("\n".join(hyps) + "\n")
    cli = Path(sys.executable).with_name("sacrebleu")
    out = subprocess.run([str(cli), "ref.txt", "-i", *SYSTEMS, "-m", "bleu", "--paired-bs", "--paired-bs-n",
                          str(resamples), "-f", "json"], cwd=tmp_path, check=True, capture_output=True, text=True,
                         env={**os.environ, "SACREBLEU_SEED": str(seed)}).stdout
    return json.loads(out)


def test_equals_the_sacrebleu_command_line(tmp_path):
    results, signature = paired_bootstrap(SYSTEMS, REFERENCES, "base", resamples=100, seed=7)
    rows = sacrebleu_paired_bs(tmp_path, 100, 7)
    assert [row["system"] for row in rows] == ["Baseline: base", "perfect", "poor"]
    for row, name in zip(rows, SYSTEMS):
        expected = row["BLEU"]
        assert results[name] == {"bleu": round(expected["score"], 2), "mean": round(expected["mean"], 2),
                                 "ci": round(expected["ci"], 2),
                                 "p_value": None if expected["p_value"] is None else round(expected["p_value"], 4)}
    assert results["base"]["p_value"] is None
    assert signature == "nrefs:1|bs:100|seed:7|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def test_a_fixed_seed_gives_the_same_figures_and_another_seed_other_ones():
    first = paired_bootstrap(SYSTEMS, REFERENCES, "base", resamples=50, seed=3)
    assert paired_bootstrap(SYSTEMS, REFERENCES, "base", resamples=50, seed=3) == first
    other = paired_bootstrap(SYSTEMS, REFERENCES, "base", resamples=50, seed=4)
    assert other[0]["base"]["bleu"] == first[0]["base"]["bleu"]  # the score itself is not resampled
    assert other[0]["base"]["mean"] != first[0]["base"]["mean"]
    assert "SACREBLEU_SEED" not in os.environ  # the seed does not leak into the process


def test_results_follow_the_order_given_whatever_the_baseline():
    results, _ = paired_bootstrap(SYSTEMS, REFERENCES, "poor", resamples=20, seed=1)
    assert list(results) == ["base", "perfect", "poor"]
    assert results["poor"]["p_value"] is None and results["base"]["p_value"] is not None


@pytest.mark.parametrize("baseline, seed, message", [
    ("gpt", 1, "baseline 'gpt' is not among the systems base, perfect, poor"),
    ("base", 0, "the seed must be a positive integer, got 0"),
])
def test_bad_arguments_are_one_clear_line(baseline, seed, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(SYSTEMS, REFERENCES, baseline, resamples=10, seed=seed)


def test_bleu_difference_is_the_mean_over_seeds_and_test_sets_with_an_interval():
    other_refs = REFERENCES[:3]
    references = {"a": REFERENCES, "b": other_refs}
    good = [{"a": SYSTEMS["perfect"], "b": other_refs}, {"a": SYSTEMS["base"], "b": SYSTEMS["base"][:3]}]
    poor = [{"a": SYSTEMS["poor"], "b": SYSTEMS["poor"][:3]}, {"a": SYSTEMS["poor"], "b": SYSTEMS["base"][:3]}]
    found = bleu_difference(good, poor, references, resamples=200, seed=3)
    expected = statistics.mean(BLEU().corpus_score(g[split], [references[split]]).score
                               - BLEU().corpus_score(p[split], [references[split]]).score
                               for g, p in zip(good, poor) for split in references)
    assert found["difference"] == round(expected, 2)
    low, high = found["ci"]
    assert 0 < low <= high and found["significant"] is True
    assert bleu_difference(good, poor, references, resamples=200, seed=3) == found  # seeded
    assert bleu_difference(poor, good, references, resamples=200, seed=3)["difference"] == -found["difference"]


def test_bleu_difference_of_a_system_with_itself_is_zero_and_not_significant():
    runs = [{"a": SYSTEMS["base"]}]
    assert bleu_difference(runs, runs, {"a": REFERENCES}, resamples=50, seed=1) == {
        "difference": 0.0, "ci": [0.0, 0.0], "significant": False, "per_seed": [0.0]}


def test_holm_multiplies_the_ith_smallest_p_by_m_minus_i_plus_1_never_falling_and_capped_at_1():
    # m = 4, smallest first: 0.01 x 4 = 0.04, 0.03 x 3 = 0.09, 0.04 x 2 = 0.08 would fall below it so stays 0.09,
    # 0.6 x 1 = 0.6
    assert holm({"a": 0.04, "b": 0.01, "c": 0.6, "d": 0.03}) == {"b": 0.04, "d": 0.09, "a": 0.09, "c": 0.6}
    assert holm({"a": 0.5, "b": 0.7}) == {"a": 1.0, "b": 1.0}
    assert holm({"only": 0.03}) == {"only": 0.03}  # one test: nothing to correct
    assert holm({}) == {}
