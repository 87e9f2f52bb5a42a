"""One table, three renderings: Markdown for the results/*.md files, HTML for the report page, and aligned
text (Markdown too) for a terminal.

Every table of the results goes through here, so the Markdown and the page cannot disagree on a figure.
Cells are text the caller has formatted already; control characters in them (a NUL or an escape decoded from a
byte-fallback piece of a weak model) are shown as \\xNN, so they can neither break a row nor hide in the page.
"""
from __future__ import annotations

import html
import re
import statistics
from dataclasses import dataclass

# One letter per column. "r" for figures: right-aligned, so digits line up. "-" leaves the alignment
# to the reader (Markdown's plain ---).
RULES = {"l": ":---", "r": "---:", "-": "---"}
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's category Cc: C0, DEL and C1


def dash(value, spec: str = "") -> str:
    """A figure as spec formats it; a dash where there is none (None, or an empty CSV cell)."""
    return "-" if value is None or value == "" else format(value, spec)


def spread(values: list[float | None], seeds: list[int]) -> dict | None:
    """Mean and sample standard deviation over seeds (None for one seed), and every seed's value.

    None when a run has no value (an optional train key: see OPTIONAL_TRAIN_KEYS).
    """
    if None in values:
        return None
    return {"mean": round(statistics.mean(values), 4),
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else None,
            "per_seed": {str(seed): value for seed, value in zip(seeds, values)}}


def spread_cell(found: dict | None, digits: int = 2) -> str:
    """mean, or mean ± sd when there are several seeds; an empty bucket shows as a dash."""
    if found is None:
        return "-"
    text = f"{found['mean']:.{digits}f}"
    return text if found["sd"] is None else f"{text} ± {found['sd']:.{digits}f}"


def visible(text: str) -> str:
    """text with every control character written as \\xNN: "a\\x00b" for a NUL between a and b."""
    return CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    align: str  # one letter of RULES per column

    def __post_init__(self):  # a short row would shift its cells under the wrong header, silently
        if {len(self.align), *map(len, self.rows)} != {len(self.header)} or not set(self.align) <= set(RULES):
            raise ValueError(f"a table of {len(self.header)} columns needs one alignment ({', '.join(RULES)}) and one "
                             f"cell per column in every row; got {self.align!r} and rows of "
                             f"{sorted({len(row) for row in self.rows})} cells")

    def markdown(self) -> str:
        """A pipe table. Cells stay Markdown (`code`, **bold**, links); a | is escaped, as it would end the cell."""
        return self._pipes(aligned=False)

    def text(self) -> str:
        """The same pipe table with every column padded to its widest cell, so it lines up in a terminal."""
        return self._pipes(aligned=True)

    def _pipes(self, aligned: bool) -> str:
        rows = [[visible(cell).replace("|", r"\|") for cell in row] for row in (self.header, *self.rows)]
        # three characters at least, so that the rule below keeps Markdown's three dashes
        widths = [max(3, *(len(row[i]) for row in rows)) if aligned else 0 for i in range(len(self.header))]
        lines = ["| " + " | ".join(cell.rjust(width) if letter == "r" else cell.ljust(width)
                                   for cell, width, letter in zip(row, widths, self.align)) + " |" for row in rows]
        rules = [RULES[letter].replace("---", "-" * (width + 5 - len(RULES[letter]))) if aligned else RULES[letter]
                 for letter, width in zip(self.align, widths)]
        lines.insert(1, "|" + "|".join(rules) + "|")
        return "\n".join(lines)

    def html(self) -> str:
        """A <table>; cells are plain text, escaped. Right-aligned columns get class "number" (the page's style)."""
        head = "".join(f"<th>{html.escape(visible(cell))}</th>" for cell in self.header)
        opening = ['<td class="number">' if letter == "r" else "<td>" for letter in self.align]
        body = "".join("<tr>" + "".join(f"{tag}{html.escape(visible(cell))}</td>" for tag, cell in zip(opening, row))
                       + "</tr>" for row in self.rows)
        return f"<table><tr>{head}</tr>{body}</table>"
