import hashlib
import json
import statistics

import pytest
import yaml

from nmtbench.config import BudgetConfig, CompareConfig, ConfigError, PublishedFigure, parse_params
from nmtbench.evaluation.compare import bucket_labels, bucket_of, compare, quality_against_compute
from nmtbench.evaluation.scoring import bleu, score
from nmtbench.evaluation.significance import paired_bootstrap

SPLIT = "test_2016_flickr"
SOURCES = ["A cat sits.", "A dog runs in the park.", "Two men play chess outside on a sunny day.",
           "A child laughs.", "People walk on a busy street in the city center."]
REFERENCES = ["Eine Katze sitzt.", "Ein Hund rennt im Park.",
              "Zwei Männer spielen draußen Schach an einem sonnigen Tag.", "Ein Kind lacht.",
              "Menschen gehen auf einer belebten Straße im Stadtzentrum."]
OUTPUTS = {  # (model, seed) -> translation of the test set
    ("transformer", 1): REFERENCES,
    ("transformer", 2): ["Eine Katze sitzt.", "Ein Hund rennt im Park.", "Zwei Männer spielen Schach.",
                         "Ein Kind lacht.", "Menschen gehen auf einer Straße."],
    ("rnn", 1): ["Katze.", "Ein Hund.", "Zwei Männer spielen.", "Ein Kind.", "Menschen gehen."],
    ("rnn", 2): ["Eine Katze.", "Hund rennt.", "Männer spielen Schach.", "Kind lacht.", "Menschen auf Straße."],
}
TRAIN = {"transformer": (9_512_448, 1199.6, 15321.4, 2.3456, 30.125), "rnn": (3_320_576, 3725.2, 8000.5, 2.5, None)}
CFG = CompareConfig(baseline="rnn", bootstrap_resamples=100, bootstrap_seed=5, length_buckets=[4, 8], examples=[1, 3])
DEVICE = {"cpu": "AMD EPYC 7B13", "cores": 2, "memory_gib": 23.5, "gpus": [], "torch_threads": 2, "platform": "Linux"}


def stamp(wall_seconds, commit="0123456789abcdef", dirty=False, device=DEVICE, torch="2.13.0+cpu"):
    """A provenance block as nmtbench.provenance.stamp writes it."""
    return {"git": {"commit": commit, "dirty": dirty}, "python": "3.11.7",
            "packages": {"nmtbench": "0.1.0", "torch": torch, "sacrebleu": "2.6.0"}, "device": device,
            "wall_seconds": wall_seconds, "finished": "2026-11-25T08:00:00+00:00"}


