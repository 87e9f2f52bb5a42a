"""The package's layers: one way down. Every room (a subpackage such as data/, or a top-level module such as
config.py) stands above all the rooms it imports, so no module imports from a layer above it; nothing below
training imports it; only cli.py imports gpu/; and every module imports on its own (no cycles)."""
import ast
import subprocess
import sys
from pathlib import Path

import nmtbench
from helpers.project import pipeline_env

PACKAGE = Path(nmtbench.__file__).parent
BELOW_TRAINING = ("data", "models", "decoding", "evaluation")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module a file imports, wherever the import statement is (a function-local one counts)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update([node.module] + [f"{node.module}.{alias.name}" for alias in node.names])
    return names


def test_nothing_below_training_imports_it():
    found = [(path, name) for package in BELOW_TRAINING for file in sorted((PACKAGE / package).rglob("*.py"))
             for path in [str(file.relative_to(PACKAGE))] for name in sorted(imported(file))
             if name == "nmtbench.training" or name.startswith("nmtbench.training.")]
    assert found == []


def room(name: str) -> str | None:
    """The room of a module: nmtbench.data.sources -> data, nmtbench.config.Block -> config; None outside nmtbench."""
    parts = name.split(".")
    return parts[1] if parts[0] == "nmtbench" and len(parts) > 1 else None


def rooms() -> dict[str, dict[str, list[str]]]:
    """room -> every other room it imports -> the files of it that do."""
    found = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        own = room(module_name(file))
        for other in {room(name) for name in imported(file)} - {None, own}:
            found.setdefault(own, {}).setdefault(other, []).append(str(file.relative_to(PACKAGE)))
    return found


def loop(graph: dict[str, dict]) -> list[str]:
    """A loop of rooms importing each other, [a, b, a]; [] where every room can stand above all it imports."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        path.append(node)
        found = next((cycle for other in graph.get(node, {}) if (cycle := visit(other))), [])
        path.pop()
        done.add(node)
        return found

    return next((cycle for node in graph if (cycle := visit(node))), [])


def test_no_module_imports_from_a_layer_above_it():
    """An import that runs back up a layer closes a loop of rooms: the loop and the files that make it fail."""
    graph = rooms()
    cycle = loop(graph)
    assert cycle == [], " -> ".join(f"{a} ({', '.join(graph[a][b])})" for a, b in zip(cycle, cycle[1:]))


def test_only_the_command_line_imports_the_gpu_area():
    """gpu/ serves a machine lent for minutes: the stages, the evaluation and the launcher work without it."""
    found = {own: files for own, imports in rooms().items() for other, files in imports.items() if other == "gpu"}
    assert set(found) == {"cli"}, found


def test_the_layer_check_sees_an_import_back_up():
    assert loop({"cli": {"evaluation": 1}, "evaluation": {"analysis": 1}, "analysis": {"evaluation": 1}}) == [
        "evaluation", "analysis", "evaluation"]
    assert loop({"cli": {"evaluation": 1, "config": 1}, "evaluation": {"config": 1}}) == []
    assert room("nmtbench.evaluation.tables.Table") == "evaluation" and room("torch.nn") is None


def test_the_import_check_sees_what_it_should(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from nmtbench.training.train import train\nfrom nmtbench import training\n")
    assert {"nmtbench.training.train", "nmtbench.training"} <= imported(source)


# Each module is imported in a child process of its own that starts with no nmtbench module loaded; the
# third-party libraries (torch, Lightning, datasets: seconds each) are loaded once before the children fork.
FRESH_IMPORTS = """
import importlib, os, sys
names = sys.argv[1:]
for name in names:
    importlib.import_module(name)
for name in [m for m in sys.modules if m == "nmtbench" or m.startswith("nmtbench.")]:
    del sys.modules[name]
for name in names:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException as error:
            print(name, type(error).__name__, error, flush=True)
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_every_module_imports_alone():
    """A cycle fails only when its modules are imported in one order: import each one first, from nothing."""
    modules = sorted(module_name(path) for path in PACKAGE.rglob("*.py") if path.name != "__main__.py")
    done = subprocess.run([sys.executable, "-c", FRESH_IMPORTS, *modules], capture_output=True, text=True)
    assert len(modules) > 40 and done.returncode == 0 and done.stdout == "", done.stdout + done.stderr[-2000:]


def test_decoding_a_test_set_imports_no_lightning():
    """evaluate and translate need none of Lightning, which takes seconds to import in every stage that loads it."""
    code = ("import sys; import nmtbench.evaluation.evaluate, nmtbench.decoding.translator; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'torch'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["['torch']"]


def test_an_evaluation_logged_to_wandb_imports_no_lightning(trained_copy):
    """Evaluation's W&B run is wandb's own, not Lightning's logger, which would import Lightning to log a table."""
    code = ("import sys; from nmtbench.cli import main; code = main(['evaluate', 'tiny']); "
            "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'wandb'}))")
    env = {**pipeline_env(WANDB_MODE="offline"), **{var: str(trained_copy) for var in ("WANDB_DIR", "WANDB_CONFIG_DIR",
                                                                                       "WANDB_CACHE_DIR")}}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.splitlines()[-1:] == ["0 ['wandb']"], done.stdout + done.stderr[-2000:]
    assert len(list((trained_copy / "wandb").glob("offline-run-*-evaluate-tiny-seed*"))) == 1
