"""nmtbench beside: two comparisons of one grid side by side, on hand-made comparison.json files."""
import json

import pytest

from nmtbench.cli import main
from nmtbench.config import ConfigError
from nmtbench.evaluation.side_by_side import markdown


def scored(**bleu):
    return {name: {split: {"bleu": {"mean": value}} for split, value in by_split.items()}
            for name, by_split in bleu.items()}


def contrast(question, model, other, difference, ci):
    return {"question": question, "model": model, "other": other, "side": None, "difference": difference, "ci": ci}


DOMHAN = "Domhan (ACL 2018), How Much Attention Do You Need?: self-attention matters more in the encoder"
# margin 0: one seed's interval alone decides here (the rule itself: test_an_older_comparison_is_read_with_the_margin)
EQUAL = {"splits": ["t16"], "seeds": [42], "rerun_margin": 0.0,
         "models": scored(a={"t16": 30.0}, b={"t16": 28.0}, c={"t16": 20.0}),
         "verdict": [contrast("a vs b", "a", "b", 2.0, [1.0, 3.0]), contrast("c vs a", "c", "a", -10.0, [-11.0, -9.0]),
                     contrast("best", "a", "c", 10.0, [9.0, 11.0])],
         "findings": [{"finding": DOMHAN, "verdict": "does not hold here"}]}
CONVERGED = {"splits": ["t17", "t16"], "seeds": [42], "rerun_margin": 0.0,
             "models": scored(a={"t16": 35.0}, b={"t16": 37.0}, c={"t16": 36.0}, d={"t16": 10.0}),
             "verdict": [contrast("a vs b", "a", "b", -2.0, [-3.0, -1.0]),
                         contrast("c vs a", "c", "a", 1.0, [-0.5, 2.5]),
                         contrast("best", "b", "c", 1.0, [0.5, 1.5]),
                         contrast("d vs a", "d", "a", -25.0, [-26.0, -24.0])],
             "findings": [{"finding": DOMHAN, "verdict": "does not hold here"}]}


def by_length(model, other, *buckets):
    return {"question": "best", "model": model, "other": other,
            "buckets": [{"bucket": label, "sentences": {"t16": 10}, "difference": difference, "ci": ci}
                        for label, difference, ci in buckets]}


EQUAL["by_length"] = by_length("a", "c", ("1-8", 10.0, [9.0, 11.0]), ("9+", 12.0, [10.0, 14.0]))
CONVERGED["by_length"] = by_length("b", "c", ("1-8", -1.0, [-2.0, -0.5]), ("9+", 0.5, [-1.0, 2.0]))


@pytest.fixture
def specs(tmp_path):
    for name, comparison in (("equal", EQUAL), ("converged", CONVERGED)):
        (tmp_path / f"{name}.json").write_text(json.dumps(comparison))
    return [f"equal budget={tmp_path / 'equal.json'}", f"converged={tmp_path / 'converged.json'}"]


def test_an_older_comparison_is_read_with_the_margin_and_seeds_that_disagree_decide_nothing(tmp_path):
    """A comparison without its rerun_margin (written before it) is decided by the default margin, 1.6 BLEU: a one-seed
    +2.00 [1.00, 3.00] is not decided; three seeds of one sign are, one of another sign is not."""
    older = {key: value for key, value in EQUAL.items() if key != "rerun_margin"}
    seeded = {**EQUAL, "seeds": [1, 2, 3], "verdict": [
        {**contrast("a vs b", "a", "b", 2.0, [1.0, 3.0]), "per_seed": [1.5, 2.5, 2.0]},
        {**contrast("c vs a", "c", "a", -10.0, [-11.0, -9.0]), "per_seed": [-20.0, -11.0, 1.0]}]}
    for name, comparison in (("older", older), ("seeded", seeded)):
        (tmp_path / f"{name}.json").write_text(json.dumps(comparison))
    rows = section(markdown([f"older={tmp_path / 'older.json'}", f"seeded={tmp_path / 'seeded.json'}"]),
                   "The verdict under each")
    assert rows[2:4] == [
        "| a vs b | a vs b: not decided, +2.00 [1.00, 3.00] | a vs b: better, +2.00 [1.00, 3.00] | becomes decided |",
        "| c vs a | c vs a: worse, -10.00 [-11.00, -9.00] | c vs a: not decided, -10.00 [-11.00, -9.00] | "
        "no longer decided |"]


