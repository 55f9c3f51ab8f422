"""A tenant at Trino (issue 37, path 6, and the medium path of the replication principal): a member of one team, or a
user in no group the stack names, signs in to Trino and queries what is not theirs: another team's tables, the ERP (or
MES) catalog, the peer site's gold. Both stacks, through their rendered plans and the pinned Trino chart rendered by the
real Helm; the rules are judged with tests/trino_access.py (Trino's file-based rule semantics: first matching rule of
each section, deny by default)."""

from __future__ import annotations

import json

import pytest
from helpers import render_small
from iam_engine import S3Request, evaluate
from minio_access import site_policies
from small_site import small_site
from trino_access import Identity, TrinoRules, coordinator_config, coordinator_rules, plain_http_names_its_user

from components.config import names
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR


@pytest.fixture(scope="module")
def trino_objects(plan, chart_dir, helm) -> list[dict]:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    return template(release, ChartPackages(chart_dir).find(ChartRef.of(release)), helm, PROJECT_DIR)


@pytest.fixture(scope="module")
def trino_rules(trino_objects) -> TrinoRules:
    access, _, rules = coordinator_rules(trino_objects)
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


def test_a_pod_cannot_name_its_own_trino_user_over_plain_http(trino_objects):
    """A pod that reaches the coordinator's port directly, past the gateway, sends `X-Trino-User: <an admin>` over
    plain HTTP: refused, so the rules above judge the signed-in user and no one else."""
    config = coordinator_config(trino_objects)
    assert config["http-server.authentication.type"] == "OAUTH2"
    assert not plain_http_names_its_user(config)


def test_the_replication_principal_cannot_read_a_teams_model_not_declared_for_replication():
    """Issue 37, medium path: with `replicate_models` (neither stack file has it: the smallest site that copies its models
    to site-u), whoever holds the replication keys (the copy job's pod, the consumer's side of a leak) asks the site's
    MinIO for a team's fine-tuned model that no served model names; the IAM evaluator refuses the listing and the read,
    and lets the served model's weights through."""
    site = small_site()
    site["federation"] = {"consumers": {"site-u": {"replicate_gold": False, "replicate_models": True}},
                          "ranges": {"site-u": ["172.20.0.0/16"]}}
    policy = site_policies(render_small(site))["fab-replication"]
    tries = [S3Request("s3:ListBucket", "site-t-models", prefix="yield/"),
             S3Request("s3:GetObject", "site-t-models", key="yield/fine-tuned/model.safetensors"),
             S3Request("s3:ListBucket", "site-t-models"),
             S3Request("s3:GetObject", "site-t-models", key="qwen/qwen3-8b/config.json")]
    assert list(evaluate("fab-replication", policy, tries).allowed.values()) == [False, False, False, True]


def test_a_pod_cannot_call_a_trino_workers_api_as_a_user_it_names(plan):
    """A worker authenticates no one (the chart's authentication is the coordinator's): a pod of another namespace, or
    one of Trino's namespace that is not Trino's, is refused at the worker; the coordinator still reaches it."""
    from cilium_engine import admitted, in_plan

    compute = f"{plan.stack}-compute"
    worker = in_plan(plan, compute, "trino", {"app.kubernetes.io/name": "trino", "app.kubernetes.io/component": "worker"})
    coordinator = in_plan(plan, compute, "trino", {"app.kubernetes.io/name": "trino", "app.kubernetes.io/component": "coordinator"})
    verdicts = {who: admitted(plan, worker, source, 8080) for who, source in (
        ("team pod", in_plan(plan, compute, "spark-team-yield", {"app": "mine"})),
        ("sync job", in_plan(plan, compute, "trino", {"app.kubernetes.io/name": "trino-groups-sync"})),
        ("coordinator", coordinator))}
    assert {who: (v.admitted, v.why) for who, v in verdicts.items()} == {
        "team pod": (False, "denied by trino-workers"), "sync job": (False, "denied by trino-workers"),
        "coordinator": (True, "allowed by fab-default-deny-remote")}