def write_run(root, name, seed, hypotheses, lang=None):
    """metrics/<name>/seed<seed>/{train,eval}.json and results/<name>/seed<seed>/<split>.txt as the stages
    write them, each metrics file with its provenance."""
    text = "".join(h + "\n" for h in hypotheses)
    (root / "results" / name / f"seed{seed}").mkdir(parents=True)
    (root / "results" / name / f"seed{seed}" / f"{SPLIT}.txt").write_text(text)
    params, seconds, tokens_per_s, val_loss, val_bleu = TRAIN[name]
    train = {"params": params, "train_seconds": seconds + seed, "train_tokens_per_s": tokens_per_s,
             "best_val_loss": val_loss + seed / 100, "best_val_bleu": val_bleu and val_bleu + seed,
             "best_val_ppl": 2.0, "steps": 1200, "epochs": 10, "target_tokens": 10_000,
             "train_flops": 3.0e12 * seed, "stopped_by": "early_stopping" if seed == 1 else "budget",
             "best_epoch": 6.0 + seed, "best_step": 720 + 120 * seed, "best_train_flops": 2.0e12 * seed,
             "provenance": stamp(600.0 + seed)}
    evals = {SPLIT: {**score(hypotheses, REFERENCES, lang), "sentences": 5, "decode_seconds": 0.5,
                     "sentences_per_s": 10.0, "beam": 5,
                     "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest()},
             "provenance": stamp(30.0)}
    (root / "metrics" / name / f"seed{seed}").mkdir(parents=True)
    (root / "metrics" / name / f"seed{seed}" / "train.json").write_text(json.dumps(train))
    (root / "metrics" / name / f"seed{seed}" / "eval.json").write_text(json.dumps(evals))


@pytest.fixture
def root(tmp_path):
    for (name, seed), hypotheses in OUTPUTS.items():
        write_run(tmp_path, name, seed, hypotheses)
    return tmp_path


def run_compare(root, seeds, cfg=CFG, models=("transformer", "rnn")):
    return compare(list(models), seeds, cfg, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root)


def test_scores_are_mean_and_sd_over_seeds(root):
    result = run_compare(root, [1, 2])
    assert (result["baseline"], result["seeds"], result["splits"]) == ("rnn", [1, 2], [SPLIT])
    # #69: the test set scored, beyond its name, for nmtbench beside
    assert result["test_sets"] == {SPLIT: {"sentences": len(REFERENCES), "references_sha256": hashlib.sha256(
        "".join(f"{line}\n" for line in REFERENCES).encode()).hexdigest()}}
    for name in ("transformer", "rnn"):
        for metric in ("bleu", "bleu_lc", "chrf", "ter"):
            values = [score(OUTPUTS[name, seed], REFERENCES)[metric] for seed in (1, 2)]
            assert result["models"][name][SPLIT][metric] == {
                "mean": round(statistics.mean(values), 4), "sd": round(statistics.stdev(values), 4),
                "per_seed": {"1": values[0], "2": values[1]}}
    transformer = result["models"]["transformer"]
    assert transformer["params"] == 9_512_448
    assert transformer["train_seconds"] == {"mean": 1201.1, "sd": round(statistics.stdev([1200.6, 1201.6]), 4),
                                            "per_seed": {"1": 1200.6, "2": 1201.6}}
    assert transformer["best_val_bleu"] == {"mean": 31.625, "sd": round(statistics.stdev([31.125, 32.125]), 4),
                                            "per_seed": {"1": 31.125, "2": 32.125}}
    assert result["models"]["rnn"]["best_val_bleu"] is None  # trained without validation BLEU
    assert result["signatures"]["bleu"] == [score(REFERENCES, REFERENCES)["bleu_signature"]]
    assert result["signatures"]["paired_bootstrap"] == [
        "nrefs:1|bs:100|seed:5|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"]
    assert json.loads((root / "results" / "comparison.json").read_text()) == result


def test_comparison_markdown_table(root):
    result = run_compare(root, [1])
    lines = (root / "results" / "comparison.md").read_text().splitlines()
    assert lines[0] == ("| Model | Parameters | Training time | Train tokens/s | Best val loss | Best val BLEU "
                        "| test_2016_flickr BLEU | test_2016_flickr 95% CI | test_2016_flickr BLEU lc "
                        "| test_2016_flickr chrF | test_2016_flickr TER |")
    assert lines[1] == "|:---|" + "---:|" * 10
    assert lines[2].startswith("| transformer | 9,512,448 | 0:20:01 | 15,321 | 2.356 | 31.12 | ")
    rnn, test = score(OUTPUTS["rnn", 1], REFERENCES), result["models"]["rnn"][SPLIT]["bootstrap"]
    assert test["mean"] - test["ci"] < 0  # sacreBLEU's interval, centred on the mean, reaches below BLEU 0
    assert lines[3] == (f"| rnn (baseline) | 3,320,576 | 1:02:06 | 8,000 | 2.510 | - | {rnn['bleu']:.2f} "
                        f"| [0.00, {test['mean'] + test['ci']:.2f}] | {rnn['bleu_lc']:.2f} "
                        f"| {rnn['chrf']:.2f} | {rnn['ter']:.2f} |")
    assert lines[5] == "One seed (1)."


def test_the_training_to_the_best_checkpoint_per_model_over_seeds(root):
    result = run_compare(root, [1, 2])
    row = result["models"]["transformer"]
    assert row["stopped_by"] == {"1": "early_stopping", "2": "budget"}
    assert row["best_step"] == {"mean": 900, "sd": 84.8528, "per_seed": {"1": 840, "2": 960}}
    assert row["best_train_flops"]["per_seed"] == {"1": 2.0e12, "2": 4.0e12}
    lines = (root / "results" / "comparison.md").read_text().split("## Training to the best checkpoint\n\n")[1]
    assert lines.splitlines()[:4] == [
        "| Model | Stopped by | Epochs | Updates | Best at epoch | Updates to best | Training FLOPs to best "
        "| Training FLOPs in all |",
        "|:---|:---|---:|---:|---:|---:|---:|---:|",
        "| transformer | early_stopping / budget | 10 ± 0 | 1200 ± 0 | 7.5 ± 0.7 | 900 ± 85 | 3e+12 ± 1.4e+12 "
        "| 4.5e+12 ± 2.1e+12 |",
        "| rnn (baseline) | early_stopping / budget | 10 ± 0 | 1200 ± 0 | 7.5 ± 0.7 | 900 ± 85 | 3e+12 ± 1.4e+12 "
        "| 4.5e+12 ± 2.1e+12 |"]


def test_runs_trained_before_the_best_checkpoint_was_recorded_show_dashes(root):
    path = root / "metrics" / "transformer" / "seed1" / "train.json"
    train = json.loads(path.read_text())
    for key in ("stopped_by", "best_epoch", "best_step", "best_train_flops", "train_flops"):
        del train[key]
    path.write_text(json.dumps(train))
    result = run_compare(root, [1])
    assert result["models"]["transformer"]["stopped_by"] == {"1": None}
    table = (root / "results" / "comparison.md").read_text().split("## Training to the best checkpoint\n\n")[1]
    assert table.splitlines()[2] == "| transformer | - | 10 | 1200 | - | - | - | - |"


def test_one_seed_has_no_sd(root):
    result = run_compare(root, [2])
    assert result["models"]["rnn"][SPLIT]["bleu"]["sd"] is None
    table = (root / "results" / "comparison.md").read_text()
    assert " ± " not in table and "One seed (2)." in table


def test_paired_bootstrap_against_the_baseline_per_seed(root):
    result = run_compare(root, [1, 2])
    for seed in (1, 2):
        expected, _ = paired_bootstrap({name: OUTPUTS[name, seed] for name in ("transformer", "rnn")}, REFERENCES,
                                       "rnn", 100, 5)
        for name in ("transformer", "rnn"):
            assert result["models"][name][SPLIT]["bootstrap"]["per_seed"][str(seed)] == expected[name]
    test = result["models"]["transformer"][SPLIT]["bootstrap"]
    p_values = [test["per_seed"][seed]["p_value"] for seed in ("1", "2")]
    assert test["p_value"] == max(p_values) and test["significant"] == (max(p_values) < 0.05)
    assert test["mean"] == round(statistics.mean(test["per_seed"][s]["mean"] for s in ("1", "2")), 2)
    baseline = result["models"]["rnn"][SPLIT]["bootstrap"]
    assert baseline["p_value"] is None and baseline["significant"] is None


def test_significance_is_marked_in_the_table(root):
    result = run_compare(root, [1])
    test = result["models"]["transformer"][SPLIT]["bootstrap"]
    assert test["significant"] is True  # the reference itself against a poor baseline
    row = next(line for line in (root / "results" / "comparison.md").read_text().splitlines()
               if line.startswith("| transformer |"))
    bleu_cell, ci_cell = row.split(" | ")[6:8]
    assert bleu_cell == "100.00*"
    assert ci_cell == f"[{test['mean'] - test['ci']:.2f}, {test['mean'] + test['ci']:.2f}]"
    assert "| rnn (baseline) |" in (root / "results" / "comparison.md").read_text()


def test_an_equal_bleu_is_never_starred_whatever_its_p_value(tmp_path):
    """Two systems at BLEU 0.0: sacreBLEU gives p = 1/101 for a difference of 0.00, which is no difference."""
    wrong = ["Hund.", "Katze.", "Baum.", "Haus.", "Auto."]
    for name in ("transformer", "rnn"):
        write_run(tmp_path, name, 1, wrong)
    result = run_compare(tmp_path, [1])
    test = result["models"]["transformer"][SPLIT]["bootstrap"]
    assert (result["models"]["transformer"][SPLIT]["bleu"]["mean"], test["p_value"]) == (0.0, 0.0099)
    assert test["significant"] is False
    row = next(line for line in (tmp_path / "results" / "comparison.md").read_text().splitlines()
               if line.startswith("| transformer |"))
    assert row.split(" | ")[6] == "0.00"


def test_bleu_by_source_length_bucket(root):
    assert bucket_labels([4, 8]) == ["1-4", "5-8", "9+"]
    assert [bucket_of(n, [4, 8]) for n in (1, 4, 5, 8, 9, 30)] == [0, 0, 1, 1, 2, 2]
    result = run_compare(root, [1, 2])
    assert result["length_buckets"] == ["1-4", "5-8", "9+"]
    buckets = result["models"]["rnn"][SPLIT]["length_buckets"]
    assert {label: bucket["sentences"] for label, bucket in buckets.items()} == {"1-4": 2, "5-8": 1, "9+": 2}
    long = [2, 4]  # the sentences of 9 words and more
    values = [bleu([OUTPUTS["rnn", seed][i] for i in long], [REFERENCES[i] for i in long]) for seed in (1, 2)]
    assert buckets["9+"]["bleu"]["per_seed"] == {"1": values[0], "2": values[1]}
    assert "| 1-4 (2) | 5-8 (1) | 9+ (2) |" in (root / "results" / "comparison.md").read_text()


def test_an_empty_bucket_has_no_bleu(root):
    cfg = CompareConfig(baseline="rnn", bootstrap_resamples=10, length_buckets=[2, 4], examples=[0])
    result = run_compare(root, [1], cfg)
    assert result["models"]["rnn"][SPLIT]["length_buckets"]["1-2"] == {"sentences": 0, "bleu": None}
    assert "| rnn | - | " in (root / "results" / "comparison.md").read_text()


def test_example_translations_side_by_side(root):
    result = run_compare(root, [2, 1])  # the first seed's translations are shown
    assert result["examples"] == {SPLIT: [
        {"index": 1, "source": SOURCES[1], "reference": REFERENCES[1],
         "outputs": {"transformer": OUTPUTS["transformer", 2][1], "rnn": OUTPUTS["rnn", 2][1]}},
        {"index": 3, "source": SOURCES[3], "reference": REFERENCES[3],
         "outputs": {"transformer": OUTPUTS["transformer", 2][3], "rnn": OUTPUTS["rnn", 2][3]}},
    ]}
    table = (root / "results" / "comparison.md").read_text()
    assert (f"- source: {SOURCES[3]}\n- reference: {REFERENCES[3]}\n- transformer: {REFERENCES[3]}\n"
            "- rnn: Kind lacht.\n") in table


def test_control_characters_of_a_translation_are_visible_in_the_examples(tmp_path):
    """A NUL and an escape decoded from byte-fallback pieces: shown as \\xNN, the line stays one line."""
    write_run(tmp_path, "transformer", 1, REFERENCES)
    write_run(tmp_path, "rnn", 1, ["Katze.", "Ein\x00Hund\x1b.", *REFERENCES[2:]])
    run_compare(tmp_path, [1])
    lines = (tmp_path / "results" / "comparison.md").read_text().splitlines()
    assert "- rnn: Ein\\x00Hund\\x1b." in lines


def test_an_example_past_the_test_set_is_refused(root):
    cfg = CompareConfig(baseline="rnn", bootstrap_resamples=10, examples=[5])
    with pytest.raises(ConfigError, match=f"compare.examples: sentence 5 is past the 5 sentences of {SPLIT}; "
                                          "choose indices below 5"):
        run_compare(root, [1], cfg)
    assert not (root / "results" / "comparison.json").exists()


def test_a_translation_that_is_not_the_scored_one_is_refused(root):
    (root / "results" / "rnn" / "seed1" / f"{SPLIT}.txt").write_text("changed\n" * 5)
    with pytest.raises(ValueError, match=r"rnn/seed1/test_2016_flickr.txt is not the translation its metrics scored; "
                                         r"re-run `dvc repro evaluate@rnn-1`"):
        run_compare(root, [1])
    (root / "results" / "rnn" / "seed1" / f"{SPLIT}.txt").unlink()
    with pytest.raises(FileNotFoundError,
                       match=r"test_2016_flickr.txt: not found; run `dvc repro evaluate@rnn-1` first"):
        run_compare(root, [1])


def test_missing_metrics_name_the_stage(root):
    (root / "metrics" / "transformer" / "seed1" / "train.json").unlink()
    with pytest.raises(FileNotFoundError) as error:
        run_compare(root, [1])
    assert str(error.value) == (f"{root}/metrics/transformer/seed1/train.json: not found; "
                                "run `dvc repro train@transformer-1` first")
    with pytest.raises(FileNotFoundError, match=r"rnn/seed7/train.json: not found; run `dvc repro train@rnn-7`"):
        run_compare(root, [2, 7], models=["rnn"])
    (root / "metrics" / "rnn" / "seed2" / "eval.json").unlink()
    with pytest.raises(FileNotFoundError,
                       match=r"rnn/seed2/eval.json: not found; run `dvc repro evaluate@rnn-2` first"):
        run_compare(root, [2], models=["rnn"])
    assert not (root / "results" / "comparison.json").exists()


def test_runs_scored_on_different_splits(root):
    path = root / "metrics" / "rnn" / "seed1" / "eval.json"
    path.write_text(json.dumps({"test_2017_flickr": json.loads(path.read_text())[SPLIT]}))
    with pytest.raises(ValueError, match=r"re-run `dvc repro evaluate@rnn-1`"):
        run_compare(root, [1])


def test_runs_trained_before_validation_bleu_existed_still_compare(root):
    path = root / "metrics" / "transformer" / "seed1" / "train.json"
    train = json.loads(path.read_text())
    del train["best_val_bleu"]
    path.write_text(json.dumps(train))
    result = run_compare(root, [1])
    assert result["models"]["transformer"]["best_val_bleu"] is None
    row = next(line for line in (root / "results" / "comparison.md").read_text().splitlines()
               if line.startswith("| transformer |"))
    assert row.split(" | ")[5] == "-"


def write_tuned(root, name, family, trials, default, tuned, values):
    (root / "tuned").mkdir(exist_ok=True)
    row = {"model": name, "family": family, "study": f"{name}-0123456789ab", "trials": trials,
           "default_val_bleu": default, "tuned_val_bleu": tuned, "trial": 1, "params": values}
    (root / "tuned" / f"{name}.yaml").write_text(yaml.safe_dump(row))


def test_tuning_columns_and_the_ranking_they_change(root):
    assert run_compare(root, [1])["tuning"] is None  # nothing tuned: no tuning section
    write_tuned(root, "transformer", "transformer", 2, 10.0, 12.5, {"train": {"lr": 0.000723456}, "model": {}})
    write_tuned(root, "rnn", "rnn", 2, 11.0, 11.5, {"train": {"lr": 0.002}, "model": {"dropout": 0.3}})
    result = run_compare(root, [1])
    assert result["tuning"] == {
        "models": {"transformer": {"family": "transformer", "trials": 2, "default_val_bleu": 10.0,
                                   "tuned_val_bleu": 12.5, "params": {"train": {"lr": 0.000723456}, "model": {}}},
                   "rnn": {"family": "rnn", "trials": 2, "default_val_bleu": 11.0, "tuned_val_bleu": 11.5,
                           "params": {"train": {"lr": 0.002}, "model": {"dropout": 0.3}}}},
        "ranking": {"default": {"models": ["rnn", "transformer"], "families": ["rnn", "transformer"]},
                    "tuned": {"models": ["transformer", "rnn"], "families": ["transformer", "rnn"]},
                    "models_changed": True, "families_changed": True}}
    table = (root / "results/comparison.md").read_text()
    assert "| transformer | transformer | 2 | 10 | 12.5 | lr 0.0007235 |" in table
    assert "- Families ranked by val BLEU untuned: rnn, transformer; tuned: transformer, rnn (changed)." in table


def test_the_marks_are_checked_under_holms_correction_over_the_tests_of_a_test_set(root):
    from nmtbench.evaluation.rendering import holm_notes

    result = run_compare(root, [1, 2])
    test = result["models"]["transformer"][SPLIT]["bootstrap"]
    assert test["p_holm"] == test["p_value"] and test["significant_holm"] == test["significant"]  # one test alone
    assert "p_holm" not in result["models"]["rnn"][SPLIT]["bootstrap"]  # the baseline is not tested
    assert f"- {SPLIT}: under Holm's correction over its 1 test against the baseline every * stands." in (
        root / "results/comparison.md").read_text()

    def tested(p_value, p_holm):
        return {SPLIT: {"bootstrap": {"p_value": p_value, "significant": p_value < 0.05, "p_holm": p_holm,
                                      "significant_holm": p_holm < 0.05}}}
    three = {"splits": [SPLIT], "models": {"a": tested(0.001, 0.003), "b": tested(0.02, 0.04), "c": tested(0.03, 0.04),
                                           "base": {SPLIT: {"bootstrap": {"p_value": None}}}}}
    assert holm_notes(three) == [
        f"{SPLIT}: under Holm's correction over its 3 tests against the baseline every * stands."]
    three["models"]["c"] = tested(0.04, 0.06)
    assert holm_notes(three) == [f"{SPLIT}: under Holm's correction over its 3 tests against the baseline the * of "
                                 "c (p 0.04) lapse."]
    assert holm_notes({"splits": [SPLIT], "models": {"a": {SPLIT: {"bootstrap": {"p_value": 0.01}}}}}) == []  # older


def test_untuned_models_have_no_tuning_section(root):
    write_tuned(root, "rnn", "rnn", 0, None, None, {})
    assert run_compare(root, [1, 2])["tuning"] is None


def test_the_verdict_gives_each_contrast_with_its_interval(root):
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn", "attention": "dot"}}
    result = compare(["transformer", "rnn"], [1, 2], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root, blocks)
    (row,) = result["verdict"]  # one attention RNN, no plain one, one Transformer: one contrast
    expected = statistics.mean(bleu(OUTPUTS["rnn", seed], REFERENCES) - bleu(OUTPUTS["transformer", seed], REFERENCES)
                               for seed in (1, 2))
    assert (row["question"], row["model"], row["other"]) == ("best attention RNN vs best Transformer", "rnn",
                                                             "transformer")
    assert row["difference"] == round(expected, 2) and row["significant"] is True and row["ci"][1] < 0
    per_seed = [round(bleu(OUTPUTS["rnn", seed], REFERENCES) - bleu(OUTPUTS["transformer", seed], REFERENCES), 2)
                for seed in (1, 2)]
    assert row["per_seed"] == per_seed and row["seed_sd"] == round(statistics.stdev(per_seed), 2)
    assert row["decided"] == -1  # both seeds worse
    assert row["text"] == (f"rnn is worse than transformer: {row['difference']:+.2f} BLEU, "
                           f"95% CI [{row['ci'][0]:.2f}, {row['ci'][1]:.2f}] over 2 seeds (sd {row['seed_sd']:.2f}: "
                           f"{per_seed[0]:+.2f}, {per_seed[1]:+.2f})")
    table = (root / "results/comparison.md").read_text().split("## Verdict\n\n")[1].split("\n\n## ")[0]
    assert table.rstrip().endswith(f"- best attention RNN vs best Transformer: {row['text']}.\n"
                                   "- Differences are means over 2 seeds and the test sets test_2016_flickr; "
                                   "the interval resamples both; decided where it excludes 0 and every seed's "
                                   "difference has its sign.")


def test_the_main_contrast_is_read_again_within_each_source_length_bucket(root):
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn", "attention": "dot"}}
    result = compare(["transformer", "rnn"], [1, 2], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root, blocks)
    found = result["by_length"]
    assert (found["model"], found["other"]) == ("rnn", "transformer")
    # 3, 6, 9, 3 and 10 words at the bounds 4 and 8: sentences 0 and 3, then 1, then 2 and 4
    chosen = {"1-4": [0, 3], "5-8": [1], "9+": [2, 4]}
    assert [(row["bucket"], row["sentences"]) for row in found["buckets"]] == [
        (label, {SPLIT: len(rows)}) for label, rows in chosen.items()]
    for row in found["buckets"]:
        rows = chosen[row["bucket"]]

        def within(texts, rows=rows):
            return [texts[i] for i in rows]
        expected = statistics.mean(bleu(within(OUTPUTS["rnn", seed]), within(REFERENCES))
                                   - bleu(within(OUTPUTS["transformer", seed]), within(REFERENCES)) for seed in (1, 2))
        assert row["difference"] == round(expected, 2) and row["ci"][0] <= row["difference"] <= row["ci"][1]
    table = (root / "results/comparison.md").read_text().split("## The main contrast by source length\n\n")[1]
    first = found["buckets"][0]
    assert table.splitlines()[:3] == [
        "| Source words | Sentences | rnn - transformer | 95% CI | Significant |", "|:---|---:|---:|---:|:---|",
        f"| 1-4 | 2 | {first['difference']:+.2f} | [{first['ci'][0]:.2f}, {first['ci'][1]:.2f}] | "
        f"{'yes' if first['significant'] else 'no'} |"]


def test_without_the_main_contrast_nothing_is_read_by_length(root):
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn"}}  # no attention RNN
    result = compare(["transformer", "rnn"], [1], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root, blocks)
    assert result["by_length"] is None
    assert "by source length\n\n| Source words" not in (root / "results/comparison.md").read_text()


def test_the_contrasts_pick_the_best_on_validation():
    from nmtbench.evaluation.verdict import contrasts

    def row(val_bleu):
        return {"best_val_bleu": {"mean": val_bleu}, "best_val_loss": {"mean": 1.0}}

    blocks = {"lstm": {"family": "rnn", "attention": "none"}, "gru": {"family": "rnn", "cell": "gru"},
              "dot": {"family": "rnn", "attention": "dot"}, "add": {"family": "rnn", "attention": "additive"},
              "transformer": {"family": "transformer"}, "pre": {"family": "transformer"},
              "decoder_only": {"family": "decoder_only"}, "cnn": {"family": "cnn"}}
    models = {name: row(bleu) for name, bleu in zip(blocks, (5, 6, 9, 8, 10, 12, 7, 11))}
    assert contrasts(models, blocks, "transformer") == [
        ("attention vs none within the RNNs", "dot", "gru"),
        ("best attention RNN vs best Transformer", "dot", "pre"),
        ("pre vs the baseline Transformer", "pre", "transformer"),
        ("decoder_only vs the baseline Transformer", "decoder_only", "transformer"),
        ("cnn vs the baseline Transformer", "cnn", "transformer")]



def test_a_pair_that_differs_only_in_reading_the_source_both_ways_answers_bidirectionality():
    from nmtbench.evaluation.verdict import contrasts

    row = {"best_val_bleu": {"mean": 10.0}, "best_val_loss": {"mean": 1.0}}
    dot = {"family": "rnn", "cell": "lstm", "attention": "dot", "bidirectional": True}
    blocks = {"dot": dot, "dot_forward": {**dot, "bidirectional": False},
              "gru_forward": {**dot, "cell": "gru", "bidirectional": False},  # differs in its cell too: no pair
              "prefix": {"family": "decoder_only", "prefix_attention": True},
              "causal": {"family": "decoder_only", "prefix_attention": False}}
    found = contrasts(dict.fromkeys(blocks, row), blocks, "prefix")
    assert [entry for entry in found if entry[0].startswith("bidirectionality")] == [
        ("bidirectionality (bidirectional): dot vs dot_forward", "dot", "dot_forward"),
        ("bidirectionality (prefix_attention): prefix vs causal", "prefix", "causal")]



def test_the_shipped_grid_answers_bidirectionality_with_its_one_pair():
    from helpers.project import ROOT
    from nmtbench.evaluation.verdict import contrasts
    from nmtbench.files import read_yaml

    blocks = read_yaml(ROOT / "params.yaml")["models"]
    row = {"best_val_bleu": {"mean": 10.0}, "best_val_loss": {"mean": 1.0}}
    found = contrasts(dict.fromkeys(blocks, row), blocks, "transformer")
    assert [entry[1:] for entry in found if entry[0].startswith("bidirectionality")] == [
        ("lstm_attention_additive", "lstm_attention_additive_unidirectional")]

def test_the_verdict_reads_the_encoder_x_decoder_2x2_per_side_and_measures_the_two_findings(root, monkeypatch):
    """transformer (TT) and rnn (RR) with the two hybrids tr (its encoder, rnn's decoder) and rt: four per-side
    contrasts, each changing one half, and Domhan's and Chen et al.'s findings from BLEU(tr) - BLEU(rt)."""
    for name, like in (("tr", "transformer"), ("rt", "rnn")):
        monkeypatch.setitem(TRAIN, name, TRAIN[like])
        for seed in (1, 2):
            write_run(root, name, seed, OUTPUTS[like, seed])
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn", "attention": "dot"},
              "tr": {"family": "hybrid", "encoder": {"family": "transformer"},
                     "decoder": {"family": "rnn", "attention": "dot"}},
              "rt": {"family": "hybrid", "encoder": {"family": "rnn", "hidden_dim": 256},
                     "decoder": {"family": "transformer", "norm": "post"}}}  # the defaults written out: the same half
    result = compare(list(blocks), [1, 2], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root, blocks)
    sides = [(row["side"], row["question"], row["model"], row["other"]) for row in result["verdict"] if row["side"]]
    assert sides == [
        ("encoder", "encoder: self-attention vs recurrence, the decoder fixed (self-attention)", "transformer", "rt"),
        ("encoder", "encoder: self-attention vs recurrence, the decoder fixed (recurrence)", "tr", "rnn"),
        ("decoder", "decoder: self-attention vs recurrence, the encoder fixed (self-attention)", "transformer", "tr"),
        ("decoder", "decoder: self-attention vs recurrence, the encoder fixed (recurrence)", "rt", "rnn")]
    by_pair = {(row["model"], row["other"]): row for row in result["verdict"]}
    assert by_pair["transformer", "tr"]["difference"] == 0 and not by_pair["transformer", "tr"]["significant"]
    assert by_pair["transformer", "rt"]["difference"] > 0 and by_pair["transformer", "rt"]["significant"]
    domhan, chen = result["findings"]
    tr_minus_rt = by_pair["transformer", "rt"]  # tr translates as transformer does, rt as rnn
    between = (f"tr - rt: {tr_minus_rt['difference']:+.2f} BLEU, 95% CI [{tr_minus_rt['ci'][0]:.2f}, "
               f"{tr_minus_rt['ci'][1]:.2f}]")
    assert domhan["verdict"] == chen["verdict"] == "holds"
    assert domhan["models"] == {"TT": "transformer", "TR": "tr", "RT": "rt", "RR": "rnn"}
    assert domhan["finding"].startswith("Domhan (ACL 2018), How Much Attention Do You Need?: self-attention matters")
    assert domhan["measurement"].endswith(f"The encoder's mean gain minus the decoder's is {between}")
    assert chen["measurement"].startswith(f"the Transformer encoder with the recurrent decoder against the reverse "
                                          f"hybrid, {between}; against the Transformer (transformer) +0.00")
    page = (root / "results/comparison.md").read_text()
    assert f"- {chen['finding']}: **holds**; {chen['measurement']}." in page


