"""Vendor sharing (issue 23 item 3): per vendor a Polaris principal whose own roles hold exactly the configured table and
view grants in gold, read-only S3 keys scoped to those tables' folders, the catalog API on the compute ingress, and
nothing of it in plain text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_http import serving
from helpers import config_errors, render_small
from small_site import add_bucket, add_vendor, small_site

from components import polaris_setup
from components.config import parse_site
from components.vendor_access import vendor_rows

IAM_POLICY, IAM_USER = "minio:index/iamPolicy:IamPolicy", "minio:index/iamUser:IamUser"


def vendor_site() -> dict[str, Any]:
    site = small_site()
    add_vendor(site)
    return site


@pytest.fixture(scope="module")
def plan():
    return render_small(vendor_site())


def vendor_job(plan, vendor: str = "etch-tools") -> dict[str, Any]:
    (job,) = [j for j in plan.objects("Job", "site-t-storage") if j["metadata"]["name"] == f"polaris-vendor-{vendor}"]
    return job


def job_plan(plan) -> dict[str, Any]:
    env = {e["name"]: e for e in vendor_job(plan)["spec"]["template"]["spec"]["containers"][0]["env"]}
    return json.loads(env["PLAN_JSON"]["value"])


# -- Polaris grants -------------------------------------------------------------------------------------------------


def test_a_vendors_catalog_role_holds_exactly_its_tables_and_views(plan):
    assert job_plan(plan) == {
        "catalog_name": "fab",
        "vendor": {
            "name": "fab-vendor-etch-tools", "principal_role": "fab-vendor-etch-tools", "catalog_role": "fab-vendor-etch-tools",
            "credentials_env": "VENDOR",
            "grants": [
                {"type": "table", "namespace": ["gold"], "tableName": "chamber_health_daily", "privilege": "TABLE_READ_PROPERTIES"},
                {"type": "view", "namespace": ["gold"], "viewName": "chamber_health_etch_tools", "privilege": "VIEW_READ_PROPERTIES"},
            ],
        },
    }


def test_a_vendor_is_not_in_the_sites_setup_plan(plan):
    (config_map,) = [c for c in plan.objects("ConfigMap", "site-t-storage") if c["metadata"]["name"] == "polaris-setup"]
    site_plan = json.loads(config_map["data"]["plan.json"])
    assert site_plan["principals"]
    assert [p["name"] for p in site_plan["principals"] if "vendor" in p["name"]] == []


def test_a_vendors_job_waits_for_the_sites_setup(plan):
    job = [r for r in plan.of_type("kubernetes:batch/v1:Job") if r["inputs"]["metadata"]["name"] == "polaris-vendor-etch-tools"]
    setup = [r["urn"] for r in plan.of_type("kubernetes:batch/v1:Job")
             if r["inputs"]["metadata"]["name"].startswith("polaris-setup-")]
    assert len(job) == 1 and len(setup) == 1
    assert setup[0] in plan.waits_for(job[0])


# -- The setup script against a fake Polaris -------------------------------------------------------------------------


class FakePolaris:
    """The management calls a vendor's setup makes; grants are a set per catalog role."""

    def __init__(self, grants: list[dict[str, Any]] | None = None) -> None:
        self.grants: dict[str, set[str]] = {"fab-vendor-etch-tools": {json.dumps(g, sort_keys=True) for g in grants or []}}
        self.principals: dict[str, Any] = {}
        self.missing: set[str] = set()

    def handle(self, method: str, path: str, body: dict[str, Any], headers: Any = None) -> tuple[int, dict[str, Any]]:
        parts = path.strip("/").split("/")
        if path.endswith("/oauth/tokens"):
            return 200, {"access_token": "token"}
        if parts[-1] == "grants":
            role = self.grants.setdefault(parts[-2], set())
            if method == "GET":
                return 200, {"grants": [json.loads(g) for g in sorted(role)]}
            grant = json.dumps(body["grant"], sort_keys=True)
            if method == "PUT":
                if body["grant"].get("tableName") in self.missing:
                    return 404, {"error": {"message": "Table not found"}}
                role.add(grant)
            else:
                role.discard(grant)
            return 201, {}
        if parts[-1] == "reset":
            self.principals[parts[-2]] = (body["clientId"], body["clientSecret"])
        return (201 if method != "GET" else 200), {}


