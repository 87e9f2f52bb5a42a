"""What the calls of tools/gpu_check.sh returned, read back: each folder is one call's $OUT, summary.txt and a
<part>.tar.gz per part that ran. With several (the two calls of the call plan), a part in a later folder replaces
the same part of an earlier one. A file that came back unreadable (a tarball or a JSON file cut short) is recorded
on its part rather than raised, so that a page can hold the rest.
"""
from __future__ import annotations

import json
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from nmtbench.evaluation.quality_vs_compute import flops_curve
from nmtbench.param_blocks import ConfigError
from nmtbench.provenance import code_text
from nmtbench.run_paths import RunPaths

PARTS = ("setup", "tests", "published", "probe", "grid")  # gpu_check.sh's parts, in its order
# a later call's part `more` trains the grid's unfinished runs further and packs the grid's folder again: its
# grid.tar.gz and its summary line are the grid's
LATER_PART_OF = {"more": "grid"}
SUMMARY_LINE = re.compile(rf"^({'|'.join((*PARTS, *LATER_PART_OF))}): (.*)$")


@dataclass
class Part:
    """One part as it came back: its summary line, the summary's lines under it, and its unpacked folder."""
    name: str
    status: str = "not in what came back (no line in summary.txt, no tarball)"
    lines: tuple[str, ...] = ()
    folder: Path | None = None
    unreadable: dict[str, str] = field(default_factory=dict)  # a file (or the tarball) -> what is wrong with it

    @property
    def passed(self) -> bool:
        return self.status.startswith("passed")

    def text(self, path: str | Path) -> str:
        """A file of the part's folder as text; "" when the part or the file did not come back."""
        found = self.folder / path if self.folder else None
        return found.read_text(errors="replace") if found and found.is_file() else ""

    def json(self, path: str | Path, empty=None):
        """A JSON file of the part's folder; empty when it did not come back or is unreadable, which it records."""
        text = self.text(path)
        try:
            return json.loads(text) if text else empty
        except json.JSONDecodeError as error:
            self.unreadable[str(path)] = f"is cut short or damaged (JSONDecodeError at line {error.lineno})"
            return empty

    def lost(self, path: str) -> str | None:
        """Why a file of the part may be absent though the part wrote it: it, or the tarball, is unreadable."""
        name = next((name for name in (path, f"{self.name}.tar.gz") if name in self.unreadable), None)
        return name and f"{name} {self.unreadable[name]}"

    def problem(self) -> str | None:
        """The part's unreadable files in one line, None when every file read."""
        return "; ".join(f"{path} {why}" for path, why in self.unreadable.items()) or None


def read_returned(folders: list[Path], scratch: Path) -> tuple[list[str], dict[str, Part]]:
    """The calls' own lines of every summary.txt (the gpu_check: lines, a failed setup's), and each part as the
    last call that ran it (its tarball came back) left it, unpacked under scratch; a part no call ran keeps the
    last line that says why."""
    calls, parts = [], {name: Part(name) for name in PARTS}
    for index, folder in enumerate(folders):
        summary = folder / "summary.txt"
        if not summary.is_file():
            raise ConfigError(f"{summary} not found; give the folder a GPU call's $OUT came back in")
        found_here, current = {}, None
        for line in summary.read_text(errors="replace").splitlines():
            found = SUMMARY_LINE.match(line)
            if found:
                name, status = LATER_PART_OF.get(found[1], found[1]), found[2].removesuffix("; the end of its log:")
                if name != found[1]:
                    status = f"{status} as `{found[1]}` in call {index + 1}, after {name}: {parts[name].status}"
                current = found_here[name] = Part(name, status)
            elif line.startswith("    ") and current:
                current.lines += (line[4:],)
            elif line.strip():
                calls.append(line)
        for name, part in found_here.items():
            packed = folder / f"{name}.tar.gz"
            if packed.is_file():
                broken = unpack(packed, scratch / str(index))
                if broken:
                    part.unreadable[packed.name] = broken
                part.folder = scratch / str(index) / name
            if part.folder or not parts[name].folder:
                parts[name] = part
    return calls, parts


