"""docs/design-rules.md against the pack and the suite: every policy guards a design rule listed there, every guard
named there is a policy, an advisory one says so, and every test named there exists."""

from __future__ import annotations

import re
from pathlib import Path

from fabctl.render import PROJECT_DIR
from pulumi_policy import EnforcementLevel

from rules import POLICIES

DOC = PROJECT_DIR / "docs" / "design-rules.md"
POLICY_ID = re.compile(r"`(fab-[a-z0-9-]+)`")
TEST_REF = re.compile(r"`(tests/[^`:]+\.py)::(\w+)(\[[^\]`]*\])?`")


def guarded_rows() -> list[list[str]]:
    """The rows of the doc's four-column tables (design rule, where implemented, guard, test)."""
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 4 and cells[0] != "design rule" and not set(cells[0]) <= {"-"}:
            rows.append(cells)
    return rows


def test_every_policy_of_the_pack_guards_a_design_rule():
    named = {policy for row in guarded_rows() for policy in POLICY_ID.findall(row[2])}
    assert sorted({p.name for p in POLICIES} - named) == []


def test_every_guard_named_is_a_policy_of_the_pack():
    named = {policy for row in guarded_rows() for policy in POLICY_ID.findall(row[2])}
    assert sorted(named - {p.name for p in POLICIES}) == []


def test_an_advisory_guard_says_why():
    advisory = {p.name for p in POLICIES if p.enforcement_level == EnforcementLevel.ADVISORY}
    for rule, _, guard, _ in guarded_rows():
        for policy in set(POLICY_ID.findall(guard)) & advisory:
            assert f"`{policy}` (advisory)" in guard and "Advisory:" in rule, rule


def test_every_guarded_rule_names_a_test_that_exists():
    for rule, _, _, tests in guarded_rows():
        refs = TEST_REF.findall(tests)
        assert refs, rule
        for path, name, _ in refs:
            source = Path(PROJECT_DIR / path)
            assert source.exists(), path
            assert re.search(rf"^def {name}\(", source.read_text(), re.MULTILINE), f"{path}::{name}"
