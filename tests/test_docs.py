"""The documentation holds together: every relative link resolves, every path it names exists (or is an output
dvc.yaml declares), the README stays a front page, and docs/configuration.md names every key of params.yaml with
its default."""
import fnmatch
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from nmtbench.analysis.claims import CLAIMS
from nmtbench.config import load_params
from nmtbench.launch.converge_report import finished_table, headline_table
from nmtbench.models.family import with_halves
from nmtbench.models.hybrid_config import halves
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
# a front page: the answer, its picture and table, then how to run it; reference goes to docs/
README_MAX_WORDS = 1200
QUICK_START_BY_LINE = 70
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


# CHANGELOG.md names what was renamed and removed, so it keeps paths that are gone
PATH_PAGES = [page for page in PAGES if page.name != "CHANGELOG.md"]
# Folders written by the pipeline but declared to DVC by none of its stages: W&B's offline runs, profile
# workspaces, Lightning's default log folder, the raw downloads and prepare's and tokenize's temporary folders.
UNDECLARED_OUTPUTS = ("wandb", "runs", "lightning_logs", "data/raw", "data/.prepared.*", "data/.tokenized.*")
PATH_TOPS = "src|docs|profiles|benchmarks|tests|plots|data|models|metrics|results|tuned|tuning|wandb|runs"
# a repository path in code: a known top folder, then names, globs, {a,b} alternatives and <placeholders>
REPO_PATH = re.compile(rf"(?<![\w./<>$-])(?:{PATH_TOPS})/(?:[\w.*@+/-]|<[^<>\n]*>|\{{[^{{}}\s]*\}})*")


def code(text: str) -> list[str]:
    """Inline code spans and fenced code blocks: where pages name files."""
    return re.findall(r"`([^`\n]+)`", FENCE.sub("", text)) + [block.group(0) for block in FENCE.finditer(text)]


def expand(path: str) -> list[str]:
    """path as globs: each {a,b} alternative spelled out, each <placeholder> a *, no trailing slash."""
    alternatives = re.search(r"\{([^{}]*)\}", path)
    if alternatives:
        head, tail = path[:alternatives.start()], path[alternatives.end():]
        return [found for choice in alternatives.group(1).split(",") for found in expand(head + choice + tail)]
    return [re.sub(r"<[^<>]*>", "*", path).rstrip("/")]


def declared_outputs(root: Path) -> list[str]:
    """Every output, metrics and plots file or folder of dvc.yaml's stages as a glob (a ${...} is a *)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"].values()
    return [re.sub(r"\$\{[^}]*\}", "*", entry if isinstance(entry, str) else next(iter(entry)))
            for stage in stages for kind in ("outs", "metrics", "plots") for entry in stage.get(kind, [])]


def on_one_line(path: str, glob: str) -> bool:
    """path lies on glob's line of folders: glob itself, a folder above it or a file below it."""
    return all(fnmatch.fnmatchcase(mine, theirs) or fnmatch.fnmatchcase(theirs, mine)
               for mine, theirs in zip(path.split("/"), glob.split("/")))


def stale_paths(page: Path, root: Path = ROOT) -> list[str]:
    """Every path page names in code that is not in the repository; under a folder of the pipeline's outputs,
    every path that no stage of dvc.yaml writes."""
    outputs = declared_outputs(root)
    output_tops = {glob.split("/")[0] for glob in (*outputs, *UNDECLARED_OUTPUTS)}
    stale = []
    spans = code(page.read_text(encoding="utf-8"))
    for named in dict.fromkeys(path for span in spans for path in REPO_PATH.findall(span)):
        for path in expand(named):
            if path.split("/")[0] in output_tops:
                found = (any(on_one_line(path, glob) for glob in outputs)
                         or any(fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(path, glob + "/*")
                                for glob in UNDECLARED_OUTPUTS))
            else:
                found = any(root.glob(path))
            if not found:
                stale.append(named)
                break
    return stale