def test_without_a_2x2_there_are_no_findings(root):
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn", "attention": "dot"}}
    result = compare(list(blocks), [1], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root, blocks)
    assert result["findings"] == [] and all(row["side"] is None for row in result["verdict"])


CURVES = {  # (model, seed) -> (training FLOPs, val BLEU) at each validation
    ("transformer", 1): [(20, 5.0), (40, 9.0), (60, 8.0), (101, 12.0)],
    ("transformer", 2): [(30, 6.0), (55, 10.0), (101, 11.0)],
    ("rnn", 1): [(50, 3.0), (101, 4.0)],
    ("rnn", 2): [(26, 2.0), (60, 1.0), (101, 5.0)],
}


def write_curves(root):
    for (name, seed), rows in CURVES.items():
        lines = ["step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu",
                 *(f"{i},{i},{i},{i},{flops},2.0,2.0,7.39,{bleu}" for i, (flops, bleu) in enumerate(rows, 1))]
        (root / "metrics" / name / f"seed{seed}" / "learning_curve.csv").write_text("\n".join(lines) + "\n")


def test_val_bleu_across_compute_is_the_best_within_each_fraction_of_the_flop_budget(root):
    assert run_compare(root, [1, 2])["across_compute"] is None  # no curves with FLOPs: nothing to read off
    write_curves(root)
    result = compare(["transformer", "rnn"], [1, 2], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root,
                     budget=BudgetConfig(kind="flops", value=100))
    found = result["across_compute"]
    assert (found["flops"], found["budget"]) == (100, "train.budget")
    mean = {name: {f: row[f] and row[f]["mean"] for f in row} for name, row in found["models"].items()}
    # 1/4: transformer's second seed had not validated by 25 FLOPs; 1/2: the best so far, not the last
    assert mean == {"transformer": {"0.25": None, "0.5": 7.5, "1.0": 11.5},
                    "rnn": {"0.25": None, "0.5": 2.5, "1.0": 4.5}}
    assert found["models"]["transformer"]["0.5"]["per_seed"] == {"1": 9.0, "2": 6.0}
    markdown = (root / "results" / "comparison.md").read_text()
    assert "| Model | 1/4 (25 FLOPs) | 1/2 (50 FLOPs) | all (1e+02 FLOPs) |" in markdown
    assert "| transformer | - | 7.50 ± 2.12 | 11.50 ± 0.71 |" in markdown


