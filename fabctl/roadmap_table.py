"""The required criteria of docs/roadmap.md ("Required criteria and waivers"), generated from fabctl/verify/gates.py.

The page's prose is written by hand; the table between the markers is rewritten by `python -m fabctl.roadmap_table` and
checked by `--check`, so what the page says a phase requires is what `fabctl verify` holds the phase to: one row per
REQUIREMENTS entry, phase by phase, with the criterion ids it stands for, what passing proves and where it is required.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fabctl import generated_block
from fabctl.generated_block import with_block
from fabctl.runs import FABCTL_HOME
from fabctl.verify.gates import REQUIREMENTS, Requirement

PAGE = FABCTL_HOME / "docs" / "roadmap.md"
COMMAND = "python -m fabctl.roadmap_table"


def _cell(text: str) -> str:
    if "|" in text or "\n" in text:
        raise ValueError(f"{text!r} has a '|' or a line break, which would break the table's row")
    return text


def generated_table(requirements: tuple[Requirement, ...] = REQUIREMENTS) -> str:
    """One row per required criterion family: phase, criterion ids, what passing proves, where the phase requires it."""
    lines = ["| phase | criteria | proves | required on |", "|---|---|---|---|"]
    for r in requirements:
        lines.append(f"| {r.phase:02d} | `{r.ids}` | {_cell(r.proves)} | {_cell(r.when)} |")
    return "\n".join(lines)


def with_table(page: str, requirements: tuple[Requirement, ...] = REQUIREMENTS) -> str:
    return with_block(page, COMMAND, generated_table(requirements), "docs/roadmap.md")


def main(argv: list[str] | None = None, page: Path = PAGE) -> int:
    """Write, or with `--check` only check, the page's table; 1 when `--check` finds it stale."""
    return generated_block.main(argv, page, COMMAND, "write docs/roadmap.md's required criteria from fabctl/verify/gates.py",
                                with_table, "roadmap table")


if __name__ == "__main__":
    sys.exit(main())
