"""`python -m benchmarks`: what a render costs, how it grows, and how long a first deploy must wait.

Prints one table (method and figures: docs/performance.md) and exits 1 if a figure is over its limit:
- each stack file rendered `--repeat` times: median wall time and peak memory, against the SDK floor
  (benchmarks/floor.py: the same resources registered with no logic); program / floor at most 1.3;
- generated sites growing in teams, models and GPU clusters: time and memory per resource, above the
  cost of a process that only imports the SDK, at most 25% over the smallest scale's (linear growth);
- the deploy critical path of each stack against its inherent chain: at most one step longer;
- the deploy check of each stack (`fabctl check`: every release through Helm, then the rules) against
  its render: at most x3 (needs the chart packages and Helm: FAB_CHART_DIR and FAB_HELM, or ../shared).
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.critical_path import Path as Chain
from benchmarks.critical_path import chain_exists, critical_path
from benchmarks.scale import DIMENSIONS
from components.config import parse_site
from fabctl.check import ValuesCheck, check
from fabctl.helm import ChartPackages, render_releases
from fabctl.render import PROJECT_DIR, Plan, RenderStats, render_config, with_secret_stand_ins
from fabctl.stackfile import SITE_KEY, read_stack_config, stack_file, stack_names

FLOOR_PROGRAM = Path(__file__).resolve().parent / "floor.py"
FLOOR_RATIO_LIMIT = 1.3
GROWTH_LIMIT = 1.25
EXTRA_STEPS_LIMIT = 1
CHECK_RATIO_LIMIT = 3.0
SHARED = PROJECT_DIR.parent / "shared"

INHERENT_CHAIN = [
    # The steps a first deploy cannot avoid, each needing the one before it (the longest such chain in both stacks):
    "storage-postgres-backup-policy",  # the backup credentials' MinIO policy,
    "storage-postgres-backup-policy-attachment",  # attached to their user (keys are handed out only once they work),
    "storage-s3-postgres-backup-storage-polaris",  # the keys' Secret, which the Postgres cluster archives with,
    "storage-polaris-db",  # the Postgres cluster Polaris stores its catalog in,
    "storage-job-polaris-bootstrap",  # the schema bootstrap, which needs the database,
    "storage-polaris",  # Polaris, which starts on the bootstrapped schema,
    "storage-job-polaris-setup",  # the catalog setup, which needs Polaris' management API,
]
TEAM_CHAIN = [
    "storage-job-polaris-team-{team}",  # a training team's own principal, on the catalog roles the setup made,
    "storage-polaris-training-gpu-team-{team}",  # and the Secret that hands its keys to the team's namespace.
]


def inherent_chain(plan: Plan) -> list[str]:
    """INHERENT_CHAIN, then TEAM_CHAIN for the stack's first training team (by name)."""
    prefix = TEAM_CHAIN[0].split("{", 1)[0]
    teams = sorted(r["name"].removeprefix(prefix) for r in plan.resources if r["name"].startswith(prefix) and r["custom"])
    return [*INHERENT_CHAIN, *(step.format(team=teams[0]) for step in TEAM_CHAIN)] if teams else list(INHERENT_CHAIN)


@dataclass
class Row:
    benchmark: str
    case: str
    resources: int
    seconds: float
    peak_mib: float
    figure: str
    limit: str
    ok: bool


def medians(plans: list[Plan]) -> RenderStats:
    return RenderStats(
        seconds=statistics.median(p.stats.seconds for p in plans),
        peak_rss_mib=statistics.median(p.stats.peak_rss_mib for p in plans),
        cpu_seconds=statistics.median(p.stats.cpu_seconds for p in plans),
    )