def test_every_runs_flops_curve_in_one_long_csv_for_the_top_level_plot(root):
    run_compare(root, [1])
    assert (root / "results" / "flops_curves.csv").read_text() == "run,train_flops,val_bleu\n"  # no curves yet
    write_curves(root)
    run_compare(root, [1])
    assert (root / "results" / "flops_curves.csv").read_text().splitlines() == [
        "run,train_flops,val_bleu", "transformer/seed1,20,5", "transformer/seed1,40,9", "transformer/seed1,60,8",
        "transformer/seed1,101,12", "rnn/seed1,50,3", "rnn/seed1,101,4"]


def test_without_a_flop_budget_the_largest_run_sets_the_scale(root):
    write_curves(root)
    found = compare(["transformer", "rnn"], [1], CFG, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root,
                    budget=BudgetConfig(kind="none"))["across_compute"]
    assert (found["flops"], found["budget"]) == (101, "the largest run")
    assert {name: [row[f] and row[f]["mean"] for f in row] for name, row in found["models"].items()} == {
        "transformer": [5.0, 9.0, 12.0], "rnn": [None, 3.0, 4.0]}


EXTERNAL = ["Eine Katze sitzt.", "Ein Hund rennt.", "Zwei Männer spielen Schach.", "Ein Kind lacht.", "Menschen."]