def section(page: str, title: str) -> list[str]:
    return page.split(f"## {title}\n\n")[1].split("\n\n")[0].splitlines()


def test_scores_places_and_changes_of_every_model_of_either(specs):
    page = markdown(specs)
    assert page.startswith("# equal budget beside converged\n\nCased BLEU on t16,")  # the first split both scored
    assert page.split("\n\n")[2].splitlines() == [
        "| model | BLEU, equal budget | place | BLEU, converged | place | change |",
        "|:---|---:|---:|---:|---:|---:|",
        "| a | 30.00 | 1 | 35.00 | 3 | +5.00 |",
        "| b | 28.00 | 2 | 37.00 | 1 | +9.00 |",
        "| c | 20.00 | 3 | 36.00 | 2 | +16.00 |",
        "| d | - | - | 10.00 | 4 | - |"]


def test_each_question_says_how_its_answer_moved(specs):
    rows = section(markdown(specs), "The verdict under each")[2:]
    assert rows == [
        "| a vs b | a vs b: better, +2.00 [1.00, 3.00] | a vs b: worse, -2.00 [-3.00, -1.00] | reversed |",
        "| c vs a | c vs a: worse, -10.00 [-11.00, -9.00] | c vs a: not decided, +1.00 [-0.50, 2.50] "
        "| no longer decided |",
        "| best | a vs c: better, +10.00 [9.00, 11.00] | b vs c: better, +1.00 [0.50, 1.50] | same (other models) |",
        "| d vs a | - | d vs a: worse, -25.00 [-26.00, -24.00] | only under converged |"]
    assert section(markdown(specs), "The published findings under each")[2:] == [
        "| Domhan (ACL 2018), How Much Attention Do You Need? | does not hold here | does not hold here | same |"]


def test_a_question_asked_of_several_pairs_keeps_a_row_for_each(tmp_path):
    side = "decoder: self-attention vs recurrence, the encoder fixed (recurrence)"
    first = {**EQUAL, "verdict": [contrast(side, "h", "a", 2.5, [1.5, 3.5]), contrast(side, "h", "b", 2.0, [1.0, 3.0])]}
    second = {**EQUAL, "verdict": [contrast(side, "h", "b", -0.5, [-1.5, 0.5])]}
    for name, comparison in (("first", first), ("second", second)):
        (tmp_path / f"{name}.json").write_text(json.dumps(comparison))
    rows = section(markdown([f"one={tmp_path / 'first.json'}", f"two={tmp_path / 'second.json'}"]),
                   "The verdict under each")[2:]
    assert rows == [
        f"| {side}: h vs a | h vs a: better, +2.50 [1.50, 3.50] | - | only under one |",
        f"| {side}: h vs b | h vs b: better, +2.00 [1.00, 3.00] "
        "| h vs b: not decided, -0.50 [-1.50, 0.50] | no longer decided |"]


def test_the_main_contrast_by_source_length_says_how_each_bucket_moved(specs, tmp_path):
    assert section(markdown(specs), "The main contrast by source length under each") == [
        "| source words | equal budget | converged | change |", "|:---|:---|:---|:---|",
        "| 1-8 | a vs c: better, +10.00 [9.00, 11.00] | b vs c: worse, -1.00 [-2.00, -0.50] "
        "| reversed (other models) |",
        "| 9+ | a vs c: better, +12.00 [10.00, 14.00] | b vs c: not decided, +0.50 [-1.00, 2.00] "
        "| no longer decided (other models) |"]
    (tmp_path / "older.json").write_text(json.dumps({**EQUAL, "by_length": None}))  # written before by_length was
    older = f"older={tmp_path / 'older.json'}"
    assert "by source length" not in markdown([older, older])


