"""How a render request runs (DESIGN section 5.1): in a fresh interpreter, forked from a preloaded one, or from a cache.

Every render is `fabctl._mockrun` with one request. By default it runs in a fresh Python process, so that Pulumi's
global runtime state never leaks between renders and what a render costs is measured alone (the benchmarks).
Two opt-in layers make many renders in one session cheaper without changing what they return:

- `preloaded()`: a renderer process that imports the SDK and the program's own imports once, and forks a child per
  request. The child starts from the same clean state as a fresh process (the preloaded parent never runs a program),
  so only the imports are saved: about half of a small site's render. Used for this checkout's program only, or a copy
  of it file for file (`same_program`); another program (a git ref's, a changed copy) and the benchmarks' floor run in
  a fresh process. `fabctl`'s commands and the tests use it.
- `cached(folder)`: each distinct request is run once, and its output kept in `folder`, which several processes may
  share (the test session's workers, a user's `fabctl` runs): a request another process is running is waited for, not
  run twice. A render is kept under its request and everything else it reads (`fingerprint`: the program's files, the
  files the config names, the recorder, Python and the installed packages), so a change to any of them is a new render.

`FAB_REGISTRATION_ORDER=<seed>` perturbs every render's registration order (`perturbed`), within what Pulumi may do.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FABCTL_HOME = Path(__file__).resolve().parent.parent
ORDER_VARIABLE = "FAB_REGISTRATION_ORDER"
"""Set to a seed (any text), every render's resources come in another order Pulumi could have registered them in."""


PROGRAM_FILES = ("__main__.py", "components")
"""What the program is made of: its entry point and its package (the config model among it)."""


def same_program(project_dir: Path) -> bool:
    """Whether `project_dir` holds this checkout's program, file for file."""
    if project_dir.resolve() == FABCTL_HOME:
        return True
    return _program_digest(project_dir) == _own_program_digest()


@functools.cache
def _own_program_digest() -> str:
    """This checkout's program, whose modules this process has imported (and keeps, whatever happens to the files)."""
    return _program_digest(FABCTL_HOME)