def with_external(root, text, name="peer"):
    path = root / "systems" / name / f"{SPLIT}.de"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return CFG.model_copy(update={"external": {name: {SPLIT: f"systems/{name}/{SPLIT}.de"}}})


def test_an_outside_system_is_scored_and_tested_like_the_models(root):
    cfg = with_external(root, "".join(line + "\n" for line in EXTERNAL))
    result = run_compare(root, [1, 2], cfg)
    peer = result["models"]["peer"]
    expected = score(EXTERNAL, REFERENCES)
    assert peer[SPLIT]["bleu"] == {"mean": expected["bleu"], "sd": None, "per_seed": {"external": expected["bleu"]}}
    assert (peer["external"], peer["params"], peer["train_seconds"]) == (True, None, None)
    assert result["models"]["rnn"]["external"] is False
    tests = [paired_bootstrap({"rnn": OUTPUTS["rnn", seed], "peer": EXTERNAL}, REFERENCES, "rnn", 100, 5)[0]["peer"]
             for seed in (1, 2)]  # against each seed's baseline run, as a model's run of that seed is
    assert peer[SPLIT]["bootstrap"]["p_value"] == max(test["p_value"] for test in tests)
    assert result["examples"][SPLIT][0]["outputs"]["peer"] == EXTERNAL[1]
    table = (root / "results" / "comparison.md").read_text()
    assert f"| peer (external) | - | - | - | - | - | {expected['bleu']:.2f}" in table
    assert "(external): an outside system's translations" in table
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn", "attention": "none"}}
    verdict = compare(["transformer", "rnn"], [1, 2], cfg, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, root,
                      blocks=blocks)["verdict"]
    assert all("peer" not in (row["model"], row["other"]) for row in verdict)  # no contrast is about it