def test_the_pairs_the_second_setting_reverses_largest_turnaround_first(specs):
    assert section(markdown(specs), "Pairs whose order converged reverses") == [
        "| ahead under equal budget | behind | gap, equal budget | gap, converged |",
        "|:---|:---|---:|---:|",
        "| a | c | +10.00 | -1.00 |",
        "| a | b | +2.00 | -2.00 |"]  # b and c keep their order; d is in one setting only


def test_a_comparison_beside_itself_changes_nothing(specs):
    page = markdown([specs[0], specs[0].replace("equal budget=", "again=")])
    assert all(row.endswith("| same |") for row in section(page, "The verdict under each")[2:])
    assert section(page, "Pairs whose order again reverses") == ["None: both settings order every pair alike."]


def test_the_command_prints_and_writes_the_page(specs, tmp_path, capsys):
    assert main(["beside", *specs, "--out", str(tmp_path / "page/beside.md")]) == 0
    assert capsys.readouterr().out == (tmp_path / "page/beside.md").read_text() == markdown(specs)


@pytest.mark.parametrize(("spec", "message"), [
    ("converged.json", "'converged.json': give each comparison as LABEL=PATH"),
    ("x={tmp}/missing.json", "{tmp}/missing.json: no such file; run the compare stage there first"),
    ("x={tmp}/corrupt.json", "{tmp}/corrupt.json: not a comparison.json (Expecting value, line 1); rerun"),
    ("x={tmp}/other.json", "{tmp}/other.json: not a comparison.json (no splits and models)"),
    # #69: a file in another encoding, and a row without its BLEU, named with the file
    ("x={tmp}/latin.json", "{tmp}/latin.json: not a comparison.json (not UTF-8 text: invalid start byte at byte 1"),
    ("x={tmp}/unscored.json", "{tmp}/unscored.json: not a comparison.json the compare stage wrote (gru on t16 without "
                              "a BLEU mean); rerun"),
])
def test_bad_input_is_refused_in_one_line(tmp_path, spec, message):
    (tmp_path / "corrupt.json").write_text("oops")
    (tmp_path / "latin.json").write_bytes(b'"\xff"')
    (tmp_path / "unscored.json").write_text(json.dumps({"splits": ["t16"], "models": {"gru": {"t16": {"chrf": 50}}}}))
    (tmp_path / "other.json").write_text('{"models": {}}')
    with pytest.raises(ConfigError) as refused:
        markdown([spec.format(tmp=tmp_path), spec.format(tmp=tmp_path)])
    assert str(refused.value).startswith(message.format(tmp=tmp_path))


def test_comparisons_of_different_test_sets_under_one_name_are_refused(tmp_path):
    """#69: a smoke workspace's 40 sentences were set beside the 1,000 of the converged grid, matched by name."""
    for name, sentences, digest in (("one", 1000, "a" * 64), ("two", 40, "b" * 64), ("same", 1000, "a" * 64)):
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "splits": ["t16"], "models": {}, "test_sets": {"t16": {"sentences": sentences,
                                                                   "references_sha256": digest}}}))
    with pytest.raises(ConfigError, match=r"^the two comparisons scored different test sets named t16 \(1,000 "
                                          r"sentences, references aaaaaaaaaaaa against 40 sentences, references "
                                          r"bbbbbbbbbbbb\); set side by side comparisons of the same test sets$"):
        markdown([f"one={tmp_path / 'one.json'}", f"two={tmp_path / 'two.json'}"])
    assert markdown([f"one={tmp_path / 'one.json'}", f"same={tmp_path / 'same.json'}"]).startswith("# one beside same")


