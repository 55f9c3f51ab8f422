"""`python -m benchmarks`: what a render costs, how it grows, and how long a first deploy must wait.

Prints one table (method and figures: docs/performance.md) and exits 1 if a figure is over its limit:
- each stack file rendered against the SDK floor (benchmarks/floor.py: the same resources registered with
  no logic, under the same process settings), in alternating pairs: program / floor in CPU time and wall
  time, min and median of the pairs; CPU median at most FLOOR_CPU_RATIO_LIMIT, memory MEMORY_RATIO_LIMIT;
- generated sites growing in teams, models and GPU clusters, paired with their floors in the same way
  (at LARGE_SITE, CPU median at most LARGE_SITE_CPU_RATIO_LIMIT), and the CPU each added resource costs
  against what it costs the floor (from two sizes), at most MARGINAL_RATIO_LIMIT: growth is the SDK's;
- the deploy critical path of each stack against its inherent chain: at most one step longer; weighted by what
  Pulumi waits for on each step (benchmarks/critical_path.py), no heavier than the inherent chain;
- the deploy check of each stack as a user runs it (`python -m fabctl check --stack S`: the render of the stack and of
  its linked peers, every release through Helm, the rules and the chart-value trials), end to end: cold (an empty
  render cache) at most CHECK_COLD_LIMIT_SEC, warm (the same command again) at most CHECK_WARM_LIMIT_SEC (needs the
  chart packages and Helm: FAB_CHART_DIR and FAB_HELM, or ../shared);
- with `--only suite` (not part of the default run: it runs the whole test suite), `make test` as CI runs it: its wall
  time at most SUITE_WALL_LIMIT_SEC (benchmarks/suite.py), and its tests' time per directory.
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from benchmarks.critical_path import Path as Chain
from benchmarks.critical_path import chain_exists, critical_path, needless_waits, weight, weighted_path
from benchmarks.scale import DIMENSIONS
from benchmarks.suite import SUITE_WALL_LIMIT_SEC, run_suite
from fabctl.render import PROJECT_DIR, Plan, RenderStats, linked_stack_outputs, render_config, with_secret_stand_ins
from fabctl.stackfile import SITE_KEY, read_stack_config, stack_file, stack_names

FLOOR_PROGRAM = Path(__file__).resolve().parent / "floor.py"
SHARED = PROJECT_DIR.parent / "shared"

FLOOR_CPU_RATIO_LIMIT = 1.25
"""A stack file's render may cost at most 25% more CPU than its floor (median of the pairs): that margin is all
the program may spend on its own imports (the config model, the components) and on building its inputs."""
LARGE_SITE_CPU_RATIO_LIMIT = 1.05
"""At LARGE_SITE the program's fixed cost is spread over thousands of resources and what is left is per resource:
at most 5% more CPU than the floor (median of the pairs)."""
LARGE_SITE = ("teams", 256)
"""The generated site LARGE_SITE_CPU_RATIO_LIMIT applies to (a dimension of benchmarks/scale.py and one of its
scales): 256 teams more than site-a, about 13,400 resources."""
MEMORY_RATIO_LIMIT = 1.10
"""In every pairing (stack files and generated sites), the program's peak resident memory at most 10% over its
floor's (median of the pairs)."""
MARGINAL_RATIO_LIMIT = 1.25
"""A resource a generated site adds (from its dimension's smallest scale) may cost at most 25% more CPU than the
same resource costs the floor: more would be the program's own work growing with the site, faster than linearly
where the ratio rises with scale."""
EXTRA_STEPS_LIMIT = 1
"""The deploy critical path may be at most this many steps longer than the inherent chain."""
CHECK_COLD_LIMIT_SEC = 30.0
"""`python -m fabctl check --stack S` with an empty render cache, from the process start to its exit: at most 30 s of
wall time on 2 cores (issue 35): the stack's render and its linked peers', every release through Helm, the rules and
every chart-value trial."""
CHECK_WARM_LIMIT_SEC = 5.0
"""The same command again, the Helm renders and value trials read back from the render cache: at most 5 s end to end,
the process start and the renders of the stack and of its linked peers included (issue 35)."""

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
OPERATOR_FIRST_CHAIN = [
    # The chain a first deploy cannot avoid when each step is weighted by what Pulumi waits for on it (the weighted
    # critical path): the same database chain, starting from the operator whose CRD the database is an instance of:
    "storage-ns-cnpg-system",  # CloudNativePG's namespace,
    "storage-cnpg",  # its chart, which installs the Cluster CRD and the operator that reconciles it (waits for readiness),
    *INHERENT_CHAIN[INHERENT_CHAIN.index("storage-polaris-db"):],  # then the Postgres cluster, schema, Polaris, setup.
]
TEAM_CHAIN = [
    "storage-job-polaris-team-{team}",  # a training team's own principal, on the catalog roles the setup made,
    "storage-polaris-training-gpu-team-{team}",  # and the Secret that hands its keys to the team's namespace.
]
CONNECT_CHAIN = [
    # With Spark Connect, the team's own server is the longer end: it starts on the team's keys.
    "storage-job-polaris-team-{team}",  # a training team's own principal, on the catalog roles the setup made,
    "storage-polaris-training-compute-spark-team-{team}",  # the Secret that hands its keys to its Spark Connect namespace,
    "compute-spark-connect-{team}",  # and the team's Spark Connect server, whose pods mount it (Pulumi waits for them).
]


