"""A tenant at Trino (issue 37, path 6, and the medium path of the replication principal): a member of one team, or a
user in no group the stack names, signs in to Trino and queries what is not theirs: another team's tables, the ERP (or
MES) catalog, the peer site's gold. Both stacks, through their rendered plans and the pinned Trino chart rendered by the
real Helm; the rules are judged with tests/trino_access.py (Trino's file-based rule semantics: first matching rule of
each section, deny by default)."""

from __future__ import annotations

import json

import pytest
from trino_access import Identity, TrinoRules, coordinator_rules

from components.config import names
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR


@pytest.fixture(scope="module")
def trino_rules(plan, chart_dir, helm) -> TrinoRules:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    access, _, rules = coordinator_rules(template(release, ChartPackages(chart_dir).find(ChartRef.of(release)), helm, PROJECT_DIR))
    assert access["access-control.name"] == "file"
    return rules


def _site(plan) -> dict:
    return json.loads(plan.config["fab-platform:site"])


def test_a_team_member_cannot_read_another_teams_tables(trino_rules):
    fdc_member = Identity.of("fred", names.TEAM_GROUP("fdc"))
    assert not trino_rules.can_select(fdc_member, names.LAKE_CATALOG, names.team_schema("yield"), "lot_yield")
    assert trino_rules.can_select(fdc_member, names.LAKE_CATALOG, names.team_schema("fdc"), "traces")


def test_a_user_in_no_allowed_group_cannot_read_the_external_catalogs(trino_rules, plan):
    (catalog,) = _site(plan)["compute"]["trino"]["external_catalogs"]
    outsider = Identity.of("eve", names.TEAM_GROUP("llm-apps"), "platform-users")
    assert trino_rules.catalog_access(outsider, catalog) == "none"
    assert not trino_rules.can_select(outsider, catalog, "purchasing", "orders")


def test_a_user_in_no_allowed_group_cannot_read_the_peers_gold(trino_rules, plan):
    (peer,) = _site(plan)["federation"]["peers"]
    outsider = Identity.of("eve", names.TEAM_GROUP("fdc"), "platform-users")
    assert not trino_rules.can_select(outsider, names.peer_trino_catalog(peer), "gold", "yield_daily")


def test_a_signed_in_user_in_no_group_cannot_read_anything(trino_rules):
    nobody = Identity.of("eve")
    assert not trino_rules.can_select(nobody, names.LAKE_CATALOG, "gold", "yield_daily")
