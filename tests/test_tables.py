"""The one table renderer behind every results table: the same table as Markdown and as HTML."""
import pytest

from nmtbench.tables import Table, dash

TABLE = Table(["Model", "BLEU", "note"], [["rnn", "30.50*", "a|b"], ["<lstm> & co", "1,234", "**bold** `x`"]], "lr-")


def test_markdown_is_a_pipe_table_with_one_rule_per_alignment():
    assert TABLE.markdown() == ("| Model | BLEU | note |\n"
                                "|:---|---:|---|\n"
                                "| rnn | 30.50* | a\\|b |\n"
                                "| <lstm> & co | 1,234 | **bold** `x` |")


def test_html_escapes_every_cell_and_marks_right_aligned_columns_as_numbers():
    assert TABLE.html() == ("<table><tr><th>Model</th><th>BLEU</th><th>note</th></tr>"
                            '<tr><td>rnn</td><td class="number">30.50*</td><td>a|b</td></tr>'
                            '<tr><td>&lt;lstm&gt; &amp; co</td><td class="number">1,234</td>'
                            "<td>**bold** `x`</td></tr></table>")
    quoted = Table(['"q"'], [["it's"]], "l").html()  # quotes as well
    assert quoted == "<table><tr><th>&quot;q&quot;</th></tr><tr><td>it&#x27;s</td></tr></table>"


def test_a_table_without_rows_is_its_header():
    assert Table(["a", "b"], [], "rr").markdown() == "| a | b |\n|---:|---:|"
    assert Table(["a", "b"], [], "rr").html() == "<table><tr><th>a</th><th>b</th></tr></table>"


@pytest.mark.parametrize("header, rows, align", [(["a", "b"], [["1"]], "lr"), (["a", "b"], [["1", "2"]], "l"),
                                                 (["a"], [["1"]], "c")])
def test_a_ragged_table_or_an_unknown_alignment_is_refused(header, rows, align):
    with pytest.raises(ValueError, match=r"needs one alignment \(l, r, -\) and one cell per column"):
        Table(header, rows, align)


def test_text_pads_every_column_so_it_lines_up_and_stays_markdown():
    assert TABLE.text() == ("| Model       |   BLEU | note         |\n"
                            "|:------------|-------:|--------------|\n"
                            "| rnn         | 30.50* | a\\|b         |\n"
                            "| <lstm> & co |  1,234 | **bold** `x` |")
    assert Table(["a"], [["1"]], "r").text() == "|   a |\n|----:|\n|   1 |"  # three dashes at least


def test_control_characters_are_shown_as_escapes_in_both_renderings():
    """A NUL, an escape and a C1 byte decoded from byte-fallback pieces: visible, and harmless to the row."""
    table = Table(["Model", "output"], [["rnn", "Ein\x00Hund\x1b[2J\x85|"]], "ll")
    assert table.markdown().splitlines()[2] == "| rnn | Ein\\x00Hund\\x1b[2J\\x85\\| |"
    assert table.html().endswith("<tr><td>rnn</td><td>Ein\\x00Hund\\x1b[2J\\x85|</td></tr></table>")


def test_dash_formats_a_figure_and_dashes_a_missing_one():
    assert [dash(None), dash(""), dash(0, ".2f"), dash(6645.0, ",.0f"), dash(3.14e14, ".2e")] == [
        "-", "-", "0.00", "6,645", "3.14e+14"]
