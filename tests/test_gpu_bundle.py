"""tools/gpu_bundle.py: the carried folder holds what the GPU machine lacks and the runs import, and nothing that
would replace the machine's own torch or compiled packages."""
import ast
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_bundle", ROOT / "tools" / "gpu_bundle.py")
gpu_bundle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_bundle)

# what the runs on the GPU machine never import: DVC's view of the pipeline (the launcher runs there without dvc,
# launch/dvcfile.py, and without submitit on processes of its own), W&B reports and DVC experiments
NOT_RUN_THERE = ("launch/stages.py", "dashboard.py", "experiments.py")


def wheels(*names: str) -> list[Path]:
    return [Path(name) for name in names]


def test_the_machine_list_reads_names_without_versions_or_comments(tmp_path):
    listed = tmp_path / "packages.txt"
    listed.write_text("# a comment\ntorch==2.11.0\nPyYAML\n\ntyping_extensions\nhuggingface-hub==1.33.0\n")
    assert gpu_bundle.machine_packages(listed) == {"torch", "pyyaml", "typing-extensions", "huggingface-hub"}


def test_every_dependency_of_the_project_is_on_the_machine_carried_or_left_out_with_a_reason():
    assert gpu_bundle.unplaced(gpu_bundle.project_requirements(), gpu_bundle.machine_packages()) == []
    assert all(gpu_bundle.LEFT_OUT.values())


def test_a_new_dependency_must_be_placed():
    requirements = {**gpu_bundle.project_requirements(), "einops-extra": "einops-extra==1.0"}
    assert gpu_bundle.unplaced(requirements, gpu_bundle.machine_packages()) == ["einops-extra"]


def test_the_carried_packages_are_pinned_in_pyproject_and_absent_from_the_machine():
    requirements, machine = gpu_bundle.project_requirements(), gpu_bundle.machine_packages()
    for name in gpu_bundle.CARRIED:
        assert "==" in requirements[name] and name not in machine


def test_chosen_wheels_are_what_the_machine_lacks_and_small_pure_python_ones_it_has():
    found = wheels("pydantic_core-2.50.4-cp312-cp312-manylinux2014_x86_64.whl", "optuna-5.0.0-py3-none-any.whl",
                   "typing_extensions-4.16.0-py3-none-any.whl", "numpy-2.5.5-cp312-cp312-manylinux_2_28_x86_64.whl",
                   "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", "six-1.17.0-py2.py3-none-any.whl",
                   "PyYAML-6.0.4-cp312-cp312-manylinux2014_x86_64.whl")
    chosen = [w.name for w in gpu_bundle.chosen_wheels(found, {"numpy", "torch", "typing-extensions", "six",
                                                                  "pyyaml"})]
    assert chosen == ["optuna-5.0.0-py3-none-any.whl", "pydantic_core-2.50.4-cp312-cp312-manylinux2014_x86_64.whl",
                      "six-1.17.0-py2.py3-none-any.whl", "typing_extensions-4.16.0-py3-none-any.whl"]


def module_imports(path: Path) -> set[str]:
    """The top-level modules a file imports when it is loaded (imports inside functions wait for a call)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def requirement_closure(names: list[str]) -> set[str]:
    """names and every distribution they require, as installed in this environment (extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = gpu_bundle.normalized(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [gpu_bundle.requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_every_module_the_runs_load_finds_its_package_on_the_machine_or_in_the_carried_folder():
    """A module-level import of a package neither the machine nor the carried folder has would end every run
    there at its first line: caught here, on the CPU."""
    distributions = importlib.metadata.packages_distributions()
    available = gpu_bundle.machine_packages() | requirement_closure(list(gpu_bundle.CARRIED))
    missing = {}
    for path in sorted((ROOT / "src" / "nmtbench").rglob("*.py")):
        if str(path.relative_to(ROOT / "src" / "nmtbench")).startswith(NOT_RUN_THERE):
            continue
        for module in module_imports(path) - set(sys.stdlib_module_names) - {"nmtbench", "__future__"}:
            names = {gpu_bundle.normalized(d) for d in distributions.get(module, [module])}
            if not names & available:
                missing[f"{path.name}: {module}"] = names
    assert missing == {}


@pytest.mark.parametrize("module", ["launch/stages.py"])
def test_the_modules_left_out_are_the_ones_importing_what_is_not_carried(module):
    """The exclusion above is needed, not a blanket: these import dvc or submitit when loaded."""
    assert module_imports(ROOT / "src" / "nmtbench" / module) & {"dvc", "submitit"}


def test_the_manifest_lists_every_file_the_total_and_the_reasons(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1.0-py3-none-any.whl").write_bytes(b"x" * 1000)
    (tmp_path / "requirements.txt").write_text("a==1.0\n")
    text = gpu_bundle.manifest(tmp_path, {"dvc": "too heavy"})
    assert "1,000  wheels/a-1.0-py3-none-any.whl" in text and "7  requirements.txt" in text
    assert "1,007  in all" in text and "dvc: too heavy" in text


def test_the_carried_commit_is_what_provenance_reads_where_there_is_no_git(tmp_path, monkeypatch):
    from nmtbench.provenance import COMMIT_FILE, git_state

    written = gpu_bundle.write_commit(tmp_path)
    assert written == git_state(ROOT) and written["commit"] is not None  # this checkout's, dirty or not
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))  # as on the GPU machine: no .git
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    assert git_state(ROOT) == written
