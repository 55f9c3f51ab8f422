"""Attacks read from `fabctl access`, the product's own answer to "who can do what" (fabctl/access), on both stacks: a
team member, a vendor and a pull-request author each ask what they can reach, and nothing of another team's, beyond
the vendor's tables, or holding a credential for the PR's code may appear. One attacking team and one other team per
stack."""

from __future__ import annotations

import json

import pytest

from components.config import names
from fabctl.access.matrix import answer
from fabctl.access.model import Access

ATTACKER = {"site-a": ("yield", "fdc"), "site-b": ("yield", "fdc")}
"""Per stack: the attacking team and another team of the same stack."""

CREDENTIAL_ESCALATIONS = ("nodes/proxy", "impersonate", "serviceaccounts/token", "escalate", "bind")
"""Escalations that hand out more than the seat's own identities."""


def _site(plan) -> dict:
    return json.loads(plan.config["fab-platform:site"])


@pytest.fixture(scope="module")
def team_answer(plan) -> tuple[str, str, list[Access]]:
    attacker, other = ATTACKER[plan.stack]
    assert {attacker, other} <= set(_site(plan)["teams"])
    return attacker, other, answer(plan, f"team:{attacker}")


def _other_teams_namespaces(other: str) -> set[str]:
    return {names.TEAM_NAMESPACE(other), f"notebooks-{other}", f"spark-team-{other}"}


def test_a_team_holds_no_rights_in_another_teams_namespace(team_answer):
    _, other, found = team_answer
    rbac = [a for a in found if a.area == "rbac"]
    assert rbac
    assert [a for a in rbac if a.scope in _other_teams_namespaces(other) or a.scope == "*"] == []


def test_a_team_reaches_no_pod_of_another_team(team_answer):
    _, other, found = team_answer
    network = [a for a in found if a.area == "network"]
    assert network
    assert [a for a in network if a.scope.split("/", 1)[0] in _other_teams_namespaces(other)] == []


def test_a_team_reads_and_writes_no_prefix_of_another_teams_checkpoints_or_models(team_answer):
    attacker, other, found = team_answer
    s3 = [a for a in found if a.area == "s3"]
    assert any(a.scope.endswith(f"/{attacker}/*") for a in s3)
    assert [a for a in s3 if f"/{other}/" in a.scope or a.scope.endswith(f"/{other}")] == []


def test_a_team_gains_no_credential_beyond_its_own(team_answer):
    _, _, found = team_answer
    assert [(a.scope, a.escalation) for a in found if any(word in a.escalation for word in CREDENTIAL_ESCALATIONS)] == []


def test_a_vendor_reaches_only_its_own_tables(plan):
    vendors = _site(plan)["storage"].get("vendors") or {}
    if not vendors:
        pytest.skip(f"{plan.stack} shares nothing with vendors")
    vendor = sorted(vendors)[0]
    found = answer(plan, f"vendor:{vendor}")
    assert [a for a in found if a.area == "rbac"] == []
    s3 = [a for a in found if a.area == "s3"]
    assert s3 and [a.scope for a in s3 if "Put" in a.allowed or "Delete" in a.allowed] == []
    network = [a for a in found if a.area == "network"]
    assert network and {a.target for a in network} <= {f"{plan.stack}-storage", f"{plan.stack}-compute"}
    assert not [a for a in found if a.area == "catalog" and "MANAGE" in a.allowed]


def test_a_pr_author_holds_no_cluster_identity_and_no_secret(plan):
    found = answer(plan, "pr-author")
    assert [a for a in found if a.area in ("rbac", "s3", "catalog")] == []
    ci = [a for a in found if a.area == "ci"]
    assert ci and [a.scope for a in ci if "secrets " in a.allowed or a.escalation] == []
