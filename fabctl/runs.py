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
import stat
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
    """Whether `project_dir` holds the program this process imported, file for file (its files as they were when it was
    first asked: a file edited since then is another program)."""
    return _program_digest(project_dir) == _own_program_digest()


@functools.cache
def _own_program_digest() -> str:
    """This checkout's program as this process imported it: `python -m fabctl` asks at once (fabctl/__main__.py)."""
    return _program_digest(FABCTL_HOME)


def _program_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for name in PROGRAM_FILES:
        top = root / name
        for path in [top] if top.is_file() else _regular_files(top):
            _add_file(digest, path, root)
    return digest.hexdigest()


def _regular_files(top: Path, ignored: frozenset[str] = frozenset({"__pycache__"})) -> list[Path]:
    """The regular files under `top`, in a stable order: not what a symbolic link points to (an editor's lock file is a
    dangling one), nor a pipe or socket (reading one would wait), nor folders named in `ignored` or tagged as a cache."""
    found = []
    for folder, subfolders, files in os.walk(top):
        if CACHE_TAG in files and Path(folder) != top:
            subfolders[:] = []
            continue
        subfolders[:] = sorted(d for d in subfolders if d not in ignored)
        for name in sorted(files):
            path = Path(folder) / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(path.lstat().st_mode):
                    found.append(path)
    return found


def _add_file(digest: Any, path: Path, root: Path) -> None:
    try:
        content = path.read_bytes()
    except OSError as exc:  # gone or unreadable since it was listed: part of the key as such
        content = f"<{type(exc).__name__}>".encode()
    digest.update(str(path.relative_to(root) if path.is_relative_to(root) else path).encode() + b"\0" + content + b"\0")


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
        self._broken = False
        self._digest: str | None = None

    def serves(self, project_dir: Path) -> bool:
        """Whether `project_dir` holds the program the preloaded process imported: its files as they were when it
        started (a program edited since then is rendered by a fresh process)."""
        self.start()
        return _program_digest(project_dir) == self._digest

    def start(self) -> None:
        """Start the preloaded process (it imports in the background until its first request)."""
        if self._proc is None:
            self._digest = _program_digest(self.project_dir)
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
        """The request run in a forked child, or None when the preloaded process is not usable (then run it afresh).
        The child runs with this process's environment as it is now, as a fresh process would."""
        with self._lock:
            started = time.perf_counter()
            if self._broken or not self._started():
                return None
            assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
            files = {key: Path(self._folder.name) / f"job.{key}" for key in ("stdout", "stderr", "modules")}
            for path in files.values():
                path.unlink(missing_ok=True)  # nothing of the previous request can be read as this one's
            job = {"request": request, "environ": dict(os.environ), **{key: str(path) for key, path in files.items()}}
            try:
                self._proc.stdin.write(json.dumps(job) + "\n")
                self._proc.stdin.flush()
                status = self._proc.stdout.readline().strip()
            except OSError:
                status = ""
            if not status.lstrip("-").isdigit():
                self._stop()  # whatever it says next may be about this request: it is not asked again
                return None
            output = [files[key].read_text(encoding="utf-8") if files[key].exists() else "" for key in ("stdout", "stderr")]
            return Run(int(status), output[0], output[1], time.perf_counter() - started)

    def _stop(self) -> None:
        self._broken = True
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

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
    if _PRELOADED is not None and request.get("program") is None and _PRELOADED.serves(Path(request["project_dir"])):
        preloaded_run = _PRELOADED.run(request)
    return preloaded_run or _fresh(request)


