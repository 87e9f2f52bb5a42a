"""A contrast is decided only where every rerun would repeat it (evaluation/verdict.py decided, verdict_text), and
a published finding does not hold only where it is decided against it."""
import pytest

from nmtbench.config import CompareConfig
from nmtbench.evaluation.significance import bleu_difference
from nmtbench.evaluation.verdict import FAILS, HOLDS, UNDECIDED, decided, findings, verdict, verdict_text

REFERENCES = ["ein hund rennt im park", "eine katze sitzt auf dem dach", "zwei männer spielen schach",
              "ein kind lacht laut", "menschen gehen auf der straße", "eine frau liest ein buch"]
WRONG = ["der", "die", "das", "ein", "eine", "und"]  # one word each, scoring about 0
HALF = REFERENCES[:3] + WRONG[3:]  # half the sentences right


@pytest.mark.parametrize("result, margin, expected", [
    ({"ci": [0.5, 2.0], "per_seed": [1.0, 1.5, 0.3]}, 1.6, 1),  # every seed agrees: decided however close to 0
    ({"ci": [0.5, 2.0], "per_seed": [1.0, 1.5, -0.2]}, 1.6, 0),  # a seed disagrees in sign
    ({"ci": [-2.0, -0.1], "per_seed": [-1.0, -0.5]}, 1.6, -1),
    ({"ci": [-0.5, 2.0], "per_seed": [1.0, 1.5, 0.3]}, 1.6, 0),  # the interval holds 0
    ({"ci": [0.5, 2.0], "per_seed": [1.2]}, 1.6, 0),  # one seed, within a rerun's reach of 0
    ({"ci": [2.0, 4.0], "per_seed": [3.0]}, 1.6, 1),  # one seed, clear of it
    ({"ci": [-4.08, -2.78], "per_seed": [-3.46]}, 1.6, -1),
    ({"ci": [0.0, 0.0], "per_seed": [0.0]}, 0.0, 0),
])
def test_a_contrast_is_decided_only_where_each_seed_agrees_or_one_seed_clears_the_rerun_margin(result, margin,
                                                                                                 expected):
    assert decided(result, margin) == expected


def test_seeds_that_disagree_in_sign_leave_a_significant_mean_undecided():
    """a translates perfectly with five seeds and a third of the sentences with the sixth; b half of them with all
    six: a's mean is far above b's and its interval clear of 0, but a rerun of a can land below b."""
    many = 20  # the six sentences twenty times over: sampling the sentences then moves BLEU by little
    a = [{"t": REFERENCES * many}] * 5 + [{"t": (REFERENCES[:2] + WRONG[2:]) * many}]
    b = [{"t": HALF * many}] * 6
    result = bleu_difference(a, b, {"t": REFERENCES * many}, resamples=200, seed=3)
    assert result["significant"] and [d > 0 for d in result["per_seed"]] == [True] * 5 + [False]
    assert decided(result, 1.6) == 0
    text = verdict_text("a", "b", result, 1.6)
    assert text.startswith("not decided between a and b: ") and text.endswith("; its seeds disagree in sign")
    agreeing = bleu_difference(a[:2], b[:2], {"t": REFERENCES}, resamples=200, seed=3)
    assert decided(agreeing, 1.6) == 1 and verdict_text("a", "b", agreeing, 1.6).startswith("a is better than b: ")


def test_one_seed_within_the_rerun_margin_says_so():
    text = verdict_text("a", "b", {"difference": 1.2, "ci": [0.5, 2.0], "per_seed": [1.2]}, 1.6)
    assert text == ("not decided between a and b: +1.20 BLEU, 95% CI [0.50, 2.00] (one seed); with one seed the "
                    "interval comes within 1.6 BLEU of 0, what a rerun moves a model here")


def test_a_published_finding_does_not_hold_only_where_it_is_decided_against_it():
    """The 2 x 2 of identical translations: TR - RT is 0.00 with an interval holding 0, so neither finding is said
    not to hold (the smoke report once said so of exactly this); decided against it, it does not hold."""
    blocks = {"tt": {"family": "transformer"}, "rr": {"family": "rnn", "attention": "dot"},
              "tr": {"family": "hybrid", "encoder": {"family": "transformer"},
                     "decoder": {"family": "rnn", "attention": "dot"}},
              "rt": {"family": "hybrid", "encoder": {"family": "rnn"}, "decoder": {"family": "transformer"}}}
    models = {name: {"best_val_bleu": {"mean": 1.0}} for name in blocks}
    cfg = CompareConfig(bootstrap_resamples=100, bootstrap_seed=1)
    references = {"t": REFERENCES}

    def measured(outputs):
        translations = {"t": {(name, seed): outputs[name] for name in blocks for seed in (1, 2)}}
        rows = verdict(models, blocks, [1, 2], "tt", translations, references, cfg)
        return [row["verdict"] for row in findings(blocks, rows, [1, 2], translations, references, cfg)]

    assert measured({name: HALF for name in blocks}) == [UNDECIDED, UNDECIDED]
    assert measured({**{name: HALF for name in blocks}, "tr": REFERENCES}) == [HOLDS, HOLDS]
    assert measured({**{name: HALF for name in blocks}, "rt": REFERENCES}) == [FAILS, FAILS]