def floor_renderer(plan: Plan) -> Callable[[], Plan]:
    """A render of benchmarks/floor.py replaying `plan`'s resources under the same mock renderer."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="fab-floor-", delete=False) as handle:
        json.dump(plan.resources, handle)
    atexit.register(os.unlink, handle.name)
    os.environ["FAB_FLOOR_PLAN"] = handle.name  # inherited by the renderer's child process

    def render_floor() -> Plan:
        floor = render_config(plan.stack, {}, program=FLOOR_PROGRAM)
        if {r["urn"] for r in floor.resources} != {r["urn"] for r in plan.resources}:
            raise SystemExit(f"the floor of {plan.stack} did not register the program's resources: fix benchmarks/floor.py")
        return floor

    return render_floor


def stack_rows(stack: str, repeat: int) -> tuple[Plan, list[Row]]:
    """Program and floor renders alternate, so that a slower moment of the machine weighs on both alike."""
    config, _ = with_secret_stand_ins(read_stack_config(stack_file(PROJECT_DIR, stack)))
    program = [render_config(stack, config)]
    render_floor = floor_renderer(program[0])
    floor = [render_floor()]
    for _ in range(repeat - 1):
        program.append(render_config(stack, config))
        floor.append(render_floor())
    ratio = statistics.median(p.stats.seconds / f.stats.seconds for p, f in zip(program, floor))
    memory = statistics.median(p.stats.peak_rss_mib / f.stats.peak_rss_mib for p, f in zip(program, floor))
    stats, floor_stats = medians(program), medians(floor)
    n = len(program[0].resources)
    return program[0], [
        Row("render", stack, n, stats.seconds, stats.peak_rss_mib, f"the program; CPU {stats.cpu_seconds:.2f} s", "", True),
        Row("render", f"{stack} floor", n, floor_stats.seconds, floor_stats.peak_rss_mib,
            f"same resources, no logic; CPU {floor_stats.cpu_seconds:.2f} s", "", True),
        Row("program / floor", stack, n, stats.seconds, stats.peak_rss_mib, f"time x{ratio:.2f}, memory x{memory:.2f} (median of pairs)",
            f"time <= x{FLOOR_RATIO_LIMIT}", ratio <= FLOOR_RATIO_LIMIT),
    ]


def baseline(repeat: int) -> RenderStats:
    """A renderer process that imports the SDK and registers nothing: the fixed cost taken off growth figures."""
    render_empty = floor_renderer(Plan(stack="site-a", resources=[]))
    return medians([render_empty() for _ in range(repeat)])


def growth_rows(repeat: int, base: RenderStats) -> list[Row]:
    rows = []
    for dimension, (stack, grow, scales) in DIMENSIONS.items():
        config, _ = with_secret_stand_ins(read_stack_config(stack_file(PROJECT_DIR, stack)))
        first: tuple[float, float] | None = None
        for scale in scales:
            grown = {**config, SITE_KEY: grow(config[SITE_KEY], scale)}
            plans = [render_config(stack, grown) for _ in range(repeat)]
            stats, n = medians(plans), len(plans[0].resources)
            per_resource = ((stats.seconds - base.seconds) / n, (stats.peak_rss_mib - base.peak_rss_mib) / n)
            first = first or per_resource
            growth = (per_resource[0] / first[0], per_resource[1] / first[1])
            rows.append(Row(
                f"growth: {dimension}", f"{stack}, {scale} {'more ' if dimension == 'teams' else ''}{dimension}", n, stats.seconds,
                stats.peak_rss_mib, f"{per_resource[0] * 1000:.2f} ms, {per_resource[1] * 1024:.0f} KiB per resource "
                f"(x{growth[0]:.2f}, x{growth[1]:.2f})", f"each <= x{GROWTH_LIMIT}", max(growth) <= GROWTH_LIMIT,
            ))
    return rows


def check_row(plan: Plan) -> Row | None:
    """Wall time of the deploy check (Helm renders of every release, then every rule) against the stack's render."""
    charts = Path(os.environ.get("FAB_CHART_DIR") or SHARED / "charts")
    helm = Path(os.environ.get("FAB_HELM") or SHARED / "tools" / "helm")
    if not (charts / "index.json").is_file() or not helm.is_file():
        return None
    with contextlib.chdir(PROJECT_DIR):
        site = parse_site(read_stack_config(stack_file(PROJECT_DIR, plan.stack))[SITE_KEY])
    started = time.perf_counter()
    releases, missing = render_releases(plan, ChartPackages(charts), helm, PROJECT_DIR)
    helm_seconds = time.perf_counter() - started
    report = check(plan, site, releases, missing, ValuesCheck(helm, PROJECT_DIR))
    seconds = time.perf_counter() - started
    ratio = seconds / plan.stats.seconds
    return Row("deploy check", plan.stack, report.objects, seconds, 0.0,
               f"x{ratio:.2f} the render: Helm {helm_seconds:.1f} s for {len(releases)} releases, rules and chart values "
               f"{report.seconds:.1f} s; {len(report.errors)} errors", f"<= x{CHECK_RATIO_LIMIT}", ratio <= CHECK_RATIO_LIMIT)