def _program_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for name in PROGRAM_FILES:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in paths:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class Run:
    """What the renderer process did with one request: its exit status, its output (one JSON document) and its errors."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    """Wall time, the process start included."""


def _fresh(request: dict[str, Any]) -> Run:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabctl._mockrun"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=str(FABCTL_HOME),  # the child imports fabctl from here and the program from the request's project_dir
    )
    stdout, stderr = proc.communicate(json.dumps(request))
    return Run(proc.returncode, stdout, stderr, time.perf_counter() - started)


class _Preloaded:
    """A `python -m fabctl._mockrun --preloaded`, started when first needed: one request at a time, each in a child
    forked from it."""

    def __init__(self, project_dir: Path):
        self.project_dir = project_dir
        self._lock = threading.Lock()
        self._folder = tempfile.TemporaryDirectory(prefix="fab-render-")
        self._proc: subprocess.Popen[str] | None = None
        self._ready: bool | None = None

    def start(self) -> None:
        """Start the preloaded process (it imports in the background until its first request)."""
        if self._proc is None:
            log = open(Path(self._folder.name) / "preloaded.log", "w", encoding="utf-8")  # noqa: SIM115 (its own process keeps it)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "fabctl._mockrun", "--preloaded", str(self.project_dir)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, text=True, cwd=str(FABCTL_HOME),
            )
            log.close()

    def _started(self) -> bool:
        """Whether the preloaded process got through its imports (asked once, when the first request needs it)."""
        self.start()
        assert self._proc is not None
        if self._ready is None:
            self._ready = (self._proc.stdout.readline().strip() if self._proc.stdout else "") == "ready"
        return self._ready and self._proc.poll() is None

    def run(self, request: dict[str, Any]) -> Run | None:
        """The request run in a forked child, or None when the preloaded process is not usable (then run it afresh)."""
        with self._lock:
            started = time.perf_counter()
            if not self._started():
                return None
            assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
            files = {key: Path(self._folder.name) / f"job.{key}" for key in ("stdout", "stderr", "modules")}
            for path in files.values():
                path.unlink(missing_ok=True)  # nothing of the previous request can be read as this one's
            job = {"request": request, **{key: str(path) for key, path in files.items()}}
            try:
                self._proc.stdin.write(json.dumps(job) + "\n")
                self._proc.stdin.flush()
                status = self._proc.stdout.readline().strip()
            except OSError:
                return None
            if not status.lstrip("-").isdigit():
                return None
            output = [files[key].read_text(encoding="utf-8") if files[key].exists() else "" for key in ("stdout", "stderr")]
            return Run(int(status), output[0], output[1], time.perf_counter() - started)

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                if self._proc.stdin:
                    self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._folder.cleanup()


_PRELOADED: _Preloaded | None = None
_CACHE: Path | None = None


@contextlib.contextmanager
def preloaded(eager: bool = False) -> Iterator[None]:
    """Renders of this checkout's program within the block fork from one preloaded renderer, started for the first
    render, or at once with `eager` (its imports then overlap whatever the caller does before its first render)."""
    global _PRELOADED
    outer, _PRELOADED = _PRELOADED, _Preloaded(FABCTL_HOME)
    if eager:
        _PRELOADED.start()
    try:
        yield
    finally:
        _PRELOADED.close()
        _PRELOADED = outer


@contextlib.contextmanager
def cached(folder: Path | None) -> Iterator[None]:
    """Within the block each distinct request runs once across every process using `folder` (see the module's doc);
    None: every request runs."""
    global _CACHE
    outer, _CACHE = _CACHE, folder
    try:
        yield
    finally:
        _CACHE = outer


@contextlib.contextmanager
def fresh() -> Iterator[None]:
    """Within the block every request runs in a fresh process, whatever layers are active outside it."""
    global _PRELOADED, _CACHE
    outer = _PRELOADED, _CACHE
    _PRELOADED, _CACHE = None, None
    try:
        yield
    finally:
        _PRELOADED, _CACHE = outer


def _execute(request: dict[str, Any]) -> Run:
    preloaded_run = None
    if _PRELOADED is not None and request.get("program") is None and same_program(Path(request["project_dir"])):
        preloaded_run = _PRELOADED.run(request)
    return preloaded_run or _fresh(request)


def _cached(folder: Path, request: dict[str, Any]) -> Run:
    key = hashlib.sha256(json.dumps([request, fingerprint(request)], sort_keys=True).encode()).hexdigest()
    path = folder / f"{key}.json"
    tag_cache_folder(folder)
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a request another process is running is waited for
        if path.exists():
            return Run(**json.loads(path.read_text(encoding="utf-8")))
        run = _execute(request)
        if _finished(run):
            partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps(run.__dict__), encoding="utf-8")
            partial.replace(path)
        return run


def _finished(run: Run) -> bool:
    """Whether the renderer got to its answer (a render, or the program's refusal or crash, as it would every time);
    a renderer that died (killed, out of memory) is not kept."""
    try:
        return isinstance(json.loads(run.stdout), dict)
    except ValueError:
        return False


def run(request: dict[str, Any]) -> Run:
    """Run one render request as the active layers say (`preloaded`, `cached`), else in a fresh process. Only the
    project's own program is kept: a program given in its place (the benchmarks' floor) reads more than its request."""
    if _CACHE is not None and request.get("program") is None:
        return _cached(_CACHE, request)
    return _execute(request)


IGNORED = frozenset({".git", "venv", ".venv", ".checkov-venv", "out", "tests", "docs", "__pycache__", ".pytest_cache",
                     ".hypothesis", ".ci", ".github", "benchmarks"})
"""Folders of a project that a render does not read: its history, virtual environments, outputs, tests and docs."""


def fingerprint(request: dict[str, Any]) -> str:
    """What a render reads beyond its request, as one digest: every file of the project but those in IGNORED folders and
    the stack files (whose config is in the request); any file a config value names (a CA bundle, wherever it is); the
    recorder (fabctl/_mockrun.py); Python's version and the installed packages (their dist-info names carry their
    versions). A cached render is read back only when all of these are as they were."""
    root = Path(request["project_dir"])
    digest = hashlib.sha256(sys.version.encode())
    for path in _project_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for named in _named_files(request, root):
        digest.update(str(named).encode() + b"\0" + named.read_bytes() + b"\0")
    digest.update((FABCTL_HOME / "fabctl" / "_mockrun.py").read_bytes())
    digest.update("\n".join(_installed()).encode())
    return digest.hexdigest()


CACHE_TAG = "CACHEDIR.TAG"
"""The Cache Directory Tagging Specification's file (https://bford.info/cachedir/): a folder holding it is a cache, which
backup tools skip, and so does `fingerprint` (a cache kept inside a project would otherwise change what it is keyed by)."""
CACHE_TAG_TEXT = "Signature: 8a477f597d28d172789f06886806bc55\n# fabctl's cache of renders: safe to delete.\n"


def tag_cache_folder(folder: Path) -> None:
    """Create the folder, marked as a cache."""
    folder.mkdir(parents=True, exist_ok=True)
    tag = folder / CACHE_TAG
    if not tag.exists():
        tag.write_text(CACHE_TAG_TEXT, encoding="ascii")


def _project_files(root: Path) -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(root):
        if CACHE_TAG in files and Path(folder) != root:
            subfolders[:] = []
            continue
        subfolders[:] = sorted(d for d in subfolders if d not in IGNORED)
        for name in sorted(files):
            if not name.endswith(".pyc") and not (name.startswith("Pulumi.") and name.endswith(".yaml") and name != "Pulumi.yaml"):
                found.append(Path(folder) / name)
    return found


def _named_files(request: dict[str, Any], root: Path) -> list[Path]:
    """The files the config's values name (relative to the project, as the program reads them, or absolute)."""
    values: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and 0 < len(value) < 4096 and "\n" not in value:
            values.append(value)

    for text in request.get("config", {}).values():
        try:
            walk(json.loads(text))
        except ValueError:
            walk(text)
    named = []
    for value in sorted(set(values)):
        with contextlib.suppress(OSError, ValueError):
            path = root / value
            if path.is_file():
                named.append(path)
    return named


