"""`fabctl graph`: the site as a Mermaid diagram (docs/graphs/<stack>.md, which the README links)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.commands.common import render_or_report
from fabctl.graph import graph_page
from fabctl.render import PROJECT_DIR


def cmd_graph(args: argparse.Namespace, console: Console, err: Console) -> int:
    plan = render_or_report(args.stack, Path(args.project_dir), err)
    if isinstance(plan, int):
        return plan
    out = Path(args.out) if args.out else PROJECT_DIR / "docs" / "graphs" / f"{args.stack}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(graph_page(plan))
    console.print(f"wrote {out}", highlight=False)
    return 0


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("graph", help="write the site's Mermaid diagram")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    command.add_argument("--out", help="file to write (default docs/graphs/<stack>.md)")
    command.set_defaults(func=cmd_graph)
