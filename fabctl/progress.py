"""What a long `fabctl` command is doing, and how long each of its phases took.

`plan`, `check`, `report` and `mirror` run in phases (the render, the policy pack, Helm's renders of every release, the
check's rules, the chart-value trials of every release). `Phases` times each one; on a terminal it also shows a rich
progress bar per phase on stderr (a bar per release where a phase goes release by release), which disappears when the
phase is done, and the command ends with one line (`done()`): `plan site-a: 42.1 s (render 3.2 s, policies 6.0 s, ...)`.
When stderr is not a terminal (tests, CI logs) nothing is shown and nothing is printed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text


class _Count(MofNCompleteColumn):
    """`done/total` where a phase counts items; nothing where it does not (the render, the policy pack)."""

    def render(self, task: Task) -> Text:
        return super().render(task) if task.total is not None else Text("")


Advance = Callable[[str], None]
"""Called once per item of a phase (a release rendered, a release's chart values tried), with what was done."""


class Phases:
    """Times the phases of one command (`with phases.phase(name, total):`), showing them on a terminal."""

    def __init__(self, console: Console | None = None, title: str = ""):
        self.title = title
        self.console = console
        self.shown = console is not None and console.is_terminal
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._said = False
        self._bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), _Count(),
                              TimeElapsedColumn(), TextColumn("[dim]{task.fields[doing]}"), console=console, transient=True,
                              disable=not self.shown)

    def __enter__(self) -> Self:
        self._started = time.perf_counter()
        self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bars.stop()

    def done(self) -> None:
        """The command has done its work: on a terminal, say how long it took (once)."""
        self._bars.stop()
        if self.shown and self.console is not None and not self._said:
            self.console.print(self.line(), markup=False, highlight=False)
        self._said = True

    @contextlib.contextmanager
    def phase(self, name: str, total: int | None = None) -> Iterator[Advance]:
        """Time the block as phase `name` (added up when a phase runs more than once); `total` items, each reported by
        calling what the block is given."""
        task = self._bars.add_task(name, total=total, doing="")
        with self._lock:
            self.seconds.setdefault(name, 0.0)
        started = time.perf_counter()

        def advance(doing: str = "") -> None:
            self._bars.update(task, advance=1, doing=doing)

        try:
            yield advance
        finally:
            with self._lock:
                self.seconds[name] += time.perf_counter() - started
            self._bars.remove_task(task)

    @property
    def total(self) -> float:
        return time.perf_counter() - self._started

    def line(self) -> str:
        """`<title>: <total> s (<phase> <seconds> s, ...)`, phases in the order they started."""
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.seconds.items())
        return f"{self.title}: {self.total:.1f} s" + (f" ({parts})" if parts else "")
