"""The report of `fabctl verify` (docs/acceptance.md, "Running fabctl verify and reading the report"): one outcome per
criterion, written as JUnit XML for CI and as Markdown for people.

JUnit: one `<testsuite>` per phase (`phase-0N`), one `<testcase>` per criterion id with classname `fab.verify.<site>`;
a failed criterion carries `<failure>`, a required one that did not run `<failure type="incomplete">` (counted with the
failures: CI must not read it as a pass), one that does not apply to the site `<skipped>`, a waived one `<skipped>` whose
message starts with `waived:`, one the runner could not decide (an unreachable cluster, an API error) `<error>`. The measured figures and the bound are the suite's `<properties>`,
named `<criterion id>.<figure>`, after the phase's `verdict` (PASSED, INCOMPLETE or FAILED): the Jenkins junit-10 schema
most CI systems follow allows properties on a suite, not on a case.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PASS, FAIL, ERROR, INCOMPLETE, WAIVED, SKIPPED = "pass", "fail", "error", "incomplete", "waived", "skipped"
STATUSES = (PASS, FAIL, ERROR, INCOMPLETE, WAIVED, SKIPPED)
"""What became of a criterion: it passed; it failed (its judge, its job, a timeout, a missing operator); the runner could
not decide (an error talking to the cluster: nothing is known about the site); the phase requires it and it could not run
(fabctl/verify/gates.py); it could not run and the stack file waives it (`acceptance.waivers`, the reason repeated); the
phase does not require it on this site or there is nothing to check."""
FAILED, INCOMPLETE_VERDICT, PASSED = "FAILED", "INCOMPLETE", "PASSED"


@dataclass(frozen=True)
class Outcome:
    """What became of one criterion."""

    phase: int
    id: str
    status: str
    message: str
    """One line: the judge's reason, why the run failed or errored, or why the criterion does not apply."""
    title: str = ""
    results: Mapping[str, str] = field(default_factory=dict)
    """Every step's results (`<step>.<key>`, `<step>.succeeded`), as the judge saw them."""
    bound: str = ""
    seconds: float = 0.0


def suite_name(phase: int) -> str:
    return f"phase-{phase:02d}"


def _ordered(outcomes: Sequence[Outcome]) -> dict[int, list[Outcome]]:
    """Outcomes by phase, phases ascending, criteria by id: the same report for the same outcomes, whatever the run order."""
    phases: dict[int, list[Outcome]] = {}
    for outcome in sorted(outcomes, key=lambda o: (o.phase, o.id)):
        phases.setdefault(outcome.phase, []).append(outcome)
    return phases


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    return {status: sum(o.status == status for o in outcomes) for status in STATUSES}


def verdict(outcomes: Sequence[Outcome]) -> str:
    """FAILED when a criterion failed or could not be decided; else INCOMPLETE when a required one did not run and is not
    waived; else PASSED (every required criterion ran and passed, or is waived)."""
    counts = _counts(outcomes)
    if counts[FAIL] or counts[ERROR]:
        return FAILED
    return INCOMPLETE_VERDICT if counts[INCOMPLETE] else PASSED


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def junit(site: str, outcomes: Sequence[Outcome]) -> str:
    """The JUnit XML document of a run."""
    everything = _counts(outcomes)
    root = ET.Element("testsuites", {
        "name": f"fab.verify.{site}", "tests": str(len(outcomes)), "failures": str(everything[FAIL] + everything[INCOMPLETE]),
        "errors": str(everything[ERROR]), "skipped": str(everything[SKIPPED] + everything[WAIVED]),
        "time": _seconds(sum(o.seconds for o in outcomes)),
    })
    for phase, cases in _ordered(outcomes).items():
        counts = _counts(cases)
        suite = ET.SubElement(root, "testsuite", {
            "name": suite_name(phase), "tests": str(len(cases)), "failures": str(counts[FAIL] + counts[INCOMPLETE]),
            "errors": str(counts[ERROR]), "skipped": str(counts[SKIPPED] + counts[WAIVED]),
            "time": _seconds(sum(o.seconds for o in cases)),
        })
        properties = [("verdict", verdict(cases))] + [
            (f"{o.id}.{key}", value) for o in cases
            for key, value in [*([("bound", o.bound)] if o.bound else []), *sorted(o.results.items())]]
        holder = ET.SubElement(suite, "properties")
        for name, value in properties:
            ET.SubElement(holder, "property", {"name": name, "value": value})
        for outcome in cases:
            case = ET.SubElement(suite, "testcase", {"name": outcome.id, "classname": f"fab.verify.{site}",
                                                     "time": _seconds(outcome.seconds)})
            tag = {FAIL: "failure", INCOMPLETE: "failure", ERROR: "error", SKIPPED: "skipped", WAIVED: "skipped"}.get(outcome.status)
            if tag:
                attributes = {"message": outcome.message}
                if outcome.status == INCOMPLETE:
                    attributes["type"] = INCOMPLETE
                ET.SubElement(case, tag, attributes)
            if outcome.title or outcome.results:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join([outcome.title, *(f"{k}={v}" for k, v in sorted(outcome.results.items()))]).strip() + "\n"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _figures(outcome: Outcome) -> str:
    """The measured figures (every result but the runner's own `succeeded` facts), as `key=value` pairs."""
    shown = [f"{k}={v}" for k, v in sorted(outcome.results.items()) if not k.endswith(".succeeded")]
    return ", ".join(shown)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def summary(site: str, outcomes: Sequence[Outcome]) -> str:
    """One line: the verdict, and how many criteria passed, failed, errored, were required but did not run, were waived and
    were skipped."""
    counts = _counts(outcomes)
    phases = ", ".join(suite_name(p) for p in _ordered(outcomes)) or "no phase"
    return (f"{site} {phases}: {verdict(outcomes)}: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[ERROR]} errors, "
            f"{counts[INCOMPLETE]} incomplete, {counts[WAIVED]} waived, {counts[SKIPPED]} skipped")


def markdown(site: str, outcomes: Sequence[Outcome]) -> str:
    """A table per phase (criterion, result, figures, bound, why) under the phase's verdict, and the one-line summary."""
    lines = [f"# fabctl verify: {site}", ""]
    for phase, cases in _ordered(outcomes).items():
        lines += [f"## {suite_name(phase)}: {verdict(cases)}", "", "| criterion | result | figures | bound | why |", "|---|---|---|---|---|"]
        for o in cases:
            lines.append(f"| {_cell(o.id)} | {o.status} | {_cell(_figures(o))} | {_cell(o.bound)} | {_cell(o.message)} |")
        lines.append("")
    lines.append(summary(site, outcomes))
    return "\n".join(lines) + "\n"
