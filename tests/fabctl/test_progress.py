"""What a long fabctl command shows while it works (on a terminal only) and the timing it ends with."""

from __future__ import annotations

import io
import re

from rich.console import Console

from fabctl.progress import Phases


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=200), out


def test_the_timing_names_each_phase_in_the_order_it_started():
    with Phases(title="check site-t") as phases:
        with phases.phase("render"):
            pass
        with phases.phase("Helm renders", total=2) as advance:
            advance("site-t-gpu kueue")
            advance("site-t-gpu cilium")
    assert re.fullmatch(r"check site-t: \d+\.\d s \(render \d+\.\d s, Helm renders \d+\.\d s\)", phases.line())


def test_nothing_is_shown_or_said_when_stderr_is_not_a_terminal():
    console, out = _console(terminal=False)
    with Phases(console, "check site-t") as phases:
        with phases.phase("Helm renders", total=1) as advance:
            advance("site-t-gpu kueue")
        phases.done()
    assert out.getvalue() == ""


def test_on_a_terminal_the_command_ends_with_its_timing_once():
    console, out = _console(terminal=True)
    with Phases(console, "check site-t") as phases:
        with phases.phase("Helm renders", total=1) as advance:
            advance("site-t-gpu kueue")
        phases.done()
        phases.done()
    lines = [line for line in re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue()).replace("\r", "\n").splitlines() if line.strip()]
    assert re.fullmatch(r"check site-t: \d+\.\d s \(Helm renders \d+\.\d s\)", lines[-1])
    assert sum(line.startswith("check site-t: ") for line in lines) == 1
