"""The program's shape, measured from its own source: the import graph between its modules, the import circles in it,
the imports that run from a lower layer up to a higher one, and the length of each module (issue 38).

A module is a Python file of the program (`__main__.py`, components/, fabctl/, policies/, benchmarks/); an import is
an `import` or `from ... import` statement anywhere in it: a function's late import counts (it still ties the two
modules), and so does one under `if TYPE_CHECKING:` (it never runs, but the reader still needs the other module to
read this one). Layers are read folder by folder, as a reader meets them:
in each folder, its files and subfolders are the rooms, an import between two of them is an arrow, and the rooms are
put on floors so that as few arrows as possible run up (Eades, Lin and Smyth's greedy order); those that still do are
the upward imports.

Run it to see the figures: `venv/bin/python tests/architecture.py`.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ROOTS = ("__main__.py", "components", "fabctl", "policies", "benchmarks")
PACKAGE_ROOTS = {"policies": "policies"}
"""Folders whose packages are imported by their own names (the policy pack runs in policies/: `import rules`)."""
LONGEST = 600
"""The most lines a module may have."""


def program_files(project: Path = PROJECT) -> list[Path]:
    files: list[Path] = []
    for root in ROOTS:
        path = project / root
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.py")) if "__pycache__" not in p.parts)
    return files


def _module_name(path: Path, project: Path) -> str:
    rel = path.relative_to(project)
    for folder in PACKAGE_ROOTS:
        if rel.parts[0] == folder:
            rel = rel.relative_to(folder)
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class Graph:
    project: Path
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[Path, set[Path]] = field(default_factory=lambda: defaultdict(set))

    def resolve(self, name: str) -> Path | None:
        return self.modules.get(name)


def import_graph(project: Path = PROJECT) -> Graph:
    graph = Graph(project)
    files = program_files(project)
    for path in files:
        graph.modules[_module_name(path, project)] = path
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _module_name(path, project)
        package = own if path.name == "__init__.py" else own.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".") if package else []
                    anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in graph.modules else base for alias in node.names]
            for target in targets:
                found = graph.resolve(target)
                if found is not None and found != path:
                    graph.edges[path].add(found)
    return graph


def circles(graph: Graph) -> list[list[Path]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []
    counter = [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(node: Path) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph.modules.values()):
        if node not in index:
            visit(node)
    return found


def _order(rooms: set[str], arrows: dict[tuple[str, str], int]) -> list[str]:
    """Rooms from the top floor down, so that few arrows run up (Eades-Lin-Smyth: sinks to the bottom, sources to the
    top, else the room with the most weight going out rather than in)."""
    left = set(rooms)
    top: list[str] = []
    bottom: list[str] = []

    def out(room: str) -> int:
        return sum(n for (a, b), n in arrows.items() if a == room and b in left and b != room)

    def into(room: str) -> int:
        return sum(n for (a, b), n in arrows.items() if b == room and a in left and a != room)

    while left:
        changed = True
        while changed:
            changed = False
            for room in sorted(left):
                if out(room) == 0:
                    bottom.insert(0, room)
                    left.discard(room)
                    changed = True
            for room in sorted(left):
                if into(room) == 0:
                    top.append(room)
                    left.discard(room)
                    changed = True
        if left:
            room = max(sorted(left), key=lambda r: out(r) - into(r))
            top.append(room)
            left.discard(room)
    return top + bottom


def upward_imports(graph: Graph) -> list[tuple[Path, Path]]:
    """The imports that run up a floor, folder by folder (rooms: a folder's files and subfolders)."""
    folders: set[Path] = {graph.project}
    for path in graph.modules.values():
        folders.update(p for p in path.parents if graph.project in (p, *p.parents))
    upward: list[tuple[Path, Path]] = []
    for folder in sorted(folders):
        def room(path: Path) -> str | None:
            try:
                rel = path.relative_to(folder)
            except ValueError:
                return None
            return rel.parts[0]

        arrows: dict[tuple[str, str], int] = defaultdict(int)
        between: list[tuple[str, str, Path, Path]] = []
        for source, targets in graph.edges.items():
            a = room(source)
            for target in targets:
                b = room(target)
                if a is not None and b is not None and a != b:
                    arrows[(a, b)] += 1
                    between.append((a, b, source, target))
        if not arrows:
            continue
        rooms = {r for pair in arrows for r in pair}
        floor = {r: i for i, r in enumerate(_order(rooms, arrows))}
        upward.extend((source, target) for a, b, source, target in between if floor[a] > floor[b])
    return sorted(upward)


def long_modules(project: Path = PROJECT) -> dict[Path, int]:
    counts = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in program_files(project)}
    return {path: n for path, n in sorted(counts.items()) if n > LONGEST}


def main() -> None:
    graph = import_graph()
    rel = lambda p: str(p.relative_to(PROJECT))  # noqa: E731
    edges = sum(len(t) for t in graph.edges.values())
    print(f"{len(graph.modules)} modules, {edges} imports")
    found = circles(graph)
    print(f"{len(found)} import circles")
    for group in found:
        print(f"  {len(group)} modules: {', '.join(rel(p) for p in group)}")
    upward = upward_imports(graph)
    print(f"{len(upward)} upward imports")
    for source, target in upward:
        print(f"  {rel(source)} -> {rel(target)}")
    long = long_modules()
    print(f"{len(long)} modules over {LONGEST} lines")
    for path, n in long.items():
        print(f"  {rel(path)}: {n}")


if __name__ == "__main__":
    main()
