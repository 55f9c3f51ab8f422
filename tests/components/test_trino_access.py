"""Trino's access control (issue 37, path 6): file-based rules generated from the teams, `team_schemas`, the external
catalogs' `groups` and the peers' `trino_groups`, deny by default, judged with tests/trino_access.py (Trino's file-based
rule semantics), and the chart's access control and file group provider as the pinned chart renders them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import config_errors, render_small
from small_site import SITE_CA, small_site
from trino_access import Identity, TrinoRules, coordinator_rules

from components import trino_groups_sync, versions
from components.engines.trino import GROUPS_SECRET, GROUPS_SYNC, access_rules, rule_groups
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR

ERP = {"connector": "oracle", "host": "erp-db.corp.example", "cidrs": ["172.20.8.0/29"], "database": "ERP", "user": "trino_ro"}
PASSWORD = {"fab-platform:trinoCatalogPassword-erp": {"secure": "v1:erp-password"}}
YIELD, FDC = Identity.of("ana", "team-yield"), Identity.of("fred", "team-fdc")
ADMIN, NOBODY = Identity.of("root", "platform-admins"), Identity.of("eve")


def rules(**kwargs) -> TrinoRules:
    return TrinoRules.parse(__import__("json").dumps(access_rules(["yield", "fdc", "defect-vision"], **kwargs)))


def test_a_team_reads_its_own_schema_and_gold():
    assert rules().can_select(YIELD, "fab", "yield", "lots") and rules().can_select(YIELD, "fab", "gold", "yield_daily")


def test_a_team_does_not_read_another_teams_schema():
    assert not rules().can_select(YIELD, "fab", "fdc", "traces")


def test_a_team_schema_is_its_key_with_underscores():
    assert rules().can_select(Identity.of("dee", "team-defect-vision"), "fab", "defect_vision", "images")


def test_team_schemas_add_a_schema_to_that_team_only():
    granted = rules(team_schemas={"yield": ["stdf"]})
    assert granted.can_select(YIELD, "fab", "stdf", "wafer_bins") and not granted.can_select(FDC, "fab", "stdf", "wafer_bins")


def test_nobody_writes_through_trino_but_admins():
    assert "INSERT" not in rules().table_privileges(YIELD, "fab", "yield", "lots")
    assert not rules().owns_schema(YIELD, "fab", "yield")
    assert "INSERT" in rules().table_privileges(ADMIN, "fab", "yield", "lots")


def test_a_user_in_no_group_reads_nothing():
    assert rules().catalog_access(NOBODY, "fab") == "none" and not rules().can_select(NOBODY, "fab", "gold", "t")


def test_an_external_catalog_is_read_by_its_groups_only():
    granted = rules(external={"erp": ["team-fdc"]})
    assert granted.can_select(FDC, "erp", "purchasing", "orders") and not granted.can_select(YIELD, "erp", "purchasing", "orders")


def test_an_external_catalog_without_groups_is_the_admins_alone():
    assert rules(external={"erp": []}).catalog_access(YIELD, "erp") == "none"
    assert rules(external={"erp": []}).can_select(ADMIN, "erp", "purchasing", "orders")


def test_a_peers_gold_is_read_by_its_groups_and_only_its_gold():
    granted = rules(peers={"site_b": ["team-yield"]})
    assert granted.can_select(YIELD, "site_b", "gold", "yield_daily")
    assert not granted.can_select(YIELD, "site_b", "raw", "t") and not granted.can_select(FDC, "site_b", "gold", "yield_daily")


def test_a_team_sees_only_its_own_queries():
    assert rules().query_access(YIELD, owner="fred") == frozenset() and rules().query_access(YIELD) == {"execute"}
    assert rules().query_access(ADMIN, owner="fred") == {"view", "kill"}


def test_adding_a_team_gives_it_its_schema():
    more = TrinoRules.parse(__import__("json").dumps(access_rules(["yield", "vm-pdm"])))
    assert more.can_select(Identity.of("vi", "team-vm-pdm"), "fab", "vm_pdm", "t")


@pytest.fixture(scope="module")
def erp_plan():
    site = small_site(teams=("yield", "fdc"))
    site["compute"]["trino"] = {"external_catalogs": {"erp": {**ERP, "groups": ["team-fdc"]}}, "team_schemas": {"yield": ["stdf"]}}
    return render_small(site, secrets=PASSWORD)


@pytest.fixture(scope="module")
def installed(erp_plan, chart_dir, helm):
    (release,) = [r for r in erp_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    return template(release, ChartPackages(chart_dir).find(ChartRef.of(release)), helm, PROJECT_DIR)


def test_the_chart_turns_on_file_based_access_control_with_the_rules(installed):
    access, _, found = coordinator_rules(installed)
    assert access["access-control.name"] == "file"
    assert found.can_select(FDC, "erp", "s", "t") and found.can_select(YIELD, "fab", "stdf", "t")
    assert not found.can_select(YIELD, "erp", "s", "t")


def test_groups_come_from_the_file_group_provider_of_the_groups_secret(installed, erp_plan):
    _, groups, _ = coordinator_rules(installed)
    assert groups["group-provider.name"] == "file"
    (volume,) = [v for o in installed if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("coordinator")
                 for v in o["spec"]["template"]["spec"]["volumes"] if v["name"] == "file-groups-authentication-volume"]
    assert volume["secret"]["secretName"] == GROUPS_SECRET


def test_the_groups_secret_is_left_to_the_sync(erp_plan):
    (secret,) = [r for r in erp_plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == GROUPS_SECRET]
    assert secret["inputs"]["metadata"]["namespace"] == "trino"
    assert set(secret["ignore_changes"]) == {"data", "stringData"}


def sync_pod(plan) -> dict:
    (job,) = [o for o in plan.objects("CronJob", "site-t-compute") if o["metadata"]["name"] == GROUPS_SYNC]
    return job["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_the_sync_reads_exactly_the_groups_the_rules_name(erp_plan):
    (container,) = sync_pod(erp_plan)["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GROUPS"] == "platform-admins,team-fdc,team-yield"
    assert (env["KEYCLOAK_URL"], env["REALM"], env["NAMESPACE"], env["SECRET"]) == (
        "https://keycloak.site-t.fab.internal", "fab", "trino", GROUPS_SECRET)


def test_rule_groups_are_the_admins_the_teams_the_catalogs_and_the_peers_readers():
    assert rule_groups(["yield"], {"erp": ["erp-readers"]}, {"site_b": ["team-yield", "analysts"]}) == [
        "analysts", "erp-readers", "platform-admins", "team-yield"]


def test_the_sync_may_get_and_patch_the_groups_secret_only(erp_plan):
    (role,) = [o for o in erp_plan.objects("Role", "site-t-compute") if o["metadata"]["name"] == GROUPS_SYNC]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [GROUPS_SECRET], "verbs": ["get", "patch"]}]
    (binding,) = [o for o in erp_plan.objects("RoleBinding", "site-t-compute") if o["metadata"]["name"] == GROUPS_SYNC]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": GROUPS_SYNC, "namespace": "trino"}]
    assert sync_pod(erp_plan)["serviceAccountName"] == GROUPS_SYNC


def test_the_syncs_keycloak_client_only_reads_users_and_groups(erp_plan):
    roles = erp_plan.of_type("keycloak:openid/clientServiceAccountRole:ClientServiceAccountRole")
    assert sorted((r["inputs"]["clientId"], r["inputs"]["role"]) for r in roles) == [
        ("fab-realm-management-id", "query-groups"), ("fab-realm-management-id", "view-users")]
    (client,) = [r for r in erp_plan.of_type("keycloak:openid/client:Client") if r["inputs"]["clientId"] == GROUPS_SYNC]
    assert client["inputs"]["serviceAccountsEnabled"] is True and client["inputs"]["standardFlowEnabled"] is False


def test_the_sync_runs_the_pinned_python_image_non_root_with_a_read_only_root(erp_plan):
    pod = sync_pod(erp_plan)
    (container,) = pod["containers"]
    assert container["image"] == versions.SETUP_IMAGE
    assert container["command"] == ["python", "/etc/trino-groups-sync/trino_groups_sync.py"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsNonRoot"] is True


def test_the_sync_ships_the_script_it_runs(erp_plan):
    (code,) = [o for o in erp_plan.objects("ConfigMap", "site-t-compute") if o["metadata"]["name"] == GROUPS_SYNC]
    assert code["data"]["trino_groups_sync.py"] == Path(trino_groups_sync.__file__).read_text()


def test_the_syncs_egress_is_the_api_server_dns_and_the_realm(erp_plan):
    (policy,) = [o for o in erp_plan.objects("CiliumNetworkPolicy", "site-t-compute") if o["metadata"]["name"] == GROUPS_SYNC]
    egress = policy["spec"]["egress"]
    assert policy["spec"]["endpointSelector"] == {"matchLabels": {"app.kubernetes.io/name": GROUPS_SYNC}}
    assert egress[0] == {"toEntities": ["kube-apiserver"]}
    assert egress[2] == {"toFQDNs": [{"matchName": "keycloak.site-t.fab.internal"}], "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}
    assert len(egress) == 3 and "toEndpoints" in egress[1]


def test_the_sync_trusts_the_site_ca_where_the_site_has_one():
    site = small_site(teams=("yield",))
    site["ca_bundle"] = SITE_CA
    pod = sync_pod(render_small(site))
    (container,) = pod["containers"]
    assert {"name": "SITE_CA_FILE", "value": "/etc/fab/site-ca/ca.crt"} in container["env"]
    assert {"name": "site-ca", "secret": {"secretName": "fab-site-ca"}} in pod["volumes"]


def test_fails_when_team_schemas_name_a_team_the_site_lacks():
    site = small_site()
    site["compute"]["trino"] = {"team_schemas": {"fdc": ["stdf"]}}
    assert config_errors(site) == [
        "fab-platform:site.compute.trino.team_schemas.fdc: 'fdc' is not among teams (yield); name a team of the site"]


def test_fails_when_team_schemas_repeat_a_teams_own_schema():
    site = small_site()
    site["compute"]["trino"] = {"team_schemas": {"yield": ["gold"]}}
    assert config_errors(site) == [
        "fab-platform:site.compute.trino.team_schemas.yield[0]: 'gold' is read by team yield already (its own schema and "
        "gold); remove it"]


def test_fails_when_an_external_catalog_names_the_group_of_a_team_the_site_lacks():
    site = small_site()
    site["compute"]["trino"] = {"external_catalogs": {"erp": {**ERP, "groups": ["team-supply"]}}}
    assert config_errors(site) == [
        "fab-platform:site.compute.trino.external_catalogs.erp.groups[0]: 'team-supply' is the group of team 'supply', which "
        "is not among teams (yield); name a team of the site or another group"]


def test_fails_when_a_group_is_not_a_group_name():
    site = small_site()
    site["compute"]["trino"] = {"external_catalogs": {"erp": {**ERP, "groups": ["team yield"]}}}
    assert config_errors(site) == [
        "fab-platform:site.compute.trino.external_catalogs.erp.groups[0]: must be a Keycloak group name as its tokens carry "
        "it: letters, digits, '_', '.' and '-', starting with a letter or digit, at most 255 characters (got 'team yield')"]