def inherent_chain(plan: Plan, chain: Sequence[str] = tuple(INHERENT_CHAIN)) -> list[str]:
    """`chain` (INHERENT_CHAIN or OPERATOR_FIRST_CHAIN), then, for the stack's first training team (by name), CONNECT_CHAIN
    where the team has a Spark Connect server, else TEAM_CHAIN."""
    prefix = TEAM_CHAIN[0].split("{", 1)[0]
    teams = sorted(r["name"].removeprefix(prefix) for r in plan.resources if r["name"].startswith(prefix) and r["custom"])
    if not teams:
        return list(chain)
    named = {r["name"] for r in plan.resources if r["custom"]}
    team_chain = CONNECT_CHAIN if CONNECT_CHAIN[-1].format(team=teams[0]) in named else TEAM_CHAIN
    return [*chain, *(step.format(team=teams[0]) for step in team_chain)]


@dataclass(frozen=True)
class Spread:
    """The smallest and the median of a set of ratios."""

    min: float
    median: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("no values to take a spread of")
        return cls(min(values), statistics.median(values))

    def __str__(self) -> str:
        return f"x{self.min:.2f} min, x{self.median:.2f} median"


def cpu(stats: RenderStats) -> float:
    """CPU time (user and system) the renderer process reports for itself: start-up, imports, render."""
    return stats.cpu_seconds


def wall(stats: RenderStats) -> float:
    """Wall time of the renderer process, measured by its parent."""
    return stats.seconds


def memory(stats: RenderStats) -> float:
    """Peak resident memory of the renderer process, in MiB."""
    return stats.peak_rss_mib


@dataclass(frozen=True)
class Pairs:
    """Renders of a program and of its floor, taken in alternating pairs: `program[i]` with `floor[i]`."""

    program: tuple[RenderStats, ...]
    floor: tuple[RenderStats, ...]

    def __post_init__(self) -> None:
        if not self.program or len(self.program) != len(self.floor):
            raise ValueError(f"pairs need as many program renders as floor renders, at least one: {len(self.program)} and {len(self.floor)}")

    def ratio(self, measure: Callable[[RenderStats], float]) -> Spread:
        """Min and median of program / floor, pair by pair: a slower moment of the machine weighs on both sides of a pair."""
        return Spread.of([measure(p) / measure(f) for p, f in zip(self.program, self.floor, strict=True)])

    def median(self, side: Literal["program", "floor"], measure: Callable[[RenderStats], float]) -> float:
        return statistics.median(measure(stats) for stats in getattr(self, side))

    def noise(self, measure: Callable[[RenderStats], float]) -> float:
        """The widest spread of a measure within one side's renders: a difference smaller than this is not measured."""
        return max(max(values) - min(values) for values in ([measure(s) for s in self.program], [measure(s) for s in self.floor]))


