import json

import pytest

from nmtbench.evaluation.compare import compare

BLEU_SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
CHRF_SIG = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"


def scores(bleu, chrf, sentences=1000):
    return {"bleu": bleu, "chrf": chrf, "bleu_signature": BLEU_SIG, "chrf_signature": CHRF_SIG,
            "sentences": sentences, "decode_seconds": 12.5}


def write_model(metrics_dir, name, params, seconds, tokens_per_s, val_loss, evals, seed=42):
    run = metrics_dir / name / f"seed{seed}"
    run.mkdir(parents=True)
    train = {"params": params, "train_seconds": seconds, "train_tokens_per_s": tokens_per_s,
             "best_val_loss": val_loss, "best_val_ppl": 2.0, "steps": 1200, "epochs": 10}
    (run / "train.json").write_text(json.dumps(train))
    (run / "eval.json").write_text(json.dumps(evals))


@pytest.fixture
def metrics_dir(tmp_path):
    metrics = tmp_path / "metrics"
    write_model(metrics, "transformer", 9_512_448, 1199.6, 15321.4, 2.3456,
                {"test_2016_flickr": scores(35.12, 61.4), "test_2017_flickr": scores(28.0, 55.55)})
    write_model(metrics, "lstm_attention", 12_034_567, 3725.2, 8000.5, 2.5,
                {"test_2016_flickr": scores(30.5, 58.25), "test_2017_flickr": scores(24.75, 52.0)})
    return metrics


def test_comparison_json(metrics_dir, tmp_path):
    out = tmp_path / "results"
    result = compare(["lstm_attention", "transformer"], [42], metrics_dir, out)
    expected = {
        "lstm_attention": {"params": 12_034_567, "train_seconds": 3725.2, "train_tokens_per_s": 8000.5,
                           "best_val_loss": 2.5, "test_2016_flickr_bleu": 30.5, "test_2016_flickr_chrf": 58.25,
                           "test_2017_flickr_bleu": 24.75, "test_2017_flickr_chrf": 52.0},
        "transformer": {"params": 9_512_448, "train_seconds": 1199.6, "train_tokens_per_s": 15321.4,
                        "best_val_loss": 2.3456, "test_2016_flickr_bleu": 35.12, "test_2016_flickr_chrf": 61.4,
                        "test_2017_flickr_bleu": 28.0, "test_2017_flickr_chrf": 55.55},
    }
    assert result == expected
    assert json.loads((out / "comparison.json").read_text()) == expected
    assert list(json.loads((out / "comparison.json").read_text())) == ["lstm_attention", "transformer"]


def test_comparison_markdown(metrics_dir, tmp_path):
    out = tmp_path / "results"
    compare(["transformer", "lstm_attention"], [42], metrics_dir, out)
    assert (out / "comparison.md").read_text() == (
        "| Model | Parameters | Training time | Train tokens/s | Best val loss "
        "| test_2016_flickr BLEU | test_2016_flickr chrF | test_2017_flickr BLEU | test_2017_flickr chrF |\n"
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| transformer | 9,512,448 | 0:20:00 | 15,321 | 2.346 | 35.12 | 61.40 | 28.00 | 55.55 |\n"
        "| lstm_attention | 12,034,567 | 1:02:05 | 8,000 | 2.500 | 30.50 | 58.25 | 24.75 | 52.00 |\n"
        "\n"
        "sacreBLEU signatures:\n"
        "\n"
        f"- BLEU: `{BLEU_SIG}`\n"
        f"- chrF: `{CHRF_SIG}`\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "comparison.md"]


def test_missing_train_metrics_names_the_stage(metrics_dir, tmp_path):
    (metrics_dir / "transformer" / "seed42" / "train.json").unlink()
    with pytest.raises(FileNotFoundError) as error:
        compare(["transformer"], [42], metrics_dir, tmp_path / "results")
    expected = f"{metrics_dir}/transformer/seed42/train.json: not found; run `dvc repro train@transformer-42` first"
    assert str(error.value) == expected
    assert not (tmp_path / "results").exists()


def test_missing_eval_metrics_names_the_stage(metrics_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"gru/seed42/train.json: not found; run `dvc repro train@gru-42` first"):
        compare(["transformer", "gru"], [42], metrics_dir, tmp_path / "results")
    with pytest.raises(FileNotFoundError, match=r"transformer/seed7/train.json: not found; run `dvc repro train@transformer-7`"):
        compare(["transformer"], [42, 7], metrics_dir, tmp_path / "results")
    (metrics_dir / "lstm_attention" / "seed42" / "eval.json").unlink()
    with pytest.raises(FileNotFoundError,
                       match=r"lstm_attention/seed42/eval.json: not found; run `dvc repro evaluate@lstm_attention-42` first"):
        compare(["lstm_attention"], [42], metrics_dir, tmp_path / "results")


def test_models_scored_on_different_splits(metrics_dir, tmp_path):
    evals = {"test_2016_flickr": scores(30.5, 58.25)}
    (metrics_dir / "lstm_attention" / "seed42" / "eval.json").write_text(json.dumps(evals))
    with pytest.raises(ValueError, match=r"re-run `dvc repro evaluate@lstm_attention-42`"):
        compare(["transformer", "lstm_attention"], [42], metrics_dir, tmp_path / "results")
