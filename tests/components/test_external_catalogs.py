"""Trino's external catalogs (compute.trino.external_catalogs): the JDBC catalogs, their accounts as Secrets read from the
environment, and each database as a declared egress from Trino's pods that no other pod of compute may use."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from helpers import config_errors, render_small
from schemas import CrdSchemas, schema_errors
from small_site import small_site

from components.config import config_key_problems, parse_site
from components.engines.trino import jdbc_url
from components.network_policies import NAMESPACE_LABEL
from fabctl.render import PROJECT_DIR

SCM = {"connector": "postgresql", "host": "scm-db.corp.example", "cidrs": ["172.20.8.0/28"], "database": "scm", "user": "trino_ro"}
PASSWORD = {"fab-platform:trinoCatalogPassword-scm": {"secure": "v1:scm-password"}}
BASE = "fab-platform:site.compute.trino.external_catalogs"


def catalog_site(**changes: Any) -> dict[str, Any]:
    """The smallest site with the supply-chain PostgreSQL catalog `scm`, changed as asked."""
    return site_with({**copy.deepcopy(SCM), **changes})


def site_with(spec: dict[str, Any], name: str = "scm") -> dict[str, Any]:
    """The smallest site with one external catalog."""
    site = small_site()
    site.setdefault("compute", {})["trino"] = {"external_catalogs": {name: spec}}
    return site


@pytest.fixture(scope="module")
def plan():
    return render_small(catalog_site(), secrets=PASSWORD)


def trino_values(plan) -> dict[str, Any]:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    return release["inputs"]["values"]


def policy(plan, name: str) -> dict[str, Any]:
    (found,) = [r["inputs"] for r in plan.of_type("kubernetes:cilium.io/v2:CiliumClusterwideNetworkPolicy")
                if r["inputs"]["metadata"]["name"] == name]
    return found


def test_the_catalog_reads_its_account_from_the_environment(plan):
    assert trino_values(plan)["catalogs"]["scm"] == (
        "connector.name=postgresql\n"
        "connection-url=jdbc:postgresql://scm-db.corp.example:5432/scm\n"
        "connection-user=${ENV:CATALOG_SCM_USER}\n"
        "connection-password=${ENV:CATALOG_SCM_PASSWORD}\n"
    )


def test_trino_values_hold_no_secret(plan):
    values = json.dumps(trino_values(plan))
    assert "scm-password" not in values and "[secret]" not in values
    assert {"secretRef": {"name": "trino-catalog-scm"}} in trino_values(plan)["envFrom"]


def test_the_account_is_a_secret_in_trinos_namespace(plan):
    (secret,) = [r for r in plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "trino-catalog-scm"]
    assert secret["inputs"]["metadata"]["namespace"] == "trino"
    assert sorted(secret["inputs"]["stringData"]) == ["CATALOG_SCM_PASSWORD", "CATALOG_SCM_USER"]


@pytest.mark.parametrize(("connector", "database", "url"), [
    ("postgresql", "scm", "jdbc:postgresql://db.corp.example:5432/scm"),
    ("mysql", None, "jdbc:mysql://db.corp.example:3306"),
    ("oracle", "ERP", "jdbc:oracle:thin:@db.corp.example:1521/ERP"),
    ("sqlserver", "mes", "jdbc:sqlserver://db.corp.example:1433;databaseName=mes"),
])
def test_each_connector_dials_its_default_port(connector, database, url):
    spec = {"connector": connector, "host": "db.corp.example", "cidrs": ["172.20.8.0/28"], "user": "ro",
            **({"database": database} if database else {})}
    site = parse_site(site_with(spec))
    assert jdbc_url(site.compute.trino.external_catalogs["scm"]) == url


def test_trinos_pods_may_reach_exactly_the_database(plan):
    allow = policy(plan, "fab-flow-trino-catalog-scm")["spec"]
    assert allow["endpointSelector"] == {"matchLabels": {NAMESPACE_LABEL: "trino"}}
    assert allow["egress"] == [{"toCIDRSet": [{"cidr": "172.20.8.0/28"}],
                                "toPorts": [{"ports": [{"port": "5432", "protocol": "TCP"}]}]}]
    assert allow["enableDefaultDeny"] == {"ingress": False, "egress": False}


def test_every_other_pod_of_compute_is_denied_the_database(plan):
    deny = policy(plan, "fab-deny-trino-catalog-scm")["spec"]
    assert deny["endpointSelector"] == {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["trino"]}]}
    assert deny["egressDeny"] == policy(plan, "fab-flow-trino-catalog-scm")["spec"]["egress"]
    assert "egress" not in deny


def test_the_egress_policies_are_on_compute_only(plan):
    clusters = {plan.cluster(r) for r in plan.of_type("kubernetes:cilium.io/v2:CiliumClusterwideNetworkPolicy")
                if r["inputs"]["metadata"]["name"].startswith("fab-flow-trino-catalog-scm")}
    assert clusters == {"site-t-compute"}


def test_the_egress_policies_are_valid_cilium_objects(plan, crd_dir):
    crds = CrdSchemas(crd_dir)
    for name in ("fab-flow-trino-catalog-scm", "fab-deny-trino-catalog-scm"):
        assert schema_errors(policy(plan, name), crds) == []


def test_the_flow_table_declares_the_egress():
    flow = parse_site(catalog_site()).flow_table()["trino-catalog-scm"]
    assert (flow.sources, flow.to, [str(c) for c in flow.to_cidrs], flow.port, flow.target, flow.from_namespace) == (
        ["compute"], ["world"], ["172.20.8.0/28"], 5432, "world", "trino")


def test_fails_when_the_connector_is_unknown():
    assert config_errors(catalog_site(connector="db2")) == [
        f"{BASE}.scm.connector: Input should be 'postgresql', 'mysql', 'oracle' or 'sqlserver' (got 'db2')"
    ]


def test_fails_when_the_host_is_a_url():
    assert config_errors(catalog_site(host="postgres://scm-db:5432")) == [
        (f"{BASE}.scm.host: must be a lowercase DNS name or an IPv4 address, such as erp-db.corp.example or 10.0.0.1 (no port, "
        "no scheme) (got 'postgres://scm-db:5432')")
    ]


def test_fails_when_the_port_is_out_of_range():
    assert config_errors(catalog_site(port=70000)) == [
        f"{BASE}.scm.port: Input should be less than or equal to 65535 (got 70000)"
    ]


def test_fails_when_the_catalog_is_named_like_the_lake_catalog():
    site = site_with(dict(SCM), "fab")
    assert config_errors(site) == [
        f"{BASE}.fab: 'fab' is already Trino's catalog on this site's Polaris; name the external catalog differently"
    ]


def test_fails_when_the_catalog_is_named_like_a_peers_catalog():
    site = catalog_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"peers": {"site-u": {}}, "ranges": {"site-u": ["172.30.0.0/16"]}}
    site["compute"]["trino"]["external_catalogs"]["site_u"] = dict(SCM)
    assert config_errors(site) == [
        (f"{BASE}.site_u: 'site_u' is already Trino's catalog on federated peer site-u's Polaris; name the external catalog "
        "differently")
    ]


def test_fails_when_the_catalog_name_is_no_sql_name():
    site = site_with(dict(SCM), "scm-db")
    assert config_errors(site) == [
        (f"{BASE}.scm-db: the key must be a Trino catalog name: a lowercase letter, then lowercase letters, digits and '_', "
        "at most 40 characters (got 'scm-db')")
    ]


def test_fails_when_postgresql_names_no_database():
    site = site_with({k: v for k, v in SCM.items() if k != "database"})
    assert config_errors(site) == [f"{BASE}.scm.database: is required for the postgresql connector: name the database Trino reads"]


def test_fails_when_mysql_names_a_database():
    assert config_errors(catalog_site(connector="mysql")) == [
        f"{BASE}.scm.database: is not used by the mysql connector (its catalog shows every database of the server); remove it"
    ]


def test_fails_when_the_database_range_is_inside_the_site():
    assert config_errors(catalog_site(cidrs=["10.91.0.0/16"])) == [
        (f"{BASE}.scm.cidrs[0]: 10.91.0.0/16 overlaps clusters.compute.pod_cidr (10.91.0.0/16); an external database is "
        "outside every range of the site")
    ]


def test_fails_when_the_host_address_is_outside_its_ranges():
    assert config_errors(catalog_site(host="172.20.9.5")) == [
        f"{BASE}.scm.host: 172.20.9.5 is in none of cidrs (172.20.8.0/28); Trino may reach only those: add its range"
    ]


def test_fails_when_trino_is_off():
    site = catalog_site()
    site["compute"]["trino"]["enabled"] = False
    assert config_errors(site) == [
        f"{BASE}: needs Trino: compute.trino.enabled is false; enable Trino or remove the external catalogs"
    ]


def test_fails_when_a_stack_writes_a_world_flow():
    site = small_site(flow_table=True)
    site["flows"]["erp"] = {"from": ["compute"], "to": ["world"], "to_cidrs": ["172.20.8.0/28"], "port": 1521,
                            "target": "world", "from_namespace": "trino"}
    assert config_errors(site) == [
        ("fab-platform:site.flows.erp.target: 'world': flows to addresses outside the site are derived from compute.trino.external_catalogs "
        "(one per catalog); remove this flow and declare the database there")
    ]


def test_fails_when_the_password_is_not_set():
    with pytest.raises(Exception) as info:
        render_small(catalog_site())
    assert str(info.value).splitlines() == [
        ("fab-platform:trinoCatalogPassword-scm: required because compute.trino.external_catalogs.scm is set; set it with: "
        "pulumi config set --secret trinoCatalogPassword-scm <value>")
    ]


def test_fails_when_the_password_is_in_plain_text():
    assert config_key_problems(["fab-platform:trinoCatalogPassword-scm"], lambda key: False) == [
        ("fab-platform:trinoCatalogPassword-scm: a credential written in plain text (value not shown); delete it from "
        "Pulumi.<stack>.yaml, rotate it if the file was ever committed, and set it encrypted with: pulumi config set "
        "--secret trinoCatalogPassword-scm <value>")
    ]


def test_a_flow_named_like_the_deny_policy_renders_its_own_policy():
    """A stack's flow `trino-catalog-scm-others` and catalog scm's deny have different policy names (no collision)."""
    site = catalog_site()
    site["flows"] = small_site(flow_table=True)["flows"]
    site["flows"]["trino-catalog-scm-others"] = {**site["flows"]["s3"], "description": "Trino to S3, named unluckily."}
    names = sorted(r["inputs"]["metadata"]["name"] for r in render_small(site, secrets=PASSWORD).of_type(
        "kubernetes:cilium.io/v2:CiliumClusterwideNetworkPolicy") if "trino-catalog-scm" in r["inputs"]["metadata"]["name"])
    assert names == ["fab-deny-trino-catalog-scm", "fab-flow-trino-catalog-scm", "fab-flow-trino-catalog-scm-others"]


MES = {"connector": "sqlserver", "host": "mes-db.corp.example", "cidrs": ["172.20.8.16/28"], "database": "mes",
       "user": "trino_ro", "trust_site_ca": True}
MES_PASSWORD = {"fab-platform:trinoCatalogPassword-mes": {"secure": "v1:mes-password"}}


@pytest.fixture(scope="module")
def mes_plan():
    site = site_with(dict(MES), "mes")
    site["ca_bundle"] = "certs/site-b-ca.pem"
    return render_small(site, secrets=MES_PASSWORD)


def test_sqlserver_verifies_the_database_against_the_site_ca(mes_plan):
    assert trino_values(mes_plan)["catalogs"]["mes"] == (
        "connector.name=sqlserver\n"
        "connection-url=jdbc:sqlserver://mes-db.corp.example:1433;databaseName=mes;encrypt=true;trustServerCertificate=false;"
        "trustStore=/etc/fab/site-ca/truststore.p12;trustStoreType=PKCS12\n"
        "connection-user=${ENV:CATALOG_MES_USER}\n"
        "connection-password=${ENV:CATALOG_MES_PASSWORD}\n"
    )


def test_the_site_ca_trust_store_is_mounted_on_trinos_pods(mes_plan):
    assert trino_values(mes_plan)["configMounts"] == [
        {"name": "site-ca", "configMap": "trino-site-ca", "path": "/etc/fab/site-ca/truststore.p12", "subPath": "truststore.p12"},
        {"name": "site-ca-jvm", "configMap": "trino-site-ca", "path": "/etc/fab/site-ca/jvm-truststore.p12",
         "subPath": "jvm-truststore.p12"}]


def test_the_trust_store_holds_the_site_ca(mes_plan):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12
    (config_map,) = [r["inputs"] for r in mes_plan.of_type("kubernetes:core/v1:ConfigMap")
                     if r["inputs"]["metadata"]["name"] == "trino-site-ca"]
    assert config_map["metadata"]["namespace"] == "trino"
    store = pkcs12.load_pkcs12(base64.b64decode(config_map["binaryData"]["truststore.p12"]), None)
    site_ca = x509.load_pem_x509_certificates((PROJECT_DIR / "certs/site-b-ca.pem").read_bytes())
    assert [c.certificate for c in store.additional_certs] == site_ca


def test_the_jvms_trust_store_holds_the_public_cas_and_the_site_ca(mes_plan):
    import certifi
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12
    (config_map,) = [r["inputs"] for r in mes_plan.of_type("kubernetes:core/v1:ConfigMap")
                     if r["inputs"]["metadata"]["name"] == "trino-site-ca"]
    store = pkcs12.load_pkcs12(base64.b64decode(config_map["binaryData"]["jvm-truststore.p12"]), None)
    expected = x509.load_pem_x509_certificates(certifi.contents().encode() + (PROJECT_DIR / "certs/site-b-ca.pem").read_bytes())
    assert [c.certificate for c in store.additional_certs] == expected


def test_a_catalog_without_the_site_ca_mounts_nothing(plan):
    assert "configMounts" not in trino_values(plan)


def test_fails_when_another_connector_trusts_the_site_ca():
    assert config_errors(catalog_site(trust_site_ca=True)) == [
        (f"{BASE}.scm.trust_site_ca: is for the sqlserver connector only, not postgresql (its certificate settings are its "
        "connection properties); remove it")
    ]


def test_fails_when_the_site_has_no_ca():
    assert config_errors(site_with(dict(MES), "mes")) == [
        f"{BASE}.mes.trust_site_ca: needs the site's CA: set ca_bundle (the PEM file of the site's PKI) or remove it"
    ]



def egress(plan) -> list[dict[str, Any]]:
    return policy(plan, "fab-egress-trino")["spec"]["egress"]


def test_trinos_egress_is_default_deny_on_compute(plan):
    found = [(plan.cluster(r), r["inputs"]["spec"]) for r in plan.of_type("kubernetes:cilium.io/v2:CiliumClusterwideNetworkPolicy")
             if r["inputs"]["metadata"]["name"] == "fab-egress-trino"]
    assert [(cluster, spec["endpointSelector"], "enableDefaultDeny" in spec) for cluster, spec in found] == [
        ("site-t-compute", {"matchLabels": {NAMESPACE_LABEL: "trino"}}, False)]


def test_trino_resolves_names_through_cilium_dns_proxy(plan):
    assert egress(plan)[0] == {
        "toEndpoints": [{"matchLabels": {"k8s-app": "kube-dns", NAMESPACE_LABEL: "kube-system",
                                         "io.cilium.k8s.policy.cluster": "site-t-compute"}}],
        "toPorts": [{"ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
                     "rules": {"dns": [{"matchPattern": "*"}]}}],
    }


def test_trino_reaches_its_own_cluster(plan):
    assert egress(plan)[1] == {"toEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-compute"}}]}


def test_trino_reaches_s3_and_polaris_as_the_flows_declare(plan):
    """The pods of the s3 and polaris flows (a global service's remote backends) and storage's internal VIP pool, each on
    its flow's port; nothing else of storage."""
    assert egress(plan)[2:6] == [
        {"toEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-storage", NAMESPACE_LABEL: "aistor"}}],
         "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]},
        {"toCIDRSet": [{"cidr": "10.30.101.0/27"}], "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]},
        {"toEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-storage", NAMESPACE_LABEL: "polaris"}}],
         "toPorts": [{"ports": [{"port": "8181", "protocol": "TCP"}]}]},
        {"toCIDRSet": [{"cidr": "10.30.101.0/27"}], "toPorts": [{"ports": [{"port": "8181", "protocol": "TCP"}]}]},
    ]


def test_trino_reaches_the_sites_keycloak_by_name_and_nothing_more(plan):
    assert egress(plan)[6:] == [{"toFQDNs": [{"matchName": "keycloak.site-t.fab.internal"}],
                                 "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}]


def test_trino_reaches_a_federated_peers_ranges_on_the_s3_and_polaris_ports():
    site = catalog_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"peers": {"site-u": {}}, "ranges": {"site-u": ["172.30.0.0/16"]}}
    assert egress(render_small(site, secrets=PASSWORD))[-1] == {
        "toCIDRSet": [{"cidr": "172.30.0.0/16"}],
        "toPorts": [{"ports": [{"port": "8181", "protocol": "TCP"}, {"port": "9000", "protocol": "TCP"}]}],
    }


def test_trinos_egress_policy_is_a_valid_cilium_object(plan, crd_dir):
    assert schema_errors(policy(plan, "fab-egress-trino"), CrdSchemas(crd_dir)) == []