def paired(render_program: Callable[[], Plan], floor_of: Callable[[Plan], Callable[[], Plan]], repeat: int) -> tuple[Plan, Pairs]:
    """`repeat` pairs of a program render and a floor render replaying the program's first render.

    Every other pair runs the floor first, so that neither side is always the one that runs second.
    """
    first = render_program()
    render_floor = floor_of(first)
    program, floor = [first], [render_floor()]
    for i in range(1, repeat):
        if i % 2:
            floor.append(render_floor())
            program.append(render_program())
        else:
            program.append(render_program())
            floor.append(render_floor())
    return first, Pairs(tuple(_stats(p) for p in program), tuple(_stats(f) for f in floor))


def marginal_cost(cost_a: float, n_a: int, cost_b: float, n_b: int) -> float:
    """What one more resource costs, from two sizes of the same site: (cost(b) - cost(a)) / (n_b - n_a)."""
    if n_b == n_a:
        raise ValueError(f"two sizes of a site must differ in resources to give a cost per resource: both have {n_a}")
    return (cost_b - cost_a) / (n_b - n_a)


@dataclass(frozen=True)
class Marginal:
    """The CPU one more resource costs the program and the floor, between two sizes of a generated site."""

    program_seconds: float
    floor_seconds: float
    program_mib: float
    measurable: bool
    """False when either CPU difference is within the renders' own spread (or not positive), or when there is only one
    pair at a size and so no spread to judge by: then there is no ratio."""

    @property
    def ratio(self) -> float | None:
        return self.program_seconds / self.floor_seconds if self.measurable else None


def marginal(small: Pairs, n_small: int, large: Pairs, n_large: int) -> Marginal:
    """The per-resource cost from the medians at two sizes; never a factor from a difference the noise could make."""
    program = [small.median("program", cpu), large.median("program", cpu)]
    floor = [small.median("floor", cpu), large.median("floor", cpu)]
    noise = max(small.noise(cpu), large.noise(cpu))
    pairs = min(len(small.program), len(large.program))
    measurable = pairs > 1 and program[1] - program[0] > noise and floor[1] - floor[0] > noise
    return Marginal(
        program_seconds=marginal_cost(program[0], n_small, program[1], n_large),
        floor_seconds=marginal_cost(floor[0], n_small, floor[1], n_large),
        program_mib=marginal_cost(small.median("program", memory), n_small, large.median("program", memory), n_large),
        measurable=measurable,
    )


def _stats(plan: Plan) -> RenderStats:
    if plan.stats is None:
        raise ValueError(f"the render of {plan.stack} has no stats")
    return plan.stats


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
    cpu_seconds: float = 0.0


@dataclass
class Limits:
    """The limits a row is checked against: each one's text and whether it holds."""

    checks: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, text: str, ok: bool) -> None:
        self.checks.append((text, ok))

    @property
    def text(self) -> str:
        return "; ".join(text for text, _ in self.checks)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok in self.checks)


def floor_renderer(plan: Plan) -> Callable[[], Plan]:
    """A render of benchmarks/floor.py replaying `plan`'s resources under the same mock renderer."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="fab-floor-", delete=False) as handle:
        json.dump(plan.resources, handle)
    atexit.register(os.unlink, handle.name)

    def render_floor() -> Plan:
        os.environ["FAB_FLOOR_PLAN"] = handle.name  # inherited by the renderer's child process
        floor = render_config(plan.stack, {}, program=FLOOR_PROGRAM, stack_references={})
        if {r["urn"] for r in floor.resources} != {r["urn"] for r in plan.resources}:
            raise SystemExit(f"the floor of {plan.stack} did not register the program's resources: fix benchmarks/floor.py")
        return floor

    return render_floor


def program_renderer(stack: str, site: dict[str, Any] | None = None) -> Callable[[], Plan]:
    """Renders of a stack file, or of a generated `site` in its place; other stacks' outputs are rendered once, here."""
    config = read_stack_config(stack_file(PROJECT_DIR, stack))
    config, _ = with_secret_stand_ins(config if site is None else {**config, SITE_KEY: site})
    references = linked_stack_outputs(config, PROJECT_DIR)
    return lambda: render_config(stack, config, stack_references=references)


def pairing_figure(pairs: Pairs) -> str:
    return (f"CPU {pairs.ratio(cpu)}; wall {pairs.ratio(wall)}; memory {pairs.ratio(memory)} "
            f"({len(pairs.program)} alternating pairs)")