def _cached(folder: Path, request: dict[str, Any]) -> Run:
    before = fingerprint(request)
    key = hashlib.sha256(json.dumps([request, before], sort_keys=True).encode()).hexdigest()
    path = folder / f"{key}.json"
    try:
        tag_cache_folder(folder)
        lock = open(folder / f"{key}.lock", "w")  # noqa: SIM115 (closed below, also when the render fails)
    except OSError as exc:
        _warn_once(folder, exc)
        return _execute(request)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a request another process is running is waited for
        with contextlib.suppress(OSError, ValueError, TypeError):
            return Run(**json.loads(path.read_text(encoding="utf-8")))
        run = _execute(request)
        if _keepable(run) and fingerprint(request) == before:  # nothing it reads changed while it ran
            with contextlib.suppress(OSError):
                write_whole(path, json.dumps(run.__dict__))
        return run


def write_whole(path: Path, text: str) -> None:
    """Write `path` whole or not at all, for the processes and threads that read it meanwhile."""
    handle, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


_WARNED: set[Path] = set()


def _warn_once(folder: Path, exc: OSError) -> None:
    """A cache folder that cannot be used makes every render run, with one line saying why."""
    if folder not in _WARNED:
        _WARNED.add(folder)
        reason = "not a folder" if folder.exists() and not folder.is_dir() else exc.strerror or exc
        print(f"warning: renders are not kept: the render cache {folder} cannot be used ({reason}); "
              "name another with --render-cache DIR or FAB_CACHE_DIR", file=sys.stderr)


def _keepable(run: Run) -> bool:
    """Whether a render is kept: the renderer got to its answer, a render or the program's refusal, as it would every
    time. A renderer that died (killed, out of memory) or a program that crashed (which may depend on the moment) is not."""
    try:
        result = json.loads(run.stdout)
    except ValueError:
        return False
    return isinstance(result, dict) and (result.get("error") or {}).get("kind") != "crash"


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
    """What a render reads beyond its request, as one digest: every regular file of the project but those in IGNORED
    folders and the stack files (whose config is in the request); any file a config value names (a CA bundle, wherever
    it is); the environment (a render's process gets it as it is: the program reads `KEYCLOAK_CLIENT_ID`, and Pulumi's
    config falls back to `PULUMI_CONFIG_<KEY>`) but for the shell's and the tools' own variables (`_volatile`); the
    recorder (fabctl/_mockrun.py); Python's version and the installed packages (their dist-info names carry their
    versions). A cached render is read back only when all of these are as they were."""
    root = Path(request["project_dir"])
    digest = hashlib.sha256(sys.version.encode())
    for path in _regular_files(root, IGNORED):
        if path.suffix != ".pyc" and not (path.name.startswith("Pulumi.") and path.suffix == ".yaml" and path.name != "Pulumi.yaml"):
            _add_file(digest, path, root)
    for named in _named_files(request, root):
        _add_file(digest, named, root)
    _add_file(digest, FABCTL_HOME / "fabctl" / "_mockrun.py", FABCTL_HOME)
    digest.update(json.dumps(sorted((k, v) for k, v in os.environ.items() if not _volatile(k))).encode())
    digest.update("\n".join(_installed()).encode())
    return digest.hexdigest()


VOLATILE = frozenset({"_", "PWD", "OLDPWD", "SHLVL", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "COLUMNS",
                      "LINES", "PS1", "PS2", "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTCONTROL", "LS_COLORS", "WINDOWID",
                      "DISPLAY", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKE_TERMOUT", "MAKE_TERMERR"})
"""Variables of the shell, the terminal and make, which no render reads: left out of a render's key (with
VOLATILE_PREFIXES), so that a render is found again from another shell, terminal or test."""
VOLATILE_PREFIXES = ("PYTEST_", "FAB_", "SSH_", "TMUX")
"""pytest's variables (the current test's name changes with every test), fabctl's and the tests' own settings (the
program reads no FAB_ variable, a test says so: its pods' scripts do, which it writes out as text), and the terminal
sessions'."""


def _volatile(name: str) -> bool:
    return name in VOLATILE or name.startswith(VOLATILE_PREFIXES)


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
            if stat.S_ISREG(path.stat().st_mode):
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