def _installed() -> list[str]:
    return sorted(entry for folder in sys.path if folder.endswith("site-packages") and os.path.isdir(folder)
                  for entry in os.listdir(folder) if entry.endswith(".dist-info"))


def perturbed(resources: list[dict[str, Any]], seed: str) -> list[dict[str, Any]]:
    """The resources in another order Pulumi could register them in: a random topological order, in which every
    resource still comes after its parent, its provider and what it depends on (explicitly or through its inputs), the
    only orders the engine guarantees. Deterministic for a seed and the same resources."""
    by_urn = {r["urn"]: r for r in sorted(resources, key=lambda r: r["urn"])}  # the same order for the same resources
    needs: dict[str, set[str]] = {}
    for r in by_urn.values():
        before = {r.get("parent"), r.get("provider"), *r.get("dependencies", []),
                  *(u for urns in (r.get("property_dependencies") or {}).values() for u in urns)}
        needs[r["urn"]] = {u for u in before if u in by_urn and u != r["urn"]}
    waiting = {urn: len(before) for urn, before in needs.items()}
    unblocks: dict[str, list[str]] = {urn: [] for urn in by_urn}
    for urn, before in needs.items():
        for other in sorted(before):
            unblocks[other].append(urn)
    rng = random.Random(f"{seed}:{len(by_urn)}:{next(iter(by_urn), '')}")
    ready = [urn for urn in by_urn if waiting[urn] == 0]
    order: list[dict[str, Any]] = []
    while ready:
        urn = ready.pop(rng.randrange(len(ready)))
        order.append(by_urn[urn])
        for after in unblocks[urn]:
            waiting[after] -= 1
            if waiting[after] == 0:
                ready.append(after)
    if len(order) != len(resources):  # a cycle, which a render cannot produce: keep the order as it came
        return resources
    return order


def registration_order_seed() -> str | None:
    return os.environ.get(ORDER_VARIABLE) or None