def check_pairing(pairs: Pairs, limits: Limits, cpu_limit: float | None) -> None:
    if cpu_limit is not None:
        limits.add(f"CPU median <= x{cpu_limit}", pairs.ratio(cpu).median <= cpu_limit)
    limits.add(f"memory median <= x{MEMORY_RATIO_LIMIT}", pairs.ratio(memory).median <= MEMORY_RATIO_LIMIT)


def stack_rows(stack: str, repeat: int) -> tuple[Plan, list[Row]]:
    plan, pairs = paired(program_renderer(stack), floor_renderer, repeat)
    n = len(plan.resources)
    limits = Limits()
    check_pairing(pairs, limits, FLOOR_CPU_RATIO_LIMIT)
    return plan, [
        Row("render", stack, n, pairs.median("program", wall), pairs.median("program", memory), "the program", "", True,
            pairs.median("program", cpu)),
        Row("render", f"{stack} floor", n, pairs.median("floor", wall), pairs.median("floor", memory),
            "same resources, no logic, same process settings", "", True, pairs.median("floor", cpu)),
        Row("program / floor", stack, n, 0.0, 0.0, pairing_figure(pairs), limits.text, limits.ok),
    ]


def growth_rows(repeat: int, dimensions: Sequence[str] = tuple(DIMENSIONS)) -> list[Row]:
    """Each generated site paired with its floor; from the second scale on, the CPU per added resource against the floor's."""
    rows = []
    for dimension in dimensions:
        stack, grow, scales = DIMENSIONS[dimension]
        base = read_stack_config(stack_file(PROJECT_DIR, stack))[SITE_KEY]
        smallest: tuple[int, int, Pairs] | None = None
        for scale in scales:
            plan, pairs = paired(program_renderer(stack, grow(base, scale)), floor_renderer, repeat)
            n = len(plan.resources)
            limits = Limits()
            check_pairing(pairs, limits, LARGE_SITE_CPU_RATIO_LIMIT if (dimension, scale) == LARGE_SITE else None)
            figure = f"floor CPU {pairs.median('floor', cpu):.2f} s; program / floor: {pairing_figure(pairs)}"
            if smallest is None:
                smallest = (scale, n, pairs)
            else:
                added = marginal(smallest[2], smallest[1], pairs, n)
                figure += (f"\nper resource added since {smallest[0]}: program {added.program_seconds * 1000:.2f} ms CPU, "
                           f"{added.program_mib * 1024:.0f} KiB; floor {added.floor_seconds * 1000:.2f} ms CPU")
                if added.ratio is None:
                    figure += " (within the renders' spread: no ratio)"
                else:
                    figure += f" (x{added.ratio:.2f})"
                    limits.add(f"per resource <= x{MARGINAL_RATIO_LIMIT}", added.ratio <= MARGINAL_RATIO_LIMIT)
            rows.append(Row(
                f"growth: {dimension}", f"{stack}, {scale} {'more ' if dimension == 'teams' else ''}{dimension}", n,
                pairs.median("program", wall), pairs.median("program", memory), figure, limits.text, limits.ok,
                pairs.median("program", cpu),
            ))
    return rows


@dataclass(frozen=True)
class CheckRun:
    """One `python -m fabctl check` as a user runs it: its wall time (process start to exit), the CPU time of it and
    everything it started (renderer, Helm), its exit status and the check's summary line."""

    seconds: float
    cpu_seconds: float
    returncode: int
    summary: str


def timed_check(stack: str, render_cache: Path, charts: Path, helm: Path) -> CheckRun:
    command = [sys.executable, "-m", "fabctl", "check", "--stack", stack, "--render-cache", str(render_cache)]
    env = {**os.environ, "FAB_CHART_DIR": str(charts), "FAB_HELM": str(helm)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = next((line for line in done.stdout.splitlines() if line.startswith(f"check {stack}: ")), "")
    return CheckRun(seconds, cpu_seconds, done.returncode, summary)


def check_rows(stack: str, repeat: int = 1) -> list[Row] | None:
    """The deploy check of a stack file, cold and warm, `repeat` times each (every cold run with an empty render cache,
    then the warm run on what it kept); None without chart packages and Helm."""
    charts = Path(os.environ.get("FAB_CHART_DIR") or SHARED / "charts")
    helm = Path(os.environ.get("FAB_HELM") or SHARED / "tools" / "helm")
    if not (charts / "index.json").is_file() or not helm.is_file():
        return None
    runs: list[tuple[CheckRun, CheckRun]] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="fab-check-bench-") as cache:
            cold = timed_check(stack, Path(cache), charts, helm)
            runs.append((cold, timed_check(stack, Path(cache), charts, helm)))
    return check_rows_of(stack, [cold for cold, _ in runs], [warm for _, warm in runs])