@pytest.mark.parametrize("text, error", [
    ("".join(line + "\n" for line in EXTERNAL[:4]), "has 4 lines for the 5 sentences"),
    ("".join(line + "\n" for line in [*EXTERNAL[:2], "", *EXTERNAL[3:]]), "line 3 is empty where the reference"),
    ("Eine Katze sitzt.\nGr\xfc\xdfe\n".encode("latin-1") + b"x\n" * 3, "is not UTF-8 text"),
])
def test_a_bad_outside_translation_is_refused_in_one_line(root, text, error):
    with pytest.raises(ValueError, match=error) as refused:
        run_compare(root, [1], with_external(root, text))
    assert "compare.external.peer.test_2016_flickr" in str(refused.value) and "\n" not in str(refused.value)
    assert not (root / "results" / "comparison.json").exists()


def table_row(root, name):
    return next(line for line in (root / "results" / "comparison.md").read_text().splitlines()
                if line.startswith(f"| {name} "))


def test_a_byte_order_mark_opening_an_outside_translation_is_no_part_of_it(root):
    """An editor's mark of UTF-8 before a copy of the references: BLEU 100 on every resample, not 99.78."""
    result = run_compare(root, [1], with_external(root, "\ufeff" + "".join(line + "\n" for line in REFERENCES)))
    peer = result["models"]["peer"][SPLIT]
    assert peer["bleu"]["mean"] == 100.0
    assert (peer["bootstrap"]["mean"], peer["bootstrap"]["ci"]) == (100.0, 0.0)
    assert table_row(root, "peer").split(" | ")[6:8] == ["100.00*", "[100.00, 100.00]"]


