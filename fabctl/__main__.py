"""Entry point of `python -m fabctl`.

A command that renders the program runs every render (the linked peers' and the stack's, both sides of a diff) in a
child forked from one preloaded renderer (`fabctl.runs.preloaded`), started here first: its imports of the SDK and
the program run while this process imports the CLI, and no render after the first pays for them.
"""

import sys
from contextlib import nullcontext

from fabctl import runs

RENDERING = frozenset({"plan", "check", "report", "mirror", "diff", "graph", "flows", "import", "serving", "access"})
"""The commands that render the stack (`fabctl.commands`): the others start no renderer."""


def run(argv: list[str]) -> int:
    renders = bool(argv) and argv[0] in RENDERING and not {"-h", "--help"} & set(argv)
    with runs.preloaded(eager=True) if renders else nullcontext():
        from fabctl.cli import main

        return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