def check_rows_of(stack: str, cold: Sequence[CheckRun], warm: Sequence[CheckRun]) -> list[Row]:
    """A row per kind of run, its median wall time against its limit; a run that did not exit 0 is over whatever its time."""
    rows = []
    for case, measured, limit in (("cold", cold, CHECK_COLD_LIMIT_SEC), ("warm", warm, CHECK_WARM_LIMIT_SEC)):
        seconds = statistics.median(run.seconds for run in measured)
        failed = [run for run in measured if run.returncode != 0]
        walls = [run.seconds for run in measured]
        figure = (f"python -m fabctl check --stack {stack}, {'an empty' if case == 'cold' else 'the cold run’s'} render "
                  f"cache: wall {min(walls):.1f} s min, {seconds:.1f} s median of {len(measured)}")
        if failed:
            figure += f"; exit {failed[0].returncode}"
        summary = measured[-1].summary
        objects = re.search(r"; (\d+) objects checked", summary)
        rows.append(Row(f"deploy check, {case}", stack, int(objects.group(1)) if objects else 0, seconds, 0.0,
                        f"{figure}\n{summary}", f"<= {limit:g} s", seconds <= limit and not failed,
                        statistics.median(run.cpu_seconds for run in measured)))
    return rows


def critical_path_row(plan: Plan) -> Row:
    path = critical_path(plan)
    inherent = Chain(tuple(_urn(plan, name) for name in inherent_chain(plan)))
    if not chain_exists(plan, list(inherent.urns)):
        raise SystemExit(f"the inherent chain is not a dependency chain of {plan.stack}: update INHERENT_CHAIN in benchmarks/run.py")
    listed = "\n".join(f"{i}. {_short(urn)}" for i, urn in enumerate(path.urns, 1))
    return Row("critical path", plan.stack, len(plan.resources), 0.0, 0.0, f"{path.length} steps (inherent {inherent.length}):\n{listed}",
               f"<= {inherent.length + EXTRA_STEPS_LIMIT} steps", path.length <= inherent.length + EXTRA_STEPS_LIMIT)


def weighted_path_row(plan: Plan) -> Row:
    """The heaviest chain by what Pulumi waits for on each step, against the inherent chain's weight; the explicit waits on
    it (each must be a runtime need: the inherent chain's own steps need each other)."""
    path = weighted_path(plan)
    chain = [_urn(plan, name) for name in inherent_chain(plan, OPERATOR_FIRST_CHAIN)]
    if not chain_exists(plan, chain):
        raise SystemExit(f"the operator-first chain is not a dependency chain of {plan.stack}: update OPERATOR_FIRST_CHAIN in "
                         "benchmarks/run.py")
    inherent = sum(weight(plan.by_urn[urn]) for urn in chain)
    listed = "\n".join(f"{i}. {weight(plan.by_urn[urn])}  {_short(urn)}" for i, urn in enumerate(path.urns, 1))
    waits = needless_waits(plan)
    explicit = "".join(f"\n{_short(w.waiter)} -> {_short(w.waited_for)} (+{w.saves})" for w in waits)
    return Row("weighted critical path", plan.stack, len(plan.resources), 0.0, 0.0,
               f"{path.length} (inherent chain {inherent}):\n{listed}\nexplicit waits on it: {len(waits)}{explicit}",
               f"<= {inherent}", path.length <= inherent)


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
    for column, justify in [("benchmark", "left"), ("case", "left"), ("resources", "right"), ("median wall", "right"),
                            ("median CPU", "right"), ("peak memory", "right"), ("figure", "left"), ("limit", "left"),
                            ("result", "left")]:
        out.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        out.add_row(row.benchmark, row.case, str(row.resources), f"{row.seconds:.2f} s" if row.seconds else "",
                    f"{row.cpu_seconds:.2f} s" if row.cpu_seconds else "", f"{row.peak_mib:.0f} MiB" if row.peak_mib else "",
                    row.figure, row.limit, "" if not row.limit else ("[green]ok[/]" if row.ok else "[red]over[/]"))
    return out