def unpack(packed: Path, into: Path) -> str | None:
    """Extract the tarball's files into `into`, each whole: what a call cut short holds up to the cut, less the file
    the cut went through (a learning curve missing its last rows would be read as a shorter run). None when the
    tarball read to its end, else why not."""
    whole, member = 0, None
    try:
        with tarfile.open(packed) as tar:
            for member in tar:
                tar.extract(member, into, filter=files_only)
                whole, member = whole + member.isfile(), None
    except (EOFError, tarfile.TarError, zlib.error, OSError) as error:
        if member is not None and member.isfile():
            (into / member.name).unlink(missing_ok=True)
        cut = isinstance(error, EOFError) or any(words in str(error) for words in ("unexpected end", "empty file"))
        came = f"only its first {whole} files came out, the rest" if whole else "all it held"
        return f"is {'cut short' if cut else 'unreadable'} ({type(error).__name__}); {came} is missing from this page"
    return None


def files_only(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """The tarballs' files and folders, never a link: a workspace's data/tokenized links to the carried corpus."""
    return None if member.issym() or member.islnk() else tarfile.data_filter(member, path)


def first(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text, re.MULTILINE)
    return found[1] if found else None


@dataclass
class ReturnedRun:
    """One model and seed of a part as it came back: what train.json, eval.json and the learning curve say, {} where
    absent."""
    model: str
    seed: int
    family: str | None  # None where params.yaml gives the model none
    train: dict
    scores: dict
    curve: list[tuple[float, float]]  # (training FLOPs, val BLEU) at each validation


def part_runs(part: Part) -> tuple[dict, list[ReturnedRun]]:
    """The merged params the part's runs trained with and every run they name: its workspace's params.grid.yaml,
    where a failed run had params.yaml cut to the finished models for compare, else params.yaml."""
    name = "params.grid.yaml" if part.text("params.grid.yaml") else "params.yaml"
    try:
        params = yaml.safe_load(part.text(name)) or {}
    except yaml.YAMLError as error:
        part.unreadable[name] = f"is cut short or damaged ({type(error).__name__})"
        params = {}
    runs = []
    for model, block in params.get("models", {}).items():
        family = block.get("family") if isinstance(block, dict) else None
        for seed in params.get("seeds", [42]):
            paths = RunPaths(model, seed)  # relative to the part's folder
            runs.append(ReturnedRun(model, seed, family, part.json(paths.train_metrics, {}),
                                    part.json(paths.eval_metrics, {}), flops_curve(part.folder / paths.learning_curve)))
    return params, runs


def grid_summary(part: Part) -> dict:
    """What nmtbench gpu timed-grid says of the part's grid (gpu_runs.json in calls before it had that name)."""
    return part.json("timed_grid.json") or part.json("gpu_runs.json", {})


def machine(calls: list[str], parts: dict[str, Part], runs: list[ReturnedRun]) -> dict[str, str | None]:
    """GPU, driver, CUDA and torch as setup printed them, and the code's commit as the runs recorded it (train.json's
    provenance, else the commit the call's first line names); the provenance stands in where setup did not say."""
    log, smi = parts["setup"].text("part.log"), parts["setup"].text("machine.txt")
    stamps = [run.train["provenance"] for run in runs if run.train.get("provenance")]
    commits = dict.fromkeys(code_text(stamp["git"]) for stamp in stamps if stamp["git"]["commit"])
    named = next((f"commit {found}" for line in calls
                  if (found := first(r"commit (\w+)", line)) not in (None, "unknown")), None)
    gpus = next((", ".join(stamp["device"]["gpus"]) for stamp in stamps if stamp["device"]["gpus"]), None)
    rehearsal = "none: a CPU rehearsal" if "CPU rehearsal" in log + "".join(calls) else None
    return {"gpu": first(r"^GPU: ([^;]*)", log) or gpus or rehearsal, "driver": first(r"Driver Version:\s*(\S+)", smi),
            "cuda": first(r"CUDA Version:\s*(\S+)", smi),
            "torch": first(r"^versions: .*?\btorch ([^,\s]+)", log) or next((s["packages"]["torch"] for s in stamps),
                                                                            None),
            "commit": " / ".join(commits) or named}
