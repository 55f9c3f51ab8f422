"""`fabctl access`, catalog area (fabctl/access/catalog.py): the Polaris grants a seat's principals hold, from the setup
plans the program renders."""

from __future__ import annotations

import json

from access_fixtures import plan_of
from fabctl.access import catalog
from fabctl.access.model import Principal

CLUSTER = "site-t-storage"
SITE_PLAN = {
    "catalog": {"name": "fab"},
    "catalog_roles": {"reader": [{"type": "catalog", "privilege": "TABLE_READ_DATA"}],
                      "writer": [{"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}],
                      "gold-reader": [{"type": "namespace", "namespace": ["gold"], "privilege": "TABLE_READ_DATA"}]},
    "principals": [{"name": "fab-spark", "principal_role": "fab-spark", "catalog_roles": ["writer"], "credentials_env": "SPARK"},
                   {"name": "fab-trino", "principal_role": "fab-trino", "catalog_roles": ["gold-reader"], "credentials_env": "TRINO"}],
}


def config_map(document):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "polaris", "name": "polaris-setup"},
            "data": {"plan.json": json.dumps(document)}}


def job(name, document):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"namespace": "polaris", "name": name},
            "spec": {"template": {"spec": {"containers": [{"name": "setup", "env": [{"name": "PLAN_JSON", "value": json.dumps(document)}]}]}}}}


def grants(objects, *principals):
    return [(a.scope, a.allowed) for a in catalog.accesses(plan_of([(CLUSTER, o) for o in objects]), Principal("user", "u", polaris_principals=principals))]


def test_a_principal_holds_the_grants_of_its_catalog_roles():
    assert grants([config_map(SITE_PLAN)], "fab-trino") == [("fab.gold", "TABLE_READ_DATA")]


def test_a_principal_not_held_by_the_seat_gives_nothing():
    assert grants([config_map(SITE_PLAN)], "fab-somebody") == []


def test_a_teams_principal_from_its_job_holds_the_site_plans_catalog_role():
    team = {"catalog_name": "fab", "principals": [{"name": "fab-training-t", "principal_role": "fab-training-t",
                                                   "catalog_roles": ["reader"], "credentials_env": "TEAM"}]}
    assert grants([config_map(SITE_PLAN), job("polaris-team-t", team)], "fab-training-t") == [("fab", "TABLE_READ_DATA")]


def test_a_vendors_grants_are_on_its_tables_and_views():
    vendor = {"catalog_name": "fab", "vendor": {"name": "fab-vendor-v", "principal_role": "fab-vendor-v", "catalog_role": "fab-vendor-v",
                                                "credentials_env": "VENDOR", "grants": [
                                                    {"type": "table", "namespace": ["gold"], "tableName": "t", "privilege": "TABLE_READ_PROPERTIES"},
                                                    {"type": "view", "namespace": ["gold"], "viewName": "v", "privilege": "VIEW_READ_PROPERTIES"}]}}
    assert grants([job("polaris-vendor-v", vendor)], "fab-vendor-v") == [("fab.gold.t", "TABLE_READ_PROPERTIES"),
                                                                         ("fab.gold.v", "VIEW_READ_PROPERTIES")]


def test_a_grant_that_manages_the_catalogs_content_is_flagged_as_escalation():
    (access,) = catalog.accesses(plan_of([(CLUSTER, config_map(SITE_PLAN))]), Principal("user", "u", polaris_principals=("fab-spark",)))
    assert access.escalation == "creates, drops and writes every namespace, table and view of the catalog"


def test_a_catalog_role_no_plan_defines_is_reported_unknown():
    team = {"catalog_name": "fab", "principals": [{"name": "p", "principal_role": "p", "catalog_roles": ["ghost"], "credentials_env": "X"}]}
    assert grants([job("polaris-team-x", team)], "p") == [("fab", "unknown")]


def test_a_teams_training_principal_holds_read_grants_only(plan):
    teams = sorted(h[0] for h in catalog.holders(catalog.setup_plans(plan)) if h[0].startswith("fab-training-"))
    assert teams
    access = catalog.accesses(plan, Principal("team", teams[0], polaris_principals=(teams[0],)))
    assert access
    assert {a.allowed for a in access} <= {"NAMESPACE_LIST", "NAMESPACE_READ_PROPERTIES", "TABLE_LIST", "TABLE_READ_PROPERTIES",
                                           "TABLE_READ_DATA", "VIEW_LIST", "VIEW_READ_PROPERTIES"}
    assert [a for a in access if a.escalation] == []
