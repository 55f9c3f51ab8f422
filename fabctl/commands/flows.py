"""`fabctl flows`: the cross-cluster flow matrix."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fabctl.commands.common import render_or_report
from fabctl.graph import flow_rows


def cmd_flows(args: argparse.Namespace, console: Console, err: Console) -> int:
    plan = render_or_report(args.stack, Path(args.project_dir), err)
    if isinstance(plan, int):
        return plan
    table = Table(title=f"{args.stack}: allowed cross-cluster flows (everything else is denied)")
    for column in ("flow", "from", "to", "port (pods)", "target", "why"):
        table.add_column(column)
    for row in flow_rows(plan):
        table.add_row(*row)
    console.print(table)
    return 0


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("flows", help="print the cross-cluster flow matrix")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    command.set_defaults(func=cmd_flows)