@pytest.mark.parametrize("page", PATH_PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_path_a_page_names_exists(page):
    assert stale_paths(page) == [], "no such file in the repository, nor an output dvc.yaml declares"


def test_the_path_check_finds_stale_paths(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "here.py").write_text("")
    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    outs:\n      - models/${item.model}/seed${item.seed}:\n"
                                       "          persist: true\n    metrics:\n      - results/${item.model}.json\n")
    page = tmp_path / "page.md"
    page.write_text("`src/here.py` `src/*.py` `models/<model>/seed<seed>/best.ckpt` `models/` `results/{a,b}.json`\n"
                    "`wandb/offline-run-*` `runs/mine` `data/raw/train.en.gz` src/gone.py outside code\n"
                    "```\nnmtbench translate models/transformer/best.ckpt > src/gone.py\n```\n"
                    "`src/{here,gone}.py` `results/a/b.json` `tests/x.py` `lightning_logs/version_0`\n")
    assert stale_paths(page, tmp_path) == ["src/{here,gone}.py", "results/a/b.json", "tests/x.py",
                                           "models/transformer/best.ckpt", "src/gone.py"]


def test_the_pipeline_page_lists_what_make_help_prints():
    page = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    listed = re.search(r"`make help` lists every target:\n\n```\n(.*?)```", page, re.DOTALL)[1]
    printed = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    assert listed == printed


def test_readmes_converged_table_is_what_make_headline_reads_from_the_committed_runs():
    converged = ROOT / "docs/results/converged-grid-cpu"
    params = load_params(converged / "params.yaml")
    for page, table in (("README.md", headline_table(params, exported=converged)),
                        ("docs/answer.md", finished_table(params, exported=converged))):
        assert table in (ROOT / page).read_text(encoding="utf-8"), (
            f"{page}'s converged table differs from the committed runs: run make headline, which rewrites it")


