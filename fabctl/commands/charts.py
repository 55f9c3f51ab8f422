"""Where the commands that render Helm releases get Helm and the chart packages, their options, and fabctl's caches."""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.check import prepare as prepare_check
from fabctl.commands.common import EXIT_USAGE, render_or_report
from fabctl.helm import ChartPackages, ChartRepositories, ChartSource, ChartSources, NoSuchHelm, find_helm
from fabctl.render import Plan


@dataclass
class Charts:
    """Where the deploy check gets Helm and the chart packages, as the options and the environment say."""

    helm: Path | None
    """None: no Helm was found, and no release can be rendered."""
    source: ChartSource | None
    cache: Path
    """Where pulled packages are kept (`--chart-cache`), and where `helm pull` may put a package the check lacks."""
    _preparing: threading.Thread | None = None

    def prepare(self) -> None:
        """Start doing what the check will need of the packages at hand (`fabctl.check.prepare`), beside the render."""
        if self.helm is not None and self.source is not None and self._preparing is None:
            self._preparing = threading.Thread(target=self._prepare, name="fabctl-prepare", daemon=True)
            self._preparing.start()

    def _prepare(self) -> None:
        with contextlib.suppress(Exception):  # only work done ahead: the check meets any problem itself, and says it
            prepare_check(self.source, self.helm)

    def ready(self) -> None:
        if self._preparing is not None:
            self._preparing.join()


CACHE_VARIABLE = "FAB_CACHE_DIR"
"""Where fabctl keeps what it fetches and computes again only when its inputs change (pulled chart packages, Helm's renders
and the chart-value trials); default `${XDG_CACHE_HOME:-~/.cache}/fab-platform`. The test suite points it at its session's
folder, so that tests never write to a user's cache."""


def cache_home() -> Path:
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).absolute()
    return (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fab-platform").absolute()


def _chart_cache(args: argparse.Namespace) -> Path:
    if args.chart_cache:
        return Path(args.chart_cache).absolute()
    return cache_home() / "charts"


def chart_source(args: argparse.Namespace, err: Console, upstream: bool = False) -> Charts | int:
    """Helm (`find_helm`) and where chart packages come from, in order: the mirror folder (`--charts`, FAB_CHART_DIR),
    the chart cache (what earlier pulls left), each release's repository, pulled into the cache (with `upstream`,
    each chart's upstream repository); or the exit status after saying what is wrong with the options."""
    try:
        helm = find_helm(args.helm)
    except NoSuchHelm as exc:
        err.print(f"error: {exc}; or leave it out to use the virtualenv's Helm (make setup installs it) or the one on the PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    folder = args.charts or os.environ.get("FAB_CHART_DIR")
    if folder and not Path(folder).is_dir():
        err.print(f"error: --charts {folder} is not a folder of chart packages", markup=False, highlight=False)
        return EXIT_USAGE
    cache = _chart_cache(args)
    if cache.exists() and not cache.is_dir():
        err.print(f"error: the chart cache {cache} is not a folder; name another with --chart-cache DIR or {CACHE_VARIABLE}",
                  markup=False, highlight=False)
        return EXIT_USAGE
    if helm is None:
        return Charts(None, None, cache)
    # Absolute paths: a render changes the working directory meanwhile (the config's files are relative to the project).
    helm = helm.absolute()
    sources: list[ChartPackages | ChartRepositories] = [ChartPackages(Path(folder).absolute())] if folder else []
    sources.append(ChartRepositories(helm, cache, upstream, pull=not getattr(args, "no_pull", False)))
    return Charts(helm, ChartSources(sources), cache)


def _chart_names(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("give chart names separated by commas, for example airflow,superset")
    return names


def chart_options(command: argparse.ArgumentParser, strict: bool = True) -> None:
    command.add_argument("--charts", metavar="DIR", help="local mirror of the chart packages (what `helm pull` writes, or a folder "
                         "with an index.json), looked in first; default $FAB_CHART_DIR")
    command.add_argument("--helm", metavar="PATH", help="the Helm binary; default $FAB_HELM, else helm beside this Python (the "
                         "virtualenv's, from make setup), else helm on the PATH")
    command.add_argument("--chart-cache", metavar="DIR", help="chart packages looked in after --charts, where what is pulled from "
                         "each release's repository is kept (default ~/.cache/fab-platform/charts)")
    command.add_argument("--no-pull", action="store_true", help="take chart packages from --charts and the chart cache only, "
                         "never from a repository (a machine without a network to them, a hermetic CI)")
    cached = command.add_mutually_exclusive_group()
    cached.add_argument("--render-cache", metavar="DIR", help="where the program's renders, Helm's renders and the chart-value "
                        "trials are kept, each under a key of all it depends on (default ~/.cache/fab-platform/renders)")
    cached.add_argument("--no-render-cache", action="store_true", help="render the program and every release and try its "
                        "values again, keeping nothing")
    if strict:
        strictness = command.add_mutually_exclusive_group()
        strictness.add_argument("--strict", action="store_true", help="a release the check could not render (no chart package, "
                                "no Helm) is an error, exit 6; by default it is listed loudly and the exit status ignores it")
        strictness.add_argument("--strict-except", metavar="CHART,...", type=_chart_names, help="as --strict, except for the "
                                "releases of these charts (for a mirror known to lack them), e.g. airflow,superset")


def render_cache_folder(args: argparse.Namespace) -> Path | None:
    """Where the renders of the program (`program/`, fabctl.runs.cached), Helm's renders and the chart-value trials
    (fabctl.helm.render_cache) are kept: `--render-cache`, else `renders` in fabctl's cache (`cache_home`); None with
    `--no-render-cache`."""
    if args.no_render_cache:
        return None
    if args.render_cache:
        return Path(args.render_cache).absolute()
    return cache_home() / "renders"


PROGRAM_RENDERS = "program"
"""The render cache's folder of the program's renders (beside Helm's `template/`, `values/` and `crds/`)."""


def render_with_charts(stack: str, project_dir: Path, err: Console, charts: Charts | None = None,
                       config: dict[str, Any] | None = None, noted: tuple[str, ...] = ()) -> Plan | int:
    """`render_or_report`, with what the check needs of the chart packages prepared meanwhile (`python -m fabctl` runs
    the renders of a command from one preloaded renderer: fabctl/__main__.py)."""
    if charts is not None:
        charts.prepare()
    return render_or_report(stack, project_dir, err, config, noted)
