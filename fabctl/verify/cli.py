"""`python -m fabctl verify --stack STACK --phase N`: a roadmap phase's completion check run against the live site, or
with `--render` its jobs written as YAML without touching a cluster (docs/acceptance.md).

Exit status: 0 every criterion the phase requires passed or is waived (or, with --render, the files are written), 1 a
criterion failed or could not be decided or something the run created is left on a cluster, 2 bad usage, no such stack
file, a config that is not valid or a waiver that waives nothing the phase may waive (2, not 1 as for the other
commands: 1 here means the site failed its check), 3 the program crashed, 4 the phase is INCOMPLETE: a criterion it
requires did not run and is not waived (fabctl/verify/gates.py; a failure is said first: 1), 130 interrupted (what was
applied is deleted first).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import shutil
import traceback
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markdown import Markdown

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a site is parsed)
from components.config import ConfigError, SiteConfig, parse_site
from fabctl.stackfile import SITE_KEY, StackFileError, read_stack_config, stack_file
from fabctl.verify.gates import PhasePlan, plan
from fabctl.verify.model import Criterion
from fabctl.verify.report import FAILED, INCOMPLETE_VERDICT, junit, markdown, suite_name, summary, verdict

EXIT_FAILED, EXIT_USAGE, EXIT_CRASH, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 1, 2, 3, 4, 130
PHASES = range(1, 6)


def _site(project: Path, stack: str, err: Console) -> SiteConfig | None:
    try:
        raw = read_stack_config(stack_file(project, stack)).get(SITE_KEY)
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            return parse_site(raw)
    except StackFileError as exc:
        lines = str(exc).splitlines()
    except ConfigError as exc:
        lines = exc.lines
    for line in lines:
        err.print(f"error: {line}", markup=False, highlight=False)
    return None


def phase_plan(site: SiteConfig, phase: int) -> PhasePlan:
    """The phase's check on the site: its criteria as the builders give them, held to what the phase requires."""
    builders = importlib.import_module("fabctl.verify.criteria")  # the builders: loaded for this command only
    return plan(site, phase, builders.build(site, phase))


def render(criteria: list[Criterion], phase: int, out: Path) -> list[Path]:
    """Write `out/phase-0N/<criterion id>/<step>-<cluster>.yaml` (every object of the step, in apply order); the phase's
    folder is written anew so that a criterion that left the config leaves no file behind."""
    from fabctl.verify.runner import apply_order  # the runner's modules (the kubernetes client) load only for verify

    root = out / suite_name(phase)
    shutil.rmtree(root, ignore_errors=True)
    written = []
    for criterion in criteria:
        for index, step in enumerate(criterion.steps):
            path = root / criterion.id / f"{index}-{step.cluster}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump_all(apply_order(step), sort_keys=False))
            written.append(path)
    return written


def cmd_verify(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.render and not args.out:
        err.print("error: --render writes the jobs under --out DIR; give --out", markup=False, highlight=False)
        return EXIT_USAGE
    if args.render and (args.junit or args.markdown):
        err.print("error: --render runs nothing, so it has no report: drop --junit and --markdown", markup=False, highlight=False)
        return EXIT_USAGE
    site = _site(Path(args.project_dir), args.stack, err)
    if site is None:
        return EXIT_USAGE
    try:
        checked = phase_plan(site, args.phase)
    except Exception:  # noqa: BLE001  the builders crashing on a valid config (or a criterion of no row) is a bug: say so
        err.print(f"error: the program crashed building phase {args.phase}'s criteria for {args.stack} (a bug, not your "
                  f"config):\n{traceback.format_exc()}", markup=False, highlight=False)
        return EXIT_CRASH
    if checked.waiver_errors:
        for line in checked.waiver_errors:
            err.print(f"error: {SITE_KEY}.{line}", markup=False, highlight=False)
        return EXIT_USAGE
    criteria, held = checked.run, checked.held()
    for outcome in held:
        console.print(f"{outcome.status} {outcome.id}: {outcome.message}", markup=False, highlight=False)
    if args.render:
        written = render(criteria, args.phase, Path(args.out))
        console.print(f"wrote {len(written)} files for {len(criteria)} criteria under {Path(args.out) / suite_name(args.phase)}",
                      markup=False, highlight=False)
        if verdict(held) == INCOMPLETE_VERDICT:
            console.print(f"{suite_name(args.phase)} would be INCOMPLETE: a criterion it requires cannot run on {args.stack} "
                          "and is not waived (above)", markup=False, highlight=False)
        return 0
    from fabctl.verify.runner import Runner

    runner = Runner({key: site.kubeconfig_context(key) for key in sorted(site.clusters)}, kubeconfig=args.kubeconfig,
                    pull_secret=site.registry.pull_secret if site.registry is not None else None)
    try:
        outcomes = [*held, *runner.run(criteria)]
    except KeyboardInterrupt:
        _leftovers(runner, err)
        err.print(f"interrupted: what the run had applied was deleted{', but for what is listed above' if runner.leftovers else ''}",
                  markup=False, highlight=False)
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001  what the run had applied was deleted on the way out
        err.print(f"error: the program crashed running phase {args.phase} on {args.stack} (a bug; what the run had applied "
                  f"was deleted):\n{traceback.format_exc()}", markup=False, highlight=False)
        return EXIT_CRASH
    text = markdown(site.name, outcomes)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.junit:
        Path(args.junit).write_text(junit(site.name, outcomes))
    console.print(Markdown(text.rsplit("\n", 2)[0]))
    _leftovers(runner, err)
    console.print(summary(site.name, outcomes), markup=False, highlight=False)
    result = verdict(outcomes)
    if result == FAILED or runner.leftovers:
        return EXIT_FAILED
    return EXIT_INCOMPLETE if result == INCOMPLETE_VERDICT else 0


def _leftovers(runner: Any, err: Console) -> None:
    for leftover in runner.leftovers:
        err.print(f"error: left on the cluster, delete it by hand: {leftover}", markup=False, highlight=False)


def add_parser(sub: Any, project_dir: Path) -> None:
    verify = sub.add_parser("verify", help="run a roadmap phase's acceptance jobs on the live site (or --render them)")
    verify.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    verify.add_argument("--phase", required=True, type=int, choices=PHASES, help="the roadmap phase to verify (1 to 5)")
    verify.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    verify.add_argument("--render", action="store_true", help="write the jobs as YAML under --out; touch no cluster")
    verify.add_argument("--out", metavar="DIR", help="with --render: writes DIR/phase-0N/<criterion>/<step>-<cluster>.yaml")
    verify.add_argument("--junit", metavar="FILE", help="write the JUnit XML report to FILE")
    verify.add_argument("--markdown", metavar="FILE", help="write the Markdown report to FILE")
    verify.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig holding the stack's contexts (default $KUBECONFIG, "
                        "else ~/.kube/config)")
    verify.set_defaults(func=cmd_verify)
