"""The report page from tiny hand-made stage outputs; rendered in headless Chromium where one is installed."""
import base64
import json
import re
import shutil
import subprocess

import pytest

from nmtbench.evaluation.report import report
from nmtbench.figures import run_styles

SOURCE, TARGET = ["▁A", "▁cat", "."], ["▁Eine", "▁Katze", ".", "</s>"]


def attention(weights):
    return {"split": "test_2016_flickr", "sentence": 0, "source_pieces": SOURCE, "target_pieces": TARGET,
            "weights": weights}


def write_run(folder, params, bleu, speed, weights="absent", curve=True, flops=True):
    folder.mkdir(parents=True)
    (folder / "train.json").write_text(json.dumps({"params": params, "train_seconds": 420.0}))
    (folder / "eval.json").write_text(json.dumps({"test_2016_flickr": {"bleu": bleu, "sentences_per_s": speed}}))
    if weights != "absent":
        (folder / "attention.json").write_text(json.dumps(attention(weights)))
    if curve:
        rows = [("10,0,30.5,1000", params * 6e3, f"4.1,{bleu / 3}"), ("20,1,61.0,2000", params * 1.2e4, "3.2,"),
                ("30,2,91.5,3000", params * 1.8e4, f"2.9,{bleu / 2}")]
        (folder / "learning_curve.csv").write_text(
            "step,epoch,wall_seconds,target_tokens," + ("train_flops," if flops else "") + "val_loss,val_bleu\n"
            + "".join(f"{start},{f'{spent:g},' if flops else ''}{end}\n" for start, spent, end in rows))


BEAM_SWEEP = {"model": "transformer", "seed": 1, "split": "test_2016_flickr", "sentences": 20,
              "length_penalty": "gnmt", "bleu_signature": "nrefs:1|case:mixed|tok:13a",
              "rows": [{"beam": beam, "alpha": 1.0, "bleu": 30.0 + beam, "chrf": 55.0, "seconds": 2.0,
                        "sentences_per_s": 40.0 / beam, "target_tokens_per_s": 500.0 / beam} for beam in (1, 2)]}
BEAM_SWEEP["rows"][1]["bleu_breakdown"] = "62.0/40.0/28.0/20.0 (BP = 0.971 ratio = 0.971 hyp_len = 340 ref_len = 350)"


@pytest.fixture
def outputs(tmp_path):
    """metrics/ of three models (one with two seeds) and the compare stage's results/comparison.json."""
    metrics, results = tmp_path / "metrics", tmp_path / "results"
    diagonal = [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]
    write_run(metrics / "lstm", 1_034, 30.5, 40.0, weights=None)
    write_run(metrics / "transformer" / "seed1", 9_512, 35.0, 55.0, weights=diagonal)
    write_run(metrics / "transformer" / "seed2", 9_512, 35.2, 54.0, weights=diagonal)
    write_run(metrics / "cnn", 5_000, 33.0, 90.0, weights=diagonal, flops=False)  # trained before FLOPs were recorded
    results.mkdir()
    def buckets(*bleu):  # the compare stage's per-bucket figures; None: an empty bucket
        return {"length_buckets": {label: {"sentences": 0 if b is None else 5, "bleu": b and {"mean": b, "sd": None}}
                                   for label, b in zip(("1-10", "11-20", "21+"), bleu)}}
    def one(value):  # a spread over one seed
        return {"mean": value, "sd": None}
    def row(params, bleu, ci, significant, speed, *bucket_bleu):  # the compare stage's row of one model
        def split(offset):
            return {"bleu": one(bleu - offset), "bleu_lc": one(bleu + 1 - offset), "chrf": one(60.0),
                    "ter": one(50.0), "sentences_per_s": one(speed),
                    "bootstrap": {"mean": bleu - offset, "ci": ci, "significant": significant},
                    **buckets(*bucket_bleu)}
        return {"params": params, "train_seconds": one(425.0), "train_tokens_per_s": one(1234.5),
                "best_val_loss": one(2.5), "best_val_bleu": None,
                "test_2016_flickr": split(0), "test_2017_flickr": split(3)}
    comparison = {
        "baseline": "transformer",
        "seeds": [1],
        "splits": ["test_2016_flickr", "test_2017_flickr"],
        "signatures": {"bleu": ["nrefs:1|case:mixed|tok:13a"], "bleu_lc": [], "chrf": [], "ter": [],
                       "paired_bootstrap": ["nrefs:1|bs:1000"]},
        "length_buckets": ["1-10", "11-20", "21+"],
        "models": {"lstm": row(1_034, 30.5, 1.25, True, 40.0, 35.0, 28.0, 12.5),
                   "transformer": row(9_512, 35.1, 1.5, None, 54.5, 36.0, 35.0, None)},
        "examples": {"test_2016_flickr": [{"index": 3, "source": "A <cat>.", "reference": "Eine Katze.",
                                           "outputs": {"lstm": "Ein Hund.", "transformer": "Eine Katze."}}]},
    }
    (results / "comparison.json").write_text(json.dumps(comparison))
    (results / "beam_sweep.json").write_text(json.dumps(BEAM_SWEEP))
    return metrics, results