def test_readme_is_a_front_page():
    """Its prose (the tables' rows aside) under README_MAX_WORDS, and the quick start soon after the answer."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    words = sum(len(line.split()) for line in text.splitlines() if not line.startswith("|"))
    assert words <= README_MAX_WORDS, f"README.md has {words} words besides its tables; move reference to docs/"
    quick_start = text.splitlines().index("## Quick start") + 1
    assert quick_start <= QUICK_START_BY_LINE, f"README.md's quick start is at line {quick_start}; keep it near the top"


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


def params_value(params: dict, key: str):
    for name in key.split("."):
        params = params[name]
    return params


def test_configuration_page_gives_params_yaml_defaults():
    """Each block's table row `key` | `default` holds params.yaml's value (`[8, ..., 1024]` abbreviates, unchecked)."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    rows = re.findall(r"^\| `([\w.]+)` \| `([^`]*)` \|", page, re.MULTILINE)
    wrong = [f"{key}: the page says {default}, params.yaml {params_value(params, key)!r}" for key, default in rows
             if "..." not in default and yaml.safe_load(default) != params_value(params, key)]
    assert rows
    assert wrong == []


def layout_files(page: Path) -> set[str]:
    """The .py files the page's "Layout, file by file" block names, as paths: a folder at the start of a line
    (indented 2 under a top one) holds the names on that line and on the continuation lines below it."""
    text = page.read_text(encoding="utf-8").split("## Layout, file by file", 1)[1]
    top = folder = ""
    named = set()
    for line in FENCE.search(text).group(0).splitlines()[1:-1]:
        first = line.split()[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            top = folder = first if first.endswith("/") else ""
        elif indent == 2:
            folder = top + (first if first.endswith("/") else "")
        named |= {folder + name for name in re.findall(r"\b\w+\.py\b", line)}
    return named


def test_layout_names_every_module():
    modules = {path.relative_to(ROOT).as_posix() for top in ("src/nmtbench", "benchmarks", "tools")
               for path in (ROOT / top).rglob("*.py") if path.name not in ("__init__.py", "__main__.py")}
    named = layout_files(ROOT / "docs" / "design-decisions.md")
    assert sorted(modules - named) == [], "name these in docs/design-decisions.md, Layout, file by file"
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []


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


CORNERS = {"transformer": "transformer", "rnn": "lstm_attention_general", "cnn": "cnn"}  # each family's grid model


def grid_half(models: dict, family: str, side: str) -> dict:
    """The encoder or decoder half of family's grid model (CORNERS), as a hybrid's block names it."""
    read = with_halves()[family].keys_read(side)
    return {"family": family, **{key: value for key, value in models[CORNERS[family]].items() if key in read}}


def combination_table() -> str:
    """docs/models.md's parameter counts of every encoder with every decoder, each half the grid's: the families'
    own models on the diagonal, hybrids elsewhere (params.yaml's joint vocabulary, tie_embeddings unset)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    models, vocab = params["models"], Vocab.of(params["tokenize"]["vocab_size"])
    lines = ["| encoder \\ decoder | " + " | ".join(f"{family} (`{CORNERS[family]}`'s)" for family in CORNERS) + " |",
             "|:---|" + "---:|" * len(CORNERS)]
    for encoder in CORNERS:
        counts = [build_model(CORNERS[encoder], models[CORNERS[encoder]], vocab) if encoder == decoder else
                  build_model("h", {"family": "hybrid", "encoder": grid_half(models, encoder, "encoder"),
                                    "decoder": grid_half(models, decoder, "decoder")}, vocab)
                  for decoder in CORNERS]
        lines.append(f"| {encoder} (`{CORNERS[encoder]}`'s) | "
                     + " | ".join(f"{model.num_parameters():,}" for model in counts) + " |")
    return "\n".join(lines)


def test_the_combination_table_of_the_models_page_is_the_computed_one():
    table = combination_table()
    assert table in (ROOT / "docs" / "models.md").read_text(encoding="utf-8"), f"put in docs/models.md:\n{table}"


def test_the_grid_hybrids_are_the_corner_models_halves():
    """hybrid_transformer_lstm and hybrid_lstm_transformer make a 2 x 2 with transformer and lstm_attention_general:
    each half exactly the corner model's (the halves the verdict compares: how a decoder starts is how it meets its
    encoder, not part of the half), so a per-side contrast changes one half alone."""
    models = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["models"]
    for name, encoder, decoder in (("hybrid_transformer_lstm", "transformer", "rnn"),
                                   ("hybrid_lstm_transformer", "rnn", "transformer")):
        assert halves(models[name])[0] == halves(models[CORNERS[encoder]])[0], name
        assert halves(models[name])[1] == halves(models[CORNERS[decoder]])[1], name


def test_the_parameter_table_of_the_models_page_is_the_computed_one():
    table = parameter_table()
    assert table in (ROOT / "docs" / "models.md").read_text(encoding="utf-8"), f"put in docs/models.md:\n{table}"


NUMBER = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|" \
         r"seventeen|eighteen|nineteen|twenty)"
WORDS = dict(zip(NUMBER[1:-1].split("|")[1:], range(1, 21)))
# the pages a newcomer reads first; the dated pages keep the counts of their day
FRONT_PAGES = ("README.md", "docs/README.md", "docs/results/README.md", "docs/gpu.md")


def stated(pattern: str, text: str) -> set[int]:
    """Every count the text states in the form pattern gives (NUMBER its group), as an int."""
    return {int(found) if found.isdigit() else WORDS[found.lower()]
            for found in re.findall(pattern.format(NUMBER), text, flags=re.I)}


def test_the_front_pages_agree_on_how_many_models_claims_and_gpu_runs():
    models = len(yaml.safe_load((ROOT / "params.yaml").read_text())["models"])
    gpu_runs = len(list((ROOT / "docs/results").glob("*-gpu-h[0-9]*.md")))  # a page a run, named by its GPU
    for page in FRONT_PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        if page == "docs/results/README.md":
            text = text.partition("| date |")[0]  # the rows are dated: each says what held then
        grids = stated(r"(?:\ball |\bgrid has |\bgrid of |-> ){} models\b", text) | stated(r"\b{}-model grid\b", text)
        assert grids <= {models}, f"{page}: the grid has {models} models"
        assert stated(r"\b{} (?:textbook )?claims\b", text) <= {len(CLAIMS)}, f"{page}: there are {len(CLAIMS)} claims"
        runs = stated(r"\bon a GPU {} times\b", text) | stated(r"\bthe {} GPU runs\b", text)
        assert runs <= {gpu_runs}, f"{page}: there have been {gpu_runs} GPU runs (docs/results/*-gpu-h*.md)"


def test_every_dated_results_page_is_in_the_index():
    index = (ROOT / "docs/results/README.md").read_text(encoding="utf-8")
    missing = [page.name for page in sorted((ROOT / "docs/results").glob("20*.md")) if f"]({page.name})" not in index]
    assert missing == [], f"docs/results/README.md lists no row for {', '.join(missing)}; add one"