def critical_path_row(plan: Plan) -> Row:
    path = critical_path(plan)
    inherent = Chain(tuple(_urn(plan, name) for name in inherent_chain(plan)))
    if not chain_exists(plan, list(inherent.urns)):
        raise SystemExit(f"the inherent chain is not a dependency chain of {plan.stack}: update INHERENT_CHAIN in benchmarks/run.py")
    listed = "\n".join(f"{i}. {_short(urn)}" for i, urn in enumerate(path.urns, 1))
    return Row("critical path", plan.stack, len(plan.resources), 0.0, 0.0, f"{path.length} steps (inherent {inherent.length}):\n{listed}",
               f"<= {inherent.length + EXTRA_STEPS_LIMIT} steps", path.length <= inherent.length + EXTRA_STEPS_LIMIT)


def _urn(plan: Plan, name: str) -> str:
    matches = [r["urn"] for r in plan.resources if r["name"] == name and r["custom"]]
    if len(matches) != 1:
        raise SystemExit(f"INHERENT_CHAIN names {name!r}, which is {len(matches)} resources of {plan.stack}")
    return matches[0]


def _short(urn: str) -> str:
    type_, name = urn.split("::")[2:4]
    return f"{type_.rsplit('$', 1)[-1]} {name}"


def table(rows: list[Row]) -> Table:
    out = Table(title="fab-platform render benchmarks", show_lines=True)
    for column, justify in [("benchmark", "left"), ("case", "left"), ("resources", "right"), ("median time", "right"),
                            ("peak memory", "right"), ("figure", "left"), ("limit", "left"), ("result", "left")]:
        out.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        timed = bool(row.seconds)
        out.add_row(row.benchmark, row.case, str(row.resources), f"{row.seconds:.2f} s" if timed else "",
                    f"{row.peak_mib:.0f} MiB" if timed else "", row.figure, row.limit,
                    "" if not row.limit else ("[green]ok[/]" if row.ok else "[red]over[/]"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="renders per stack file and per floor (median); default 5")
    parser.add_argument("--growth-repeat", type=int, default=3, help="renders per generated site (median); default 3")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.growth_repeat < 1:
        parser.error("--repeat and --growth-repeat must be at least 1")

    # Measure installed code: Python caches bytecode on a first import, unless PYTHONDONTWRITEBYTECODE is
    # set (as in some CI images); compile once here so that no render pays for compiling the program.
    for package in ("components", "fabctl", "benchmarks"):
        compileall.compile_dir(PROJECT_DIR / package, quiet=1)
    rows: list[Row] = []
    plans = []
    for stack in stack_names(PROJECT_DIR):
        plan, stack_table = stack_rows(stack, args.repeat)
        plans.append(plan)
        rows.extend(stack_table)
    rows.extend(growth_rows(args.growth_repeat, baseline(args.repeat)))
    rows.extend(critical_path_row(plan) for plan in plans)
    checked = [row for row in (check_row(plan) for plan in plans) if row is not None]
    if not checked:
        print("deploy check not measured: no chart packages and Helm (set FAB_CHART_DIR and FAB_HELM)", file=sys.stderr)
    rows.extend(checked)

    Console(width=200).print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=2) + "\n", encoding="utf-8")
    return 0 if all(row.ok for row in rows) else 1
