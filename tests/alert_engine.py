"""Prometheus' and Alertmanager's own engines on what the program renders: `promtool check rules` and `promtool test rules`
on the rule files of PrometheusRules (their `spec` is a rule file), `amtool check-config` and `amtool config routes test`
on Alertmanager's configuration. Each engine runs once per batch of files (tests/engines.py finds the binaries)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from alert_cases import CASES, INTERVALS, Group
from components.config import AlertsConfig
from components.monitors import MetricsScope


def rule_alerts(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Alert name -> rule, over a PrometheusRule."""
    return {rule["alert"]: rule for group in obj["spec"]["groups"] for rule in group["rules"] if "alert" in rule}


def write_rule_file(folder: Path, obj: dict[str, Any]) -> Path:
    """A PrometheusRule's spec as the rule file the operator gives Prometheus (`<namespace>-<name>.yaml`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{obj['metadata'].get('namespace', 'default')}-{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj["spec"], sort_keys=False))
    return path


def _sections(output: str) -> dict[str, str]:
    """promtool's output (stdout and stderr as one stream, in order) cut at each `Unit Testing:` or `Checking` line, by
    the file's name."""
    found: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        start = re.match(r"^(?:Unit Testing:|Checking)\s+(\S+)\s*$", line)
        if start:
            current = Path(start.group(1)).name
            found[current] = ""
        elif current is not None:
            found[current] += line + "\n"
    return found


def promtool(binary: Path, command: str, files: Iterable[Path], cwd: Path) -> tuple[int, dict[str, str], str]:
    """`promtool <command> FILES` once: its exit status, its report per file, and its whole output."""
    names = [str(f.relative_to(cwd)) for f in files]
    run = subprocess.run([str(binary), *command.split(), *names], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=300)
    return run.returncode, _sections(run.stdout), run.stdout


def passed(section: str | None) -> bool:
    return section is not None and section.strip().startswith("SUCCESS")


def unit_test_file(folder: Path, name: str, rule_files: list[Path], groups: list[Group], interval: str = "1m") -> Path:
    """A promtool test file: the rule files (as one Prometheus loads them together), evaluated every `interval`, and the
    test groups."""
    path = folder / f"{name}.test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(f.relative_to(folder)) for f in rule_files], "evaluation_interval": interval,
                                    "tests": groups}, sort_keys=False))
    return path


def cases_of(obj: dict[str, Any], scope: MetricsScope, alerts: AlertsConfig, only: tuple[str, ...] | None = None,
             ) -> dict[str, list[Group]]:
    """Alert name -> the test groups of CASES for this rule file's alerts (those of `only` if given; an alert without a
    case: none)."""
    return {alert: [case.group(alert, rule) for case in CASES[alert](scope, alerts)]
            for alert, rule in rule_alerts(obj).items() if alert in CASES and (only is None or alert in only)}


def run_unit_tests(binary: Path, folder: Path, prometheuses: Mapping[str, list[tuple[dict[str, Any], MetricsScope, AlertsConfig]]],
                   only: tuple[str, ...] | None = None) -> dict[tuple[str, str], dict[str, str]]:
    """Every case of every alert of each Prometheus' rule files, in one promtool run.

    `prometheuses`: per Prometheus (a name), the PrometheusRules it evaluates, each with the scope of the cluster whose
    series it reads and the thresholds it was rendered with; `only`: those alerts alone. Each rule file is tested alone
    (another cluster's rules would see none of their series, and FabGpusLost fires on that). Returns (Prometheus, alert)
    -> {test file: promtool's report}."""
    tests: dict[tuple[str, str], list[Path]] = {}
    for where, objs in sorted(prometheuses.items()):
        for obj, scope, alerts in objs:
            rule_file = write_rule_file(folder / where, obj)
            for alert, groups in sorted(cases_of(obj, scope, alerts, only).items()):
                tests.setdefault((where, alert), []).append(
                    unit_test_file(folder / where, f"{where}--{rule_file.stem}--{alert}", [rule_file], groups, INTERVALS.get(alert, "1m")))
    if not tests:
        return {}
    _, sections, output = promtool(binary, "test rules", [p for paths in tests.values() for p in paths], folder)
    return {key: {p.name: sections.get(p.name, f"(no report)\n{output}") for p in paths} for key, paths in tests.items()}


def amtool(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