SECTIONS = ("stacks", "growth", "critical-path", "check")
SUITE = "suite"
"""Measured only when asked for (`--only suite`): it runs the whole test suite."""


def suite_rows() -> list[Row]:
    """`make test` timed as a whole against SUITE_WALL_LIMIT_SEC, and its tests' time per directory (no limit: with the
    suite's parallel workers the directories overlap, so they say where the time goes)."""
    done = run_suite(PROJECT_DIR)
    rows = [Row("test suite", "make test", sum(d.tests for d in done.directories), done.wall_seconds, 0.0,
                f"exit {done.returncode}; {done.cpu_seconds / 60:.1f} min of CPU", f"wall <= {SUITE_WALL_LIMIT_SEC / 60:.0f} min, exit 0",
                done.returncode == 0 and done.wall_seconds <= SUITE_WALL_LIMIT_SEC, done.cpu_seconds)]
    rows += [Row("test suite", d.name, d.tests, d.seconds, 0.0, "tests' setup, call and teardown summed", "", True)
             for d in done.directories]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="program/floor pairs per stack file; default 5")
    parser.add_argument("--growth-repeat", type=int, default=3, help="program/floor pairs per generated site; default 3")
    parser.add_argument("--only", action="append", choices=(*SECTIONS, SUITE),
                        help=f"measure only this section (repeatable); default all but {SUITE}: " + ", ".join(SECTIONS))
    parser.add_argument("--stack", action="append", help="only this stack file (repeatable); default every stack file")
    parser.add_argument("--dimension", action="append", choices=sorted(DIMENSIONS),
                        help="only this growth dimension (repeatable); default all")
    parser.add_argument("--check-repeat", type=int, default=1, help="cold and warm deploy checks per stack file (each cold run "
                        "with an empty render cache); default 1")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.growth_repeat < 1 or args.check_repeat < 1:
        parser.error("--repeat, --growth-repeat and --check-repeat must be at least 1")
    sections = set(args.only or SECTIONS)
    stacks = stack_names(PROJECT_DIR)
    if unknown := sorted(set(args.stack or ()) - set(stacks)):
        parser.error(f"no stack file for {', '.join(unknown)}: the stack files are {', '.join(stacks)}")
    stacks = args.stack or stacks

    # Measure installed code: Python caches bytecode on a first import, unless PYTHONDONTWRITEBYTECODE is
    # set (as in some CI images); compile once here so that no render pays for compiling the program.
    for package in ("components", "fabctl", "benchmarks"):
        compileall.compile_dir(PROJECT_DIR / package, quiet=1)
    rows: list[Row] = []
    plans = []
    for stack in stacks:
        if "stacks" in sections:
            plan, stack_table = stack_rows(stack, args.repeat)
            rows.extend(stack_table)
        elif "critical-path" in sections:
            plan = program_renderer(stack)()
        else:
            continue
        plans.append(plan)
    if "growth" in sections:
        rows.extend(growth_rows(args.growth_repeat, args.dimension or tuple(DIMENSIONS)))
    if "critical-path" in sections:
        rows.extend(critical_path_row(plan) for plan in plans)
        rows.extend(weighted_path_row(plan) for plan in plans)
    if "check" in sections:
        checked = [rows_of for rows_of in (check_rows(stack, args.check_repeat) for stack in stacks) if rows_of is not None]
        if not checked:
            print("deploy check not measured: no chart packages and Helm (set FAB_CHART_DIR and FAB_HELM)", file=sys.stderr)
        rows.extend(row for rows_of in checked for row in rows_of)
    if SUITE in sections:
        rows.extend(suite_rows())

    Console(width=200).print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=2) + "\n", encoding="utf-8")
    return 0 if all(row.ok for row in rows) else 1