@pytest.fixture
def fake_polaris():
    fake = FakePolaris()
    with serving(fake) as url:
        yield fake, url


ENV = {"VENDOR_CLIENT_ID": "vendor-id", "VENDOR_CLIENT_SECRET": "vendor-secret"}
STALE = {"type": "table", "namespace": ["gold"], "tableName": "lot_yield", "privilege": "TABLE_READ_PROPERTIES"}


def test_the_setup_script_grants_the_plan_and_revokes_what_the_plan_no_longer_lists(fake_polaris, plan):
    fake, url = fake_polaris
    fake.grants["fab-vendor-etch-tools"] = {json.dumps(STALE, sort_keys=True)}
    vendor_plan = job_plan(plan)
    steps = polaris_setup.apply_vendor(polaris_setup.Polaris(url, "fab", "root", "secret"), vendor_plan, ENV)
    assert [json.loads(g) for g in sorted(fake.grants["fab-vendor-etch-tools"])] == sorted(
        vendor_plan["vendor"]["grants"], key=lambda g: json.dumps(g, sort_keys=True))
    assert steps[0] == "revoked TABLE_READ_PROPERTIES from fab-vendor-etch-tools"
    assert fake.principals == {"fab-vendor-etch-tools": ("vendor-id", "vendor-secret")}


def test_the_setup_script_skips_a_table_that_does_not_exist_yet_and_grants_the_rest(fake_polaris, plan):
    fake, url = fake_polaris
    fake.missing = {"chamber_health_daily"}
    steps = polaris_setup.apply_vendor(polaris_setup.Polaris(url, "fab", "root", "secret"), job_plan(plan), ENV)
    assert steps[:2] == [
        ("skipped TABLE_READ_PROPERTIES on table gold.chamber_health_daily for fab-vendor-etch-tools: it does not exist yet "
        "(Polaris answered 404); granted when this Job runs again after it is created"),
        "catalog role fab-vendor-etch-tools (1 of 2 grants)",
    ]
    assert [json.loads(g)["viewName"] for g in fake.grants["fab-vendor-etch-tools"]] == ["chamber_health_etch_tools"]
    assert fake.principals == {"fab-vendor-etch-tools": ("vendor-id", "vendor-secret")}


def test_the_setup_script_grants_a_skipped_table_when_run_again_after_it_exists(fake_polaris, plan):
    fake, url = fake_polaris
    fake.missing = {"chamber_health_daily"}
    polaris_setup.apply_vendor(polaris_setup.Polaris(url, "fab", "root", "secret"), job_plan(plan), ENV)
    fake.missing = set()
    steps = polaris_setup.apply_vendor(polaris_setup.Polaris(url, "fab", "root", "secret"), job_plan(plan), ENV)
    assert steps[0] == "catalog role fab-vendor-etch-tools (2 of 2 grants)"
    assert len(fake.grants["fab-vendor-etch-tools"]) == 2


# -- S3 --------------------------------------------------------------------------------------------------------------


