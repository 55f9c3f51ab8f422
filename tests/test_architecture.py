"""The shape issue 38 set: no import circle, at most two imports running up a floor, no module over 600 lines, and
the config as the ground floor (tests/architecture.py measures it from the source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from architecture import LONGEST, PROJECT, circles, import_graph, long_modules, upward_imports

CONFIG = PROJECT / "components" / "config"


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def _rel(path: Path, root: Path = PROJECT) -> str:
    return str(path.relative_to(root))


def test_the_program_has_no_import_circle(graph):
    assert [[_rel(p) for p in group] for group in circles(graph)] == []


def test_at_most_two_imports_run_up_a_floor(graph):
    upward = [f"{_rel(a)} -> {_rel(b)}" for a, b in upward_imports(graph)]
    assert len(upward) <= 2, upward


def test_no_module_is_longer_than_the_limit():
    assert {_rel(path): n for path, n in long_modules().items()} == {}, f"over {LONGEST} lines"


def test_the_config_imports_only_modules_that_import_nothing_of_the_project(graph):
    """The config is the ground floor: outside its own package it may read only leaves (versions, constants)."""
    below = {
        _rel(target)
        for source, targets in graph.edges.items() if CONFIG in source.parents
        for target in targets if CONFIG not in target.parents
    }
    leaves = {name for name in below if not graph.edges.get(PROJECT / name)}
    assert below - leaves == set()


# The measure itself, on small trees of its own -------------------------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_through_a_late_import_is_found(tmp_path):
    project = _tree(tmp_path, {
        "components/__init__.py": "",
        "components/a.py": "from components import b\n",
        "components/b.py": "def f():\n    from components.a import x\n",
    })
    assert [[_rel(p, project) for p in group] for group in circles(import_graph(project))] == [
        ["components/a.py", "components/b.py"]]


def test_an_import_for_type_checking_only_ties_the_modules_too(tmp_path):
    project = _tree(tmp_path, {
        "components/__init__.py": "",
        "components/a.py": "from components import b\n",
        "components/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from components.a import x\n",
    })
    assert [[_rel(p, project) for p in group] for group in circles(import_graph(project))] == [
        ["components/a.py", "components/b.py"]]


def test_an_arrow_against_the_floors_of_a_folder_is_counted_upward(tmp_path):
    project = _tree(tmp_path, {
        "components/__init__.py": "",
        "components/top.py": "import components.middle\nimport components.low\n",
        "components/middle.py": "import components.low\n",
        "components/low.py": "import components.other\n",
        "components/other.py": "import components.low2\n",
        "components/low2.py": "",
        "components/pkg/__init__.py": "",
        "components/pkg/a.py": "import components.top\n",
        "components/pkg/b.py": "import components.low2\n",
    })
    graph = import_graph(project)
    graph.edges[project / "components/low2.py"].add(project / "components/pkg/a.py")
    assert [(_rel(a, project), _rel(b, project)) for a, b in upward_imports(graph)] == [
        ("components/low2.py", "components/pkg/a.py")]