def test_the_interval_in_the_table_stays_within_bleus_range(root):
    """sacreBLEU centres its interval on the resamples' mean; bunched against 100, mean + ci passes it."""
    near_copy = [*REFERENCES[:4], "Menschen gehen auf einer belebten Straße im"]
    result = run_compare(root, [1], with_external(root, "".join(line + "\n" for line in near_copy)))
    test = result["models"]["peer"][SPLIT]["bootstrap"]
    assert test["mean"] + test["ci"] > 100
    assert table_row(root, "peer").split(" | ")[7] == f"[{test['mean'] - test['ci']:.2f}, 100.00]"


def test_a_missing_outside_translation_names_where_to_put_it(root):
    cfg = CFG.model_copy(update={"external": {"peer": {SPLIT: "systems/peer/missing.de"}}})
    with pytest.raises(FileNotFoundError, match="systems/peer/missing.de not found; put the system's translation"):
        run_compare(root, [1], cfg)


def test_the_published_convention_bleu_is_shown_when_every_run_has_it(tmp_path):
    for (name, seed), hypotheses in OUTPUTS.items():
        write_run(tmp_path, name, seed, hypotheses, lang="de")
    cfg = with_external(tmp_path, "".join(line + "\n" for line in EXTERNAL))
    result = compare(["transformer", "rnn"], [1], cfg, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, tmp_path,
                     lang="de")
    expected = {name: score(hypotheses, REFERENCES, "de")["bleu_lc_tok"]
                for name, hypotheses in (("rnn", OUTPUTS["rnn", 1]), ("peer", EXTERNAL))}
    assert {name: result["models"][name][SPLIT]["bleu_lc_tok"]["mean"] for name in expected} == expected
    assert result["signatures"]["bleu_lc_tok"] == [score(EXTERNAL, REFERENCES, "de")["bleu_lc_tok_signature"]]
    table = (tmp_path / "results" / "comparison.md").read_text()
    assert f"{SPLIT} BLEU lc tok |" in table and "BLEU lc tok: lowercased on Moses-tokenized text" in table
    (tmp_path / "results" / "comparison.json").unlink()
    assert "bleu_lc_tok" not in run_compare(tmp_path, [1], cfg)["signatures"]  # an outside system, no language given


def test_published_figures_stand_beside_our_bleu_lc_tok_with_the_difference(tmp_path):
    for (name, seed), hypotheses in OUTPUTS.items():
        write_run(tmp_path, name, seed, hypotheses, lang="de")
    figure = PublishedFigure(bleu=41.02, split=SPLIT, source="Wu et al. 2021")
    cfg = CFG.model_copy(update={"published": {"transformer": figure}})
    result = compare(["transformer", "rnn"], [1, 2], cfg, {SPLIT: {"src": SOURCES, "tgt": REFERENCES}}, tmp_path,
                     lang="de")
    ours = [score(OUTPUTS["transformer", seed], REFERENCES, "de")["bleu_lc_tok"] for seed in (1, 2)]
    row = result["published"]["transformer"]
    assert row == {"split": SPLIT, "published": 41.02, "source": "Wu et al. 2021",
                   "ours": result["models"]["transformer"][SPLIT]["bleu_lc_tok"],
                   "difference": round(round(statistics.mean(ours), 4) - 41.02, 2)}
    assert row["ours"]["per_seed"] == {"1": ours[0], "2": ours[1]}
    table = (tmp_path / "results" / "comparison.md").read_text()
    assert (f"| transformer | {SPLIT} | {statistics.mean(ours):.2f} ± {statistics.stdev(ours):.2f} | 41.02 | "
            f"{row['difference']:+.2f} | Wu et al. 2021 |") in table


