"""The documentation holds together: every relative link resolves, the README stays a front page,
and docs/configuration.md names every key of params.yaml."""
import re
from pathlib import Path

import pytest
import yaml

from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
README_MAX_LINES = 200
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The Markdown without fenced code blocks and inline code, where brackets and # are not Markdown."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (a link's label), lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    found, counts = set(), {}
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        base = slug(heading)
        found.add(f"{base}-{counts[base]}" if base in counts else base)
        counts[base] = counts.get(base, 0) + 1
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """'target: why' for every link of page that leaves the repository or does not resolve."""
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            broken.append(f"{target}: points outside the repository; refer to what it is instead")
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if root not in resolved.parents and resolved != root:
            broken.append(f"{target}: leaves the repository")
        elif not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
            broken.append(f"{target}: no heading '#{anchor}' in {resolved.relative_to(root).as_posix()}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Top\n\n## Two words, `code`!\n\n```\n# not a heading\n```\n## Top\n")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/a.md) [ok](docs/a.md#two-words-code) [ok](docs/a.md#top-1) [ok](#here)\n"
                    "`[in code](missing.md)`\n# Here\n"
                    "[a](docs/b.md) [b](docs/a.md#not-a-heading) [c](https://example.org) [d](../outside.md)\n")
    assert broken_links(page, tmp_path) == ["docs/b.md: no such file",
                                  "docs/a.md#not-a-heading: no heading '#not-a-heading' in docs/a.md",
                                  "https://example.org: points outside the repository; refer to what it is instead",
                                  "../outside.md: leaves the repository"]


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


def params_keys(params: dict) -> list[str]:
    """Dotted paths of every params.yaml key; models and analyze's model blocks by their option names; tune.space
    whole (its families and knobs are examples of one format, documented once)."""
    keys = []
    def walk(prefix: str, value) -> None:
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(item, dict) and path not in ("analyze.models", "analyze.roles", "tune.space"):
                walk(path, item)
            else:
                keys.append(path)
    walk("", {block: value for block, value in params.items() if block != "models"})
    keys += sorted({option for block in params["models"].values() for option in block})
    return keys


def test_configuration_page_names_every_params_key():
    documented = set(re.findall(r"`([^`]+)`", (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")))
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    missing = [key for key in params_keys(params) if key not in documented]
    assert missing == [], f"add these params.yaml keys to docs/configuration.md: {', '.join(missing)}"


def parameter_table() -> str:
    """docs/models.md's parameter counts of the default transformer and lstm_attention_general under each
    tie_embeddings, with params.yaml's joint vocabulary and with one of the same size per side."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    size, names = params["tokenize"]["vocab_size"], ("transformer", "lstm_attention_general")
    lines = ["| `tie_embeddings` | vocabularies | `transformer` | `lstm_attention_general` |", "|:---|:---|---:|---:|"]
    vocabularies = {f"one joint, {size:,}": Vocab.of(size), f"one per side, {size:,} each": Vocab.of(size, size)}
    for label, vocab in vocabularies.items():
        for tie in ("all", "source_target", "target_output", "none"):
            if tie in ("all", "source_target") and not vocab.joint:
                lines.append(f"| {tie} | {label} | refused | refused |")
                continue
            counts = [build_model(name, {**params["models"][name], "tie_embeddings": tie}, vocab).num_parameters()
                      for name in names]
            lines.append(f"| {tie} | {label} | {counts[0]:,} | {counts[1]:,} |")
    return "\n".join(lines)


def test_the_parameter_table_of_the_models_page_is_the_computed_one():
    table = parameter_table()
    assert table in (ROOT / "docs" / "models.md").read_text(encoding="utf-8"), f"put in docs/models.md:\n{table}"