def test_a_vendors_minio_policy_reads_only_its_tables_folders_from_its_ranges(plan):
    (policy,) = [r for r in plan.of_type(IAM_POLICY) if r["inputs"]["name"] == "fab-vendor-etch-tools"]
    source = {"IpAddress": {"aws:SourceIp": ["198.51.100.64/28"]}}
    assert json.loads(policy["inputs"]["policy"]) == {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListSharedTables", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::site-t-gold"],
         "Condition": {"StringLike": {"s3:prefix": ["gold/chamber_health_daily/*"]}, **source}},
        {"Sid": "ReadSharedTables", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": ["arn:aws:s3:::site-t-gold/gold/chamber_health_daily/*"], "Condition": source},
        {"Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"],
         "Resource": ["arn:aws:s3tables:::bucket/site-t-gold", "arn:aws:s3tables:::bucket/site-t-gold/*"]},
    ]}


def test_a_vendors_minio_user_is_tagged_with_the_vendor(plan):
    users = {r["inputs"]["name"]: r["inputs"]["tags"] for r in plan.of_type(IAM_USER) if "vendor" in r["inputs"]["name"]}
    assert users == {"fab-vendor-etch-tools": {"fab.internal/engine": "vendor", "fab.internal/vendor": "etch-tools",
                                              "fab.internal/site": "site-t"}}


# -- Exposure --------------------------------------------------------------------------------------------------------


def test_the_catalog_api_is_routed_on_the_compute_ingress_to_the_polaris_vip(plan):
    (route,) = [r for r in plan.objects("HTTPRoute", "site-t-compute") if r["metadata"]["namespace"] == "vendor-catalog"]
    assert route["spec"] == {
        "parentRefs": [{"name": "compute", "namespace": "envoy-gateway-system", "sectionName": "catalog"}],
        "hostnames": ["catalog.site-t.fab.internal"],
        "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api/catalog"}}],
                   "backendRefs": [{"name": "polaris", "port": 8181}]}],
    }
    (endpoints,) = plan.objects("EndpointSlice", "site-t-compute")
    assert [e["addresses"] for e in endpoints["endpoints"]] == [[vendor_site()["storage"]["polaris"]["vip"]]]


def test_the_catalog_route_admits_only_the_vendors_ranges(plan):
    (policy,) = [p for p in plan.objects("SecurityPolicy", "site-t-compute") if p["metadata"]["namespace"] == "vendor-catalog"]
    assert policy["spec"] == {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "polaris"}],
        "authorization": {"defaultAction": "Deny", "rules": [
            {"name": "vendor-etch-tools", "action": "Allow", "principal": {"clientCIDRs": ["198.51.100.64/28"]}},
        ]},
    }


def test_the_catalog_listener_terminates_tls_on_the_compute_ingress(plan):
    (gateway,) = [g for g in plan.objects("Gateway", "site-t-compute")]
    (listener,) = [listener for listener in gateway["spec"]["listeners"] if listener["name"] == "catalog"]
    assert (listener["protocol"], listener["hostname"], listener["tls"]["mode"]) == ("HTTPS", "catalog.site-t.fab.internal", "Terminate")


def test_only_the_compute_ingress_proxies_reach_polaris_for_vendors():
    flow = parse_site(vendor_site()).flow_table()["vendor-catalog"]
    assert (flow.sources, flow.to, flow.port, flow.from_namespace, flow.from_labels, flow.to_namespace) == (
        ["compute"], ["storage"], 8181, "envoy-gateway-system", {"app.kubernetes.io/name": "envoy"}, "polaris")


def test_only_the_vendors_ranges_reach_the_object_stores_s3_pods():
    site = vendor_site()
    add_vendor(site, "cmp-tools", tables=["gold.pad_wear"], views=[])
    site["storage"]["vendors"]["cmp-tools"]["source_cidrs"] = ["192.0.2.48/29"]
    flow = parse_site(site).flow_table()["vendor-s3"]
    assert (flow.sources, [str(c) for c in flow.from_cidrs], flow.to, flow.port, flow.to_namespace) == (
        [], ["192.0.2.48/29", "198.51.100.64/28"], ["storage"], 9000, "aistor")


def test_no_vendor_flow_without_vendors():
    assert [name for name in parse_site(small_site()).flow_table() if name.startswith("vendor")] == []


# -- Secrets ---------------------------------------------------------------------------------------------------------


def test_a_vendors_credentials_are_a_secret_and_the_stack_output_is_secret(plan):
    (secret,) = [r for r in plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "vendor-etch-tools"]
    assert secret["inputs"]["metadata"]["namespace"] == "polaris"
    assert set(secret["inputs"]["stringData"]) == {"client-id", "client-secret", "s3-access-key", "s3-secret-key"}
    assert secret["inputs"]["stringData"]["client-secret"] == "[secret]"
    assert secret["inputs"]["stringData"]["s3-secret-key"] == "[secret]"
    assert plan.outputs["vendors"] == "[secret]"


def test_a_vendors_job_reads_its_credentials_from_the_secret(plan):
    env = {e["name"]: e for e in vendor_job(plan)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VENDOR_CLIENT_SECRET"] == {"name": "VENDOR_CLIENT_SECRET",
                                           "valueFrom": {"secretKeyRef": {"name": "vendor-etch-tools", "key": "client-secret"}}}


# -- The report's rows -----------------------------------------------------------------------------------------------


def test_every_grant_is_a_row_with_its_s3_prefix():
    assert vendor_rows(parse_site(vendor_site()).storage) == [
        {"vendor": "etch-tools", "principal": "fab-vendor-etch-tools", "kind": "table", "object": "gold.chamber_health_daily",
         "privilege": "TABLE_READ_PROPERTIES", "s3": "s3://site-t-gold/gold/chamber_health_daily/", "sources": "198.51.100.64/28"},
        {"vendor": "etch-tools", "principal": "fab-vendor-etch-tools", "kind": "view", "object": "gold.chamber_health_etch_tools",
         "privilege": "VIEW_READ_PROPERTIES", "s3": "", "sources": "198.51.100.64/28"},
    ]


# -- Config errors ---------------------------------------------------------------------------------------------------


def test_fails_when_a_table_is_not_in_the_gold_namespace():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["tables"] = ["fdc.chamber_traces"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.tables[0]: is not in the gold namespace; vendors are granted gold "
        "tables and views only: write gold.<name> (got 'fdc.chamber_traces')")
    ]


def test_fails_when_a_view_has_no_namespace():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["views"] = ["chamber_health_etch_tools"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.views[0]: is not in the gold namespace; vendors are granted gold "
        "tables and views only: write gold.<name> (got 'chamber_health_etch_tools')")
    ]


def test_fails_when_a_table_name_is_not_a_plain_name():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["tables"] = ["gold.chamber/../raw"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.tables[0]: the name after 'gold.' must be 1-128 letters, digits and "
        "'_', starting with a letter or digit (got 'gold.chamber/../raw')")
    ]


def test_fails_when_a_vendor_has_no_external_s3_endpoint():
    site = small_site()
    add_bucket(site, "site-t-gold", "gold")
    site["storage"]["vendors"] = {"etch-tools": {"description": "Etch vendor", "tables": ["gold.chamber_health_daily"],
                                                 "source_cidrs": ["198.51.100.64/28"]}}
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools: vendor 'etch-tools' reads its tables through the external S3 endpoint, but the site has "
        "none; set storage.s3.external_pool and storage.s3.external_vip")
    ]


def test_fails_when_the_site_has_no_gold_bucket():
    site = vendor_site()
    del site["storage"]["buckets"]["site-t-gold"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools: vendor 'etch-tools' is granted gold tables, but the site has no bucket of class gold; add "
        "one (the gold namespace's location)")
    ]


def test_fails_when_a_vendor_is_granted_nothing():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"].update(tables=[], views=[])
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools: vendor 'etch-tools' is granted nothing; list the gold tables or views it may read under "
        "tables or views")
    ]


def test_fails_when_a_vendor_has_no_source_ranges():
    site = vendor_site()
    del site["storage"]["vendors"]["etch-tools"]["source_cidrs"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.source_cidrs: vendor 'etch-tools' has no source ranges; list its own "
        "egress ranges under source_cidrs: the catalog route and the S3 endpoint admit those alone")
    ]


def test_fails_when_a_vendors_source_range_is_wider_than_a_16():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["source_cidrs"] = ["198.0.0.0/8"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.source_cidrs[0]: 198.0.0.0/8 admits 16777216 addresses; list the "
        "vendor's own egress ranges, each at most a /16")
    ]


def test_fails_when_a_vendors_source_range_overlaps_a_cluster():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["source_cidrs"] = [site["clusters"]["compute"]["node_cidr"]]
    assert config_errors(site) == [
        (f"fab-platform:site.storage.vendors.etch-tools.source_cidrs[0]: {site['clusters']['compute']['node_cidr']} overlaps "
        "clusters.compute; a vendor's source_cidrs are its addresses outside the site")
    ]


def test_fails_when_a_name_is_both_a_table_and_a_view():
    site = vendor_site()
    site["storage"]["vendors"]["etch-tools"]["views"] = ["gold.chamber_health_daily"]
    assert config_errors(site) == [
        ("fab-platform:site.storage.vendors.etch-tools.views[0]: 'gold.chamber_health_daily' is also listed under tables; a name of the gold "
        "namespace is a table or a view, not both: remove one")
    ]