def embedded_pngs(page_html):
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([^"]+)"', page_html)]


def test_report_embeds_every_plot(outputs):
    metrics, results = outputs
    page = report(["lstm", "transformer", "cnn"], metrics, results)
    assert page.figures == ["frontier", "length-buckets", "beam-sweep", "learning-curves", "flops-curves", "attention"]
    assert page.missing == [
        "claims: `results/claims.md` is not written yet; `dvc repro analyze` writes it",
        "validation BLEU against training FLOPs of cnn: their `learning_curve.csv` has no `train_flops` column "
        "(trained before it was recorded); `dvc repro train` again writes it"]
    text = (results / "report.html").read_text()
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in embedded_pngs(text))
    assert len(embedded_pngs(text)) == 6
    assert not re.search(r'(src|href)="(?!data:|claims\.md)', text)  # self-contained: no external assets
    assert ('<tr><td>lstm</td><td class="number">1,034</td><td class="number">0:07:05</td>'  # the comparison table
            '<td class="number">1,234</td><td class="number">2.500</td><td class="number">-</td>'
            '<td class="number">30.50*</td><td class="number">[29.25, 31.75]</td><td class="number">31.50</td>' in text)
    assert "<li>BLEU: <code>nrefs:1|case:mixed|tok:13a</code></li>" in text
    assert ("<tr><th>Model</th><th>1-10 (5)</th><th>11-20 (5)</th><th>21+ (0)</th></tr>"
            '<tr><td>lstm</td><td class="number">35.00</td><td class="number">28.00</td>'
            '<td class="number">12.50</td></tr>' in text)
    assert "<th>test_2016_flickr</th><th>source</th><th>reference</th><th>lstm</th><th>transformer</th>" in text
    assert "<td>3</td><td>A &lt;cat&gt;.</td><td>Eine Katze.</td><td>Ein Hund.</td><td>Eine Katze.</td>" in text
    assert "Models without attention (nothing to draw): lstm." in text
    assert "one panel per model (its first run; greedy decoding of sentence 0 of test_2016_flickr)" in text
    assert "<h3>test_2017_flickr</h3>" in text  # every test set
    # the sweep's rows: BLEU's breakdown where the sweep recorded it, a dash in a row written before it was
    assert ('<tr><td class="number">1</td><td class="number">1</td><td class="number">31.00</td><td>-</td>' in text)
    assert ('<tr><td class="number">2</td><td class="number">1</td><td class="number">32.00</td>'
            f'<td>{BEAM_SWEEP["rows"][1]["bleu_breakdown"]}</td>'
            '<td class="number">55.00</td><td class="number">20.0</td><td class="number">250</td></tr>' in text)
    assert "transformer (seed 1) on the first 20 sentences of test_2016_flickr, gnmt length penalty" in text


def test_report_shows_the_answer_first(outputs):
    """The headline table, then the quality/cost plot, then the details (the full table and the other plots)."""
    metrics, results = outputs
    report(["lstm", "transformer", "cnn"], metrics, results)
    text = (results / "report.html").read_text()
    headline = text.index("<th>Model</th><th>Parameters</th><th>Training time</th><th>test_2016_flickr BLEU</th>"
                          "<th>95% CI</th><th>BLEU lc</th><th>test_2017_flickr BLEU</th><th>95% CI</th>"
                          "<th>BLEU lc</th><th>Decoding sentences/s</th>")
    assert ('<tr><td>lstm</td><td class="number">1,034</td><td class="number">0:07:05</td>'
            '<td class="number">30.50*</td><td class="number">[29.25, 31.75]</td><td class="number">31.50</td>'
            '<td class="number">27.50*</td><td class="number">[26.25, 28.75]</td><td class="number">28.50</td>'
            '<td class="number">40.0</td></tr>' in text)
    assert '<tr><td>transformer (baseline)</td><td class="number">9,512</td>' in text
    positions = [headline, text.index('id="frontier"'), text.index("<h2>Comparison</h2>"),
                 text.index('id="length-buckets"'), text.index('id="beam-sweep"'), text.index('id="learning-curves"'),
                 text.index('id="flops-curves"'), text.index('id="attention"'),
                 text.index("<th>test_2016_flickr</th><th>source</th>")]
    assert positions == sorted(positions)
    assert "BLEU on test_2016_flickr against parameter count, training time and decoding speed" in text
    # a comparison.json from before the training to the best checkpoint was carried: its table is all dashes
    training = text.index("<h3>Training to the best checkpoint</h3>")
    assert positions[2] < training < positions[3]
    assert '<tr><td>lstm</td><td>-</td>' + '<td class="number">-</td>' * 6 + '</tr>' in text


def test_report_names_what_is_missing_and_who_writes_it(outputs):
    metrics, results = outputs
    (results / "comparison.json").write_text("{}")
    (results / "claims.md").write_text("# claims\n")
    for path in metrics.rglob("learning_curve.csv"):
        path.unlink()
    (metrics / "lstm" / "learning_curve.csv").write_text(  # validation BLEU off
        "step,epoch,wall_seconds,target_tokens,val_loss,val_bleu\n10,0,30.5,1000,4.1,\n")
    (metrics / "cnn" / "train.json").unlink()
    (metrics / "transformer" / "seed1" / "attention.json").unlink()
    (results / "beam_sweep.json").unlink()
    page = report(["lstm", "transformer", "cnn", "gru"], metrics, results)
    assert page.figures == ["frontier", "attention"]
    assert page.missing == [
        f"model gru: no `{metrics}/gru/**/eval.json`; the evaluate stage writes it",
        "headline table: `results/comparison.json` lacks sizes, training times, BLEU intervals or BLEU lc; "
        "the compare stage writes them",
        f"size of cnn: no `{metrics}/cnn/train.json`; the train stage writes it",
        "comparison table: `results/comparison.json` has no 'splits'; the compare stage writes it",
        "BLEU by source-length bucket: `results/comparison.json` has no `length_buckets`; the compare stage writes it",
        f"beam sweep: no `{results}/beam_sweep.json`; `dvc repro beam_sweep` writes it",
        "learning curves of lstm, transformer/seed1, transformer/seed2, cnn: no `learning_curve.csv` with columns "
        "wall_seconds, target_tokens, val_bleu and a validation BLEU beside their train.json; the train stage "
        "writes it when `train.val_bleu_sentences` is above 0",
        f"attention of transformer: no `{metrics}/transformer/seed1/attention.json`; the evaluate stage writes it",
        "example translations: `results/comparison.json` has no `examples`; the compare stage writes it",
    ]
    text = (results / "report.html").read_text()
    assert '<a href="claims.md">claims.md</a>' in text
    assert text.count('class="missing">Missing: ') == len(page.missing)


def test_report_without_a_comparison_names_the_stage(outputs, tmp_path):
    metrics, results = outputs
    (results / "comparison.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"comparison.json: not found; run `dvc repro compare` first"):
        report(["lstm"], metrics, results)
    assert not (results / "report.html").exists()


CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
# Written into a copy of the page only: after load, every image records whether it decoded and its size.
PROBE = ("<script>window.addEventListener('load', () => document.querySelectorAll('img').forEach(img => "
         "img.setAttribute('data-rendered', img.complete && img.naturalWidth > 0 ? "
         "img.naturalWidth + 'x' + img.naturalHeight : 'broken')));</script>")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium) to render the report")
def test_every_plot_renders_in_headless_chromium(outputs, tmp_path):
    metrics, results = outputs
    page = report(["lstm", "transformer", "cnn"], metrics, results)
    probed = tmp_path / "probed.html"
    probed.write_text((results / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rendered = dict(re.findall(r'<img id="([^"]+)"[^>]*data-rendered="([^"]+)"', dom))
    assert list(rendered) == page.figures
    for anchor, size in rendered.items():
        width, height = map(int, size.split("x"))  # "broken" fails here, naming nothing else
        assert width > 100 and height > 100, anchor


def test_every_run_of_a_large_grid_has_its_own_style():
    labels = [f"model{i}" for i in range(24)]  # more runs than matplotlib's ten colours
    styles = run_styles(labels)
    assert len({tuple(style.values()) for style in styles.values()}) == 24
    assert styles["model10"]["color"] == styles["model0"]["color"]  # the colour repeats, the line does not
    assert styles["model10"]["linestyle"] != styles["model0"]["linestyle"]
    assert run_styles(labels[:3]) == {label: styles[label] for label in labels[:3]}


def test_report_gives_the_verdict_first_and_the_tuning(outputs):
    metrics, results = outputs
    comparison = json.loads((results / "comparison.json").read_text())
    comparison["verdict"] = [{"question": "best attention RNN vs best Transformer", "model": "lstm",
                              "other": "transformer", "difference": -4.6, "ci": [-6.1, -3.2], "significant": True,
                              "text": "lstm is worse than transformer: -4.60 BLEU, 95% CI [-6.10, -3.20]"}]
    comparison["by_length"] = {"question": "best attention RNN vs best Transformer", "model": "lstm",
                               "other": "transformer", "buckets": [
                                   {"bucket": "21+", "sentences": {"test_2016_flickr": 37, "test_2017_flickr": 28},
                                    "difference": -1.5, "ci": [-4.25, 1.0], "significant": False}]}
    comparison["tuning"] = {
        "models": {"lstm": {"family": "rnn", "trials": 8, "default_val_bleu": 20.5, "tuned_val_bleu": 22.25,
                            "params": {"train": {"lr": 0.0021}, "model": {"dropout": 0.3}}}},
        "ranking": {"default": {"models": ["lstm"], "families": ["rnn"]},
                    "tuned": {"models": ["lstm"], "families": ["rnn"]}, "models_changed": False,
                    "families_changed": False}}
    (results / "comparison.json").write_text(json.dumps(comparison))
    report(["lstm", "transformer", "cnn"], metrics, results)
    text = (results / "report.html").read_text()
    verdict = text.index("<h2>Verdict</h2>\n<ul><li>best attention RNN vs best Transformer: lstm is worse than "
                         "transformer: -4.60 BLEU, 95% CI [-6.10, -3.20].</li><li>Differences are means over 1 seed "
                         "and the test sets test_2016_flickr, test_2017_flickr;")
    assert text.index('id="frontier"') < verdict < text.index("<h2>Comparison</h2>")
    by_length = text.index("<h3>The main contrast by source length</h3>")
    assert verdict < by_length < text.index("<h2>Comparison</h2>")
    assert ('<tr><td>21+</td><td class="number">37, 28</td><td class="number">-1.50</td>'
            '<td class="number">[-4.25, 1.00]</td><td>no</td></tr>') in text
    assert ('<tr><td>lstm</td><td>rnn</td><td class="number">8</td><td class="number">20.5</td>'
            '<td class="number">22.25</td><td>lr 0.0021, dropout 0.3</td></tr>' in text)
    assert "<li>Families ranked by val BLEU untuned: rnn; tuned: rnn (unchanged).</li>" in text


def test_report_says_what_produced_the_figures(outputs):
    metrics, results = outputs
    report(["lstm", "transformer"], metrics, results)
    assert ("<h2>Produced by</h2>\n<ul><li>Not recorded: this comparison was written before provenance was; rerun "
            "<code>dvc repro compare</code>.</li></ul>") in (results / "report.html").read_text()
    comparison = json.loads((results / "comparison.json").read_text())
    device = {"cpu": "AMD EPYC 7B13", "cores": 2, "memory_gib": 24.0, "gpus": [], "torch_threads": 2}
    stamp = {"git": {"commit": "d7d5579abcdef", "dirty": False}, "python": "3.11.7", "packages": {"torch": "2.13.0"},
             "device": device, "wall_seconds": 61.0}
    comparison["provenance"] = {"compare": stamp, "train": {"lstm": stamp, "transformer": stamp},
                                "evaluate": {"lstm": stamp, "transformer": stamp}}
    (results / "comparison.json").write_text(json.dumps(comparison))
    report(["lstm", "transformer"], metrics, results)
    page = (results / "report.html").read_text()
    assert ("<h2>Produced by</h2>\n<ul><li>Code: commit d7d5579abc.</li><li>Software: Python 3.11.7, torch 2.13.0.</li>"
            "<li>Machine: AMD EPYC 7B13 (2 cores, 24 GiB), no GPU, 2 torch threads.</li><li>Wall time: train 0:02:02 "
            "over 2 runs, evaluate 0:02:02 over 2 runs, compare 0:01:01.</li></ul>") in page
