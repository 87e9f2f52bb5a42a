"""Quality against compute on hand-made curves: standings, where two swap places for good, every pair's swap."""
from nmtbench.evaluation.quality_vs_compute import (
    flops_curve,
    ranking_flip,
    standing,
    swap,
    swap_text,
    swaps,
    write_flops_curves,
)

# a fast starter that stalls, a slow one that overtakes it at 3e13 FLOPs, a third that is never best
FAST = [(1e13, 10.0), (2e13, 15.0), (3e13, 16.0), (4e13, 16.5)]
SLOW = [(1e13, 5.0), (2e13, 12.0), (3e13, 17.0), (4e13, 20.0)]
WEAK = [(2e13, 4.0), (4e13, 8.0)]


def test_a_standing_is_the_best_validation_within_the_flops():
    assert [standing(SLOW, f) for f in (0.5e13, 1e13, 2.5e13, 9e13)] == [None, 5.0, 12.0, 20.0]
    assert standing([(1e13, 9.0), (2e13, 7.0)], 2e13) == 9.0  # a worse later validation keeps the best checkpoint


def test_two_curves_swap_where_the_final_leader_leads_from_then_on():
    flip = swap("fast", "slow", {"fast": FAST, "slow": SLOW})
    assert flip == {"pair": ["fast", "slow"], "leader": "slow", "flops": 3e13, "standing": {"fast": 16.0, "slow": 17.0}}
    assert swap_text(flip) == ("**The ranking flips at 3e+13 training FLOPs**: the fast family leads at some "
                               "validation before it, the slow family at every validation from there on (best val "
                               "BLEU within 3e+13 FLOPs: fast family 16.00, slow family 17.00).")
    never = swap("slow", "weak", {"slow": SLOW, "weak": WEAK})  # compared from 2e13, where both have validated
    assert (never["leader"], never["flops"]) == ("slow", None)
    assert swap_text(never).startswith("No flip: the slow family leads the weak family at every validation")


def test_a_pair_that_ends_level_has_no_leader():
    level = swap("a", "b", {"a": [(1e13, 3.0), (2e13, 9.0)], "b": [(1e13, 5.0), (2e13, 9.0)]})
    assert (level["leader"], level["flops"]) == (None, None)
    assert swap_text(level) == "The a and b families end level (a family 9.00, b family 9.00): no leader, no flip."


def test_the_ranking_flip_is_the_top_two_and_swaps_list_every_pair_that_swaps():
    curves = {"fast": FAST, "slow": SLOW, "weak": WEAK, "empty": []}
    assert ranking_flip(curves)["pair"] == ["slow", "fast"] and ranking_flip(curves)["flops"] == 3e13
    assert [(s["pair"], s["leader"], s["flops"]) for s in swaps(curves)] == [(["fast", "slow"], "slow", 3e13)]
    assert ranking_flip({"alone": FAST})["pair"] == ["alone"]
    assert swap_text(ranking_flip({"alone": FAST})).startswith("Fewer than two learning curves")


def test_curves_round_trip_through_the_long_csv(tmp_path):
    write_flops_curves({"fast/seed1": FAST}, tmp_path / "curves.csv")
    assert (tmp_path / "curves.csv").read_text().splitlines()[:2] == ["run,train_flops,val_bleu", "fast/seed1,1e+13,10"]
    curve = tmp_path / "learning_curve.csv"
    curve.write_text("step,train_flops,val_bleu\n10,1e13,3.5\n20,2e13,\n")  # a validation without BLEU is skipped
    assert flops_curve(curve) == [(1e13, 3.5)] and flops_curve(tmp_path / "missing.csv") == []


# the published CPU runs' curves by family (docs/results/2026-11-26-published-cpu.md)
TRANSFORMER = [(7.64e12, 0.14), (1.53e13, 3.04), (2.29e13, 9.09), (3.06e13, 16.05), (3.82e13, 20.92),
               (4.58e13, 24.51), (5.35e13, 24.06), (6.11e13, 27.58), (6.87e13, 28.3), (7.64e13, 28.91),
               (8.40e13, 28.72), (9.17e13, 30.81), (9.93e13, 30.75), (1.07e14, 32.26), (1.15e14, 31.48),
               (1.20e14, 32.94)]
GRU = [(1.02e13, 5.51), (2.04e13, 14.34), (3.06e13, 17.4), (4.08e13, 22.61), (5.11e13, 24.79), (6.13e13, 22.89),
       (7.15e13, 25.49), (8.17e13, 27.03), (9.19e13, 28.39), (1.02e14, 28.12), (1.12e14, 29.57), (1.20e14, 28.53)]


def test_the_ranking_flips_for_good_at_the_validation_the_definition_names():
    # the Transformer leads at 4.58e13 (24.51 against 22.61), the GRU at 5.11e13 and 5.35e13 (24.79), and the
    # Transformer at every validation from 6.11e13 on: the first lead is not for good, the second is
    flip = ranking_flip({"rnn": GRU, "transformer": TRANSFORMER, "cnn": [(1e13, 3.0), (1e14, 20.0)]})
    assert flip == {"pair": ["transformer", "rnn"], "leader": "transformer", "flops": 6.11e13,
                    "standing": {"transformer": 27.58, "rnn": 24.79}}
    assert swap_text(flip).startswith("**The ranking flips at 6.11e+13 training FLOPs**: the rnn family leads at "
                                      "some validation before it, the transformer family at every validation")


def test_the_flip_is_the_recurrent_against_the_transformer_family_even_where_another_ends_between_them():
    above_rnn = [(1e13, 1.0), (1.2e14, 31.0)]  # decoder_only ends above the recurrent family's 29.57
    flip = ranking_flip({"rnn": GRU, "transformer": TRANSFORMER, "decoder_only": above_rnn})
    assert (flip["pair"], flip["flops"]) == (["transformer", "rnn"], 6.11e13)
    assert ranking_flip({"transformer": TRANSFORMER, "decoder_only": above_rnn, "cnn": GRU})["pair"] == [
        "transformer", "decoder_only"]  # without a recurrent family, the two standing highest


def test_no_flip_where_one_family_leads_throughout_or_the_two_end_level():
    ahead = ranking_flip({"rnn": [(1.0, 5.0), (3.0, 9.0)], "transformer": [(2.0, 1.0), (4.0, 8.0)]})
    assert (ahead["leader"], ahead["flops"]) == ("rnn", None)  # from 2.0, where both have validated, rnn leads
    level = ranking_flip({"rnn": [(1.0, 5.0), (3.0, 9.0)], "transformer": [(2.0, 6.0), (4.0, 9.0)]})
    assert (level["leader"], level["flops"]) == (None, None)
    assert "end level" in swap_text(level)
    assert swap_text(ranking_flip({"rnn": GRU})).startswith("Fewer than two learning curves")