@pytest.mark.parametrize("published, error", [
    ({"gpt": {"bleu": 41.0, "split": SPLIT, "source": "x"}},
     r"^compare\.published: 'gpt' is not valid; choose one of rnn, gru"),
    ({"transformer": {"bleu": 41.0, "split": "test_2018", "source": "x"}},
     r"^compare\.published\.transformer\.split: 'test_2018' is not valid; choose one of test_2016_flickr, "
     "test_2017_flickr$"),
    ({"transformer": {"bleu": 141.0, "split": SPLIT, "source": "x"}},
     r"^compare\.published\.transformer\.bleu: must be in \[0, 100\], got 141\.0$"),
])
def test_a_published_figure_must_name_a_model_and_a_test_set(published, error):
    raw = yaml.safe_load(open("params.yaml"))
    with pytest.raises(ConfigError, match=error):
        parse_params({**raw, "compare": {**raw["compare"], "published": published}})


def test_bleu_json_holds_each_models_bleu_for_dvc(root):
    result = run_compare(root, [1, 2])
    assert json.loads((root / "results/bleu.json").read_text()) == {
        name: round(statistics.mean(bleu(OUTPUTS[name, seed], REFERENCES) for seed in (1, 2)), 4)
        for name in ("transformer", "rnn")} == {name: result["models"][name][SPLIT]["bleu"]["mean"]
                                               for name in ("transformer", "rnn")}


def test_the_comparison_records_what_produced_every_run(root):
    result = run_compare(root, [1, 2])
    recorded = result["provenance"]
    assert recorded["train"] == {"transformer/seed1": stamp(601.0), "transformer/seed2": stamp(602.0),
                                 "rnn/seed1": stamp(601.0), "rnn/seed2": stamp(602.0)}
    assert recorded["evaluate"] == dict.fromkeys(["transformer/seed1", "transformer/seed2", "rnn/seed1", "rnn/seed2"],
                                                 stamp(30.0))
    assert set(recorded["compare"]) == {"git", "python", "packages", "device", "wall_seconds", "finished"}
    assert result["splits"] == [SPLIT]  # eval.json's provenance is not a test set
    lines = (root / "results/comparison.md").read_text().split("## Produced by\n\n")[1].splitlines()
    assert lines[3].startswith("- Wall time: train 0:40:06 over 4 runs, evaluate 0:02:00 over 4 runs, compare 0:00:")


def test_produced_by_names_every_distinct_commit_version_and_machine():
    from nmtbench.evaluation.rendering import provenance_lines

    gpu = {**DEVICE, "gpus": ["NVIDIA A100-SXM4-40GB"], "cores": 1, "torch_threads": 1, "memory_gib": None,
           "cpu_features": ["avx2", "avx512f"]}
    comparison = {"provenance": {"compare": stamp(1.4),
                                 "train": {"a/seed1": stamp(3600.0, dirty=True, device=gpu), "b/seed1": None},
                                 "evaluate": {"a/seed1": stamp(60.0, commit="fedcba9876543210", torch="2.12.0"),
                                              "b/seed1": stamp(59.6)}}}
    assert provenance_lines(comparison) == [
        "Code: commit 0123456789, with uncommitted changes / commit fedcba9876 / commit 0123456789.",
        "Software: Python 3.11.7, nmtbench 0.1.0, torch 2.13.0+cpu / 2.12.0, sacrebleu 2.6.0.",
        "Machine: AMD EPYC 7B13 (1 core, avx2 avx512f), NVIDIA A100-SXM4-40GB, 1 torch thread / "
        "AMD EPYC 7B13 (2 cores, 23.5 GiB), no GPU, 2 torch threads.",
        "Wall time: train 1:00:00, evaluate 0:02:00 over 2 runs, compare 0:00:01.",
        "1 train and evaluate results record no provenance (written before it was); rerun their stages to stamp them."]
    assert provenance_lines({}) == [
        "Not recorded: this comparison was written before provenance was; rerun `dvc repro compare`."]
    without_torch = {**DEVICE, "gpus": None, "torch_threads": None}  # the comparison's own stamp imports no torch
    comparison["provenance"]["compare"] = stamp(1.4, device=without_torch)
    assert provenance_lines(comparison)[2] == (
        "Machine: AMD EPYC 7B13 (1 core, avx2 avx512f), NVIDIA A100-SXM4-40GB, 1 torch thread / "
        "AMD EPYC 7B13 (2 cores, 23.5 GiB), no GPU, 2 torch threads / AMD EPYC 7B13 (2 cores, 23.5 GiB).")


def test_where_models_and_families_swap_places_is_in_the_json_and_the_markdown(root):
    assert run_compare(root, [1])["swaps"] is None  # no curves with FLOPs
    # rnn leads until 40 FLOPs (6 against 5), the transformer from 60 on (8 against 6)
    for name, rows in {"transformer": [(20, 5.0), (60, 8.0)], "rnn": [(20, 6.0), (40, 6.0)]}.items():
        lines = ["step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu",
                 *(f"{i},{i},{i},{i},{flops},2.0,2.0,7.39,{bleu}" for i, (flops, bleu) in enumerate(rows, 1))]
        (root / "metrics" / name / "seed1" / "learning_curve.csv").write_text("\n".join(lines) + "\n")
    blocks = {"transformer": {"family": "transformer"}, "rnn": {"family": "rnn"}}
    found = quality_against_compute({("transformer", 1): [(20, 5.0), (60, 8.0)], ("rnn", 1): [(20, 6.0), (40, 6.0)]},
                                    blocks)
    assert found["models"] == [{"pair": ["transformer", "rnn"], "leader": "transformer", "flops": 60,
                                "standing": {"transformer": 8.0, "rnn": 6.0}}]
    assert found["families"]["flops"] == 60 and found["families"]["leader"] == "transformer"
    result = run_compare(root, [1])  # without blocks: the models' swaps, no families
    assert result["swaps"]["families"] is None and result["swaps"]["models"][0]["flops"] == 60
    markdown = (root / "results" / "comparison.md").read_text()
    assert "## Where models swap places as compute grows" in markdown
    assert "| 60 | transformer | rnn | transformer 8.00, rnn 6.00 |" in markdown