def test_comparisons_without_a_common_test_split_are_refused(tmp_path):
    for name, splits in (("one", ["t16"]), ("two", ["t17"])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"splits": splits, "models": {}}))
    with pytest.raises(ConfigError, match=r"^the two comparisons share no test split \(t16 against t17\)"):
        markdown([f"one={tmp_path / 'one.json'}", f"two={tmp_path / 'two.json'}"])


REFERENCES = [f"a dog number {i} runs across the green field" for i in range(30)]
JUNK = ["zz"] * 30


@pytest.fixture
def translated(tmp_path):
    """Each setting's translations: under equal a is perfect, c junk and b a's twin; under converged c is perfect,
    a junk and b a's twin. So a/c differ under both, a/b under neither."""
    folders = []
    for setting, lines in (("equal", {"a": REFERENCES, "b": REFERENCES, "c": JUNK}),
                           ("converged", {"a": JUNK, "b": JUNK, "c": REFERENCES})):
        for model, text in lines.items():
            path = tmp_path / setting / model / "seed42" / "t16.txt"
            path.parent.mkdir(parents=True)
            path.write_text("\n".join(text) + "\n")
        folders.append(tmp_path / setting)
    return folders


def test_each_reversal_is_tested_in_each_setting(specs, translated):
    tested = {"folders": translated, "references": lambda split: REFERENCES, "resamples": 50, "seed": 12345}
    page = markdown(specs, tested)
    assert section(page, "Pairs whose order converged reverses")[2:] == [
        "| a | c | +10.00* | -1.00* |",  # the gaps are the comparisons'; the marks the translations' test
        "| a | b | +2.00 | -2.00 |"]
    assert ("*: the two differ in that setting (paired bootstrap over the sentences of t16 and the seeds, 50 "
            "resamples, 95% interval excluding 0). 1 of 2 reversals are significant under both settings;") in page
    assert "*: the two differ" not in markdown(specs)  # untested without translations


def test_the_command_tests_the_reversals_against_the_prepared_references(specs, translated, tmp_path, capsys):
    from datasets import Dataset, DatasetDict

    DatasetDict({"t16": Dataset.from_dict({"src": REFERENCES, "tgt": REFERENCES})}).save_to_disk(
        str(tmp_path / "prepared"))
    assert main(["beside", *specs, "--translations", *map(str, translated), "--references",
                 str(tmp_path / "prepared"), "--resamples", "50"]) == 0
    assert "| a | c | +10.00* | -1.00* |" in capsys.readouterr().out


@pytest.mark.parametrize(("damage", "message"), [
    (lambda path: path.unlink(), "{path}: no such translation; point --translations at the folder"),
    (lambda path: path.write_text("one line\n"), "{path}: 1 lines for the 30 references of t16; these are not"),
])
def test_missing_or_foreign_translations_are_refused_in_one_line(specs, translated, damage, message):
    path = translated[1] / "c" / "seed42" / "t16.txt"
    damage(path)
    tested = {"folders": translated, "references": lambda split: REFERENCES, "resamples": 10, "seed": 1}
    with pytest.raises(ConfigError) as refused:
        markdown(specs, tested)
    assert str(refused.value).startswith(message.format(path=path))


def test_a_comparison_without_its_seeds_cannot_have_its_pairs_tested(tmp_path, translated):
    for name, comparison in (("equal", EQUAL), ("converged", {**CONVERGED, "seeds": []})):
        (tmp_path / f"{name}.json").write_text(json.dumps(comparison))
    tested = {"folders": translated, "references": lambda split: REFERENCES, "resamples": 10, "seed": 1}
    with pytest.raises(ConfigError, match="^a comparison.json without its seeds: rerun the compare stage"):
        markdown([f"equal={tmp_path / 'equal.json'}", f"converged={tmp_path / 'converged.json'}"], tested)
