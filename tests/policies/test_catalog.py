"""One catalog authority: every engine's catalog is Polaris's Iceberg REST catalog, checked property by property.

Unit tests build each engine's catalog configuration as the program renders it (Spark's spark-defaults.conf in a
ConfigMap, Trino's catalog files in its Helm values, StarRocks' CREATE EXTERNAL CATALOG in its setup ConfigMap) next to
the Polaris REST Service the allowed URIs are derived from, then change one property. The pack tests break the
smallest site's render the way a careless change to an engine would.
"""

from __future__ import annotations

import copy
import dataclasses
import json

from policy_fixtures import check, k8s, kube, options, provider, resource
from pulumi_policy import PolicyResource
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE
from rules.catalog import (
    catalog_uri_polaris,
    no_hive_metastore,
    object_store_tables_denied,
    polaris_endpoints,
    single_catalog_authority,
)

from fabctl.policy import analyze_in_process
from fabctl.render import Plan

COMPUTE = "site-a-compute"
POLARIS = "http://polaris.site-a.fab.internal:8181/api/catalog"
ALLOWED = ("allowed: this site's Polaris REST endpoint (10.10.101.11:8181, polaris.site-a.fab.internal:8181, path /api/catalog), "
           "or a linked peer's Polaris read from its stack")
POLARIS_SERVICE = kube(k8s(
    "Service", "polaris-rest", "polaris",
    annotations={"lbipam.cilium.io/ips": "10.10.101.11", "external-dns.alpha.kubernetes.io/hostname": "polaris.site-a.fab.internal"},
    spec={"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "polaris", "app.kubernetes.io/instance": "polaris"},
          "ports": [{"name": "rest", "port": 8181, "targetPort": 8181, "protocol": "TCP"}]},
), "site-a-storage")

SPARK_DEFAULTS = (
    "spark.sql.defaultCatalog fab\n"
    "spark.sql.catalog.fab org.apache.iceberg.spark.SparkCatalog\n"
    "spark.sql.catalog.fab.type rest\n"
    f"spark.sql.catalog.fab.uri {POLARIS}\n"
    "spark.sql.catalog.fab.warehouse ${env:POLARIS_WAREHOUSE}\n"
)
TRINO_CATALOG = (
    "connector.name=iceberg\n"
    "iceberg.catalog.type=rest\n"
    f"iceberg.rest-catalog.uri={POLARIS}\n"
    "iceberg.rest-catalog.warehouse=${ENV:POLARIS_WAREHOUSE}\n"
)
STARROCKS_SETUP = (
    "as_root <<SQL\n"
    "CREATE EXTERNAL CATALOG IF NOT EXISTS polaris PROPERTIES (\n"
    '  "type" = "iceberg",\n'
    '  "iceberg.catalog.type" = "rest",\n'
    f'  "iceberg.catalog.uri" = "{POLARIS}",\n'
    '  "iceberg.catalog.warehouse" = "$POLARIS_WAREHOUSE"\n'
    ");\n"
    "SQL\n"
)


def spark_defaults(text: str = SPARK_DEFAULTS) -> PolicyResource:
    return kube(k8s("ConfigMap", "spark-defaults", "spark", data={"spark-defaults.conf": text}), COMPUTE)


def trino(catalogs: dict[str, str] | None = None, **values) -> PolicyResource:
    props = {"chart": "trino", "namespace": "trino", "values": {"catalogs": catalogs or {"fab": TRINO_CATALOG}, **values}}
    return resource("kubernetes:helm.sh/v3:Release", props, "compute-trino", COMPUTE)


def starrocks(text: str = STARROCKS_SETUP) -> PolicyResource:
    return kube(k8s("ConfigMap", "starrocks-setup", "starrocks", data={"setup.sh": text}), COMPUTE)


def site(*resources: PolicyResource) -> list[PolicyResource]:
    """The resources with this site's Polaris REST Service."""
    return [POLARIS_SERVICE, *resources]


def test_the_engines_catalogs_on_polaris_pass_every_catalog_rule():
    for rule in (single_catalog_authority, catalog_uri_polaris, no_hive_metastore):
        assert check(rule, site(spark_defaults(), trino(), starrocks())) == []


# fab-single-catalog-authority -----------------------------------------------------------------------------------

def test_fails_when_a_spark_catalog_is_a_hive_catalog():
    text = SPARK_DEFAULTS.replace("spark.sql.catalog.fab.type rest", "spark.sql.catalog.fab.type hive")
    assert check(single_catalog_authority, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalog.fab.type=hive, which "
         "is not a REST catalog; every catalog is Polaris's Iceberg REST catalog (type rest)")
    ]


def test_fails_when_spark_keeps_its_session_catalog_in_a_hive_metastore():
    text = SPARK_DEFAULTS + "spark.sql.catalogImplementation hive\n"
    assert check(single_catalog_authority, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalogImplementation=hive, "
         "which makes Spark's session catalog a Hive metastore; use spark.sql.catalogImplementation=in-memory")
    ]


def test_fails_when_a_spark_iceberg_catalog_has_no_type():
    text = SPARK_DEFAULTS.replace("spark.sql.catalog.fab.type rest\n", "")
    assert check(single_catalog_authority, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets "
         "spark.sql.catalog.fab=org.apache.iceberg.spark.SparkCatalog, which has no type, so Iceberg makes it a Hive catalog; "
         "set spark.sql.catalog.fab.type=rest")
    ]


def test_fails_when_a_spark_catalog_names_another_catalog_implementation():
    text = SPARK_DEFAULTS.replace("spark.sql.catalog.fab.type rest", "spark.sql.catalog.fab.catalog-impl org.apache.iceberg.aws.glue.GlueCatalog")
    assert check(single_catalog_authority, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets "
         "spark.sql.catalog.fab.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog, which is not the REST catalog; every "
         "catalog is Polaris's Iceberg REST catalog (org.apache.iceberg.rest.RESTCatalog)")
    ]


def test_fails_when_a_spark_application_adds_a_delta_catalog():
    app = k8s("SparkApplication", "compaction", "spark", api="sparkoperator.k8s.io/v1beta2",
              spec={"sparkConf": {"spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}})
    assert check(single_catalog_authority, site(kube(app, COMPUTE))) == [
        ("SparkApplication spark/compaction (spec.sparkConf) on site-a-compute sets "
         "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog, which is not an Iceberg catalog; "
         "every catalog is Polaris's Iceberg REST catalog (org.apache.iceberg.spark.SparkCatalog, type rest)")
    ]


def test_fails_when_trino_gets_a_hive_connector():
    catalogs = {"fab": TRINO_CATALOG, "hive": "connector.name=hive\nhive.metastore.uri=thrift://metastore:9083\n"}
    assert check(single_catalog_authority, site(trino(catalogs))) == [
        ("Helm release compute-trino (values.catalogs.hive) on site-a-compute sets connector.name=hive, which is a table catalog "
         "outside Polaris; every catalog is Polaris's Iceberg REST catalog (connector.name=iceberg, iceberg.catalog.type=rest)")
    ]


def test_fails_when_a_trino_iceberg_catalog_has_no_catalog_type():
    catalog = TRINO_CATALOG.replace("iceberg.catalog.type=rest\n", "")
    assert check(single_catalog_authority, site(trino({"fab": catalog}))) == [
        ("Helm release compute-trino (values.catalogs.fab) on site-a-compute sets connector.name=iceberg, which has no "
         "iceberg.catalog.type, so Trino uses a Hive metastore; set iceberg.catalog.type=rest")
    ]


def test_fails_when_a_trino_iceberg_catalog_is_on_glue():
    catalog = TRINO_CATALOG.replace("iceberg.catalog.type=rest", "iceberg.catalog.type=glue")
    assert check(single_catalog_authority, site(trino({"fab": catalog}))) == [
        ("Helm release compute-trino (values.catalogs.fab) on site-a-compute sets iceberg.catalog.type=glue, which is not a REST "
         "catalog; every catalog is Polaris's Iceberg REST catalog (iceberg.catalog.type=rest)")
    ]


def test_a_trino_catalog_on_an_external_database_passes():
    catalogs = {"fab": TRINO_CATALOG, "mes": "connector.name=postgresql\nconnection-url=jdbc:postgresql://mes-db:5432/mes\n"}
    assert check(single_catalog_authority, site(trino(catalogs))) == []


def test_fails_when_starrocks_gets_a_hive_catalog():
    text = STARROCKS_SETUP.replace('"type" = "iceberg"', '"type" = "hive"')
    assert check(single_catalog_authority, site(starrocks(text))) == [
        ("ConfigMap starrocks/starrocks-setup (data.setup.sh, CREATE EXTERNAL CATALOG polaris) on site-a-compute sets type=hive, "
         "which is a table catalog outside Polaris; every catalog is Polaris's Iceberg REST catalog (type iceberg, "
         "iceberg.catalog.type rest)")
    ]


def test_fails_when_a_starrocks_iceberg_catalog_is_on_a_hive_metastore():
    text = STARROCKS_SETUP.replace('"iceberg.catalog.type" = "rest"', '"iceberg.catalog.type" = "hive"')
    assert check(single_catalog_authority, site(starrocks(text))) == [
        ("ConfigMap starrocks/starrocks-setup (data.setup.sh, CREATE EXTERNAL CATALOG polaris) on site-a-compute sets "
         "iceberg.catalog.type=hive, which is not a REST catalog; every catalog is Polaris's Iceberg REST catalog "
         "(iceberg.catalog.type=rest)")
    ]


def test_fails_when_a_gpu_cluster_has_a_hive_catalog():
    text = SPARK_DEFAULTS.replace("spark.sql.catalog.fab.type rest", "spark.sql.catalog.fab.type hive")
    config = kube(k8s("ConfigMap", "spark-defaults", "team-yield", data={"spark-defaults.conf": text}), "site-a-gpu", gpu=True)
    assert check(single_catalog_authority, site(config)) == [
        ("ConfigMap team-yield/spark-defaults (data.spark-defaults.conf) on site-a-gpu sets spark.sql.catalog.fab.type=hive, which "
         "is not a REST catalog; every catalog is Polaris's Iceberg REST catalog (type rest)")
    ]


# fab-catalog-uri-polaris --------------------------------------------------------------------------------------------

def test_polaris_is_derived_from_its_load_balancer_service():
    assert polaris_endpoints([POLARIS_SERVICE]) == [("10.10.101.11", 8181), ("polaris.site-a.fab.internal", 8181)]


def test_polaris_by_its_vip_passes():
    text = SPARK_DEFAULTS.replace(POLARIS, "http://10.10.101.11:8181/api/catalog")
    assert check(catalog_uri_polaris, site(spark_defaults(text))) == []


def test_fails_when_a_spark_rest_catalog_points_elsewhere():
    text = SPARK_DEFAULTS.replace(POLARIS, "http://catalog.example.com:8181/api/catalog")
    assert check(catalog_uri_polaris, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets "
         f"spark.sql.catalog.fab.uri=http://catalog.example.com:8181/api/catalog, which is not Polaris's REST endpoint; {ALLOWED}")
    ]


def test_fails_when_a_trino_catalog_points_at_the_object_stores_own_catalog():
    catalog = TRINO_CATALOG.replace(POLARIS, "https://s3.site-a.fab.internal:9000/_iceberg")
    assert check(catalog_uri_polaris, site(trino({"fab": catalog}))) == [
        ("Helm release compute-trino (values.catalogs.fab) on site-a-compute sets "
         f"iceberg.rest-catalog.uri=https://s3.site-a.fab.internal:9000/_iceberg, which is not Polaris's REST endpoint; {ALLOWED}")
    ]


def test_fails_when_a_starrocks_catalog_points_at_polaris_management_api():
    text = STARROCKS_SETUP.replace(POLARIS, "http://polaris.site-a.fab.internal:8181/api/management/v1")
    assert check(catalog_uri_polaris, site(starrocks(text))) == [
        ("ConfigMap starrocks/starrocks-setup (data.setup.sh, CREATE EXTERNAL CATALOG polaris) on site-a-compute sets "
         f"iceberg.catalog.uri=http://polaris.site-a.fab.internal:8181/api/management/v1, which is not Polaris's REST endpoint; {ALLOWED}")
    ]


def test_fails_when_a_rest_catalog_has_no_uri():
    catalog = TRINO_CATALOG.replace(f"iceberg.rest-catalog.uri={POLARIS}\n", "")
    assert check(catalog_uri_polaris, site(trino({"fab": catalog}))) == [
        f"Helm release compute-trino (values.catalogs.fab) on site-a-compute has a REST catalog without iceberg.rest-catalog.uri; {ALLOWED}"
    ]


def test_fails_when_the_uri_is_an_environment_reference_nothing_resolves():
    text = SPARK_DEFAULTS.replace(POLARIS, "${env:POLARIS_URI}")
    assert check(catalog_uri_polaris, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalog.fab.uri=${env:POLARIS_URI}, "
         "an environment variable that nothing in the plan ties to Polaris (write the URI, or take it from a Secret the "
         f"release's envFrom names); {ALLOWED}")
    ]


def test_fails_when_the_uri_is_an_iceberg_environment_reference_nothing_resolves():
    # Iceberg's own `env:NAME` (EnvironmentUtil.resolveAll), which Spark's catalog options use: a reference, followed.
    text = SPARK_DEFAULTS.replace(POLARIS, "env:POLARIS_URI")
    assert check(catalog_uri_polaris, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalog.fab.uri=env:POLARIS_URI, "
         "an environment variable that nothing in the plan ties to Polaris (write the URI, or take it from a Secret the "
         f"release's envFrom names); {ALLOWED}")
    ]


def test_fails_when_a_release_env_sets_the_uri_elsewhere():
    catalog = TRINO_CATALOG.replace(POLARIS, "${ENV:CATALOG_URI}")
    release = trino({"fab": catalog}, env=[{"name": "CATALOG_URI", "value": "http://hive.example.com:9083/api/catalog"}])
    assert check(catalog_uri_polaris, site(release)) == [
        ("Helm release compute-trino (values.catalogs.fab) on site-a-compute sets iceberg.rest-catalog.uri=${ENV:CATALOG_URI}, "
         f"which values env CATALOG_URI sets to http://hive.example.com:9083/api/catalog, not Polaris's REST endpoint; {ALLOWED}")
    ]


PEER_CATALOG = TRINO_CATALOG.replace(POLARIS, "${ENV:SITE_B_POLARIS_URI}")


def peer_secret(stack: str | None) -> PolicyResource:
    """The peer catalog's Secret, its data read from the peer's stack (a property dependency on the StackReference)."""
    obj = k8s("Secret", "polaris-peer-site-b", "trino", stringData={"SITE_B_POLARIS_URI": "[secret]"})
    deps = {}
    if stack:
        reference = resource("pulumi:pulumi:StackReference", {"name": stack}, "federation-site-b")
        deps = {"stringData": [reference]}
    return PolicyResource("kubernetes:core/v1:Secret", obj, "urn:pulumi:site-a::fab-platform::kubernetes:core/v1:Secret::compute-trino-peer",
                          "compute-trino-peer", options(), provider(COMPUTE), None, [], deps)


def peer_trino() -> PolicyResource:
    props = {"chart": "trino", "namespace": "trino", "values": {"catalogs": {"site_b": PEER_CATALOG},
                                                               "envFrom": [{"secretRef": {"name": "polaris-peer-site-b"}}]}}
    return PolicyResource("kubernetes:helm.sh/v3:Release", props, "urn:pulumi:site-a::fab-platform::kubernetes:helm.sh/v3:Release::compute-trino",
                          "compute-trino", options(), provider(COMPUTE), None, [], {})


def test_a_peer_catalog_read_from_the_peers_stack_passes():
    assert check(catalog_uri_polaris, site(peer_trino(), peer_secret("fab/fab-platform/site-b"))) == []


def test_fails_when_a_peer_catalog_is_read_from_another_projects_stack():
    assert check(catalog_uri_polaris, site(peer_trino(), peer_secret("fab/hive-metastore/prod"))) == [
        ("Helm release compute-trino (values.catalogs.site_b) on site-a-compute sets iceberg.rest-catalog.uri=${ENV:SITE_B_POLARIS_URI}, "
         "which Secret trino/polaris-peer-site-b reads from the stack fab/hive-metastore/prod, not a site of this project "
         f"(fab-platform); {ALLOWED}")
    ]


def test_fails_when_a_peer_catalogs_secret_is_not_read_from_a_stack():
    assert check(catalog_uri_polaris, site(peer_trino(), peer_secret(None))) == [
        ("Helm release compute-trino (values.catalogs.site_b) on site-a-compute sets iceberg.rest-catalog.uri=${ENV:SITE_B_POLARIS_URI}, "
         f"which Secret trino/polaris-peer-site-b sets to [secret], not Polaris's REST endpoint; {ALLOWED}")
    ]


def test_fails_closed_when_a_catalog_uri_is_unknown():
    app = k8s("SparkApplication", "compaction", "spark", api="sparkoperator.k8s.io/v1beta2",
              spec={"sparkConf": {"spark.sql.catalog.fab.type": "rest", "spark.sql.catalog.fab.uri": UNKNOWN_STRING_VALUE}})
    assert check(catalog_uri_polaris, site(kube(app, COMPUTE))) == [
        ("SparkApplication spark/compaction (spec.sparkConf) on site-a-compute: .spark.sql.catalog.fab.uri can't be known during "
         "preview, and this rule decides on it, so it fails closed; compute the value in the program instead of from another "
         "resource's output")
    ]


def test_fails_when_the_plan_has_no_polaris_service():
    assert check(catalog_uri_polaris, [spark_defaults()]) == [
        (f"ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalog.fab.uri={POLARIS}, "
         "which is not Polaris's REST endpoint; allowed: this site's Polaris REST endpoint (but the plan has no LoadBalancer "
         "Service selecting app.kubernetes.io/name=polaris), or a linked peer's Polaris read from its stack")
    ]


# fab-no-hive-metastore -----------------------------------------------------------------------------------------------

def test_fails_when_spark_is_given_a_hive_metastore():
    text = SPARK_DEFAULTS + "spark.hadoop.hive.metastore.uris thrift://metastore.example.com:9083\n"
    assert check(no_hive_metastore, site(spark_defaults(text))) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets "
         "spark.hadoop.hive.metastore.uris=thrift://metastore.example.com:9083; no engine uses a Hive metastore, Polaris's REST "
         "catalog is the only catalog")
    ]


def test_fails_when_a_hive_site_names_a_metastore_on_any_cluster():
    xml = "<configuration><property><name>hive.metastore.uris</name><value>thrift://hms:9083</value></property></configuration>"
    config = kube(k8s("ConfigMap", "hive-site", "training", data={"hive-site.xml": xml}), "site-a-gpu", gpu=True)
    assert check(no_hive_metastore, [config]) == [
        ("ConfigMap training/hive-site (data.hive-site.xml) on site-a-gpu sets hive.metastore.uris=thrift://hms:9083; no engine "
         "uses a Hive metastore, Polaris's REST catalog is the only catalog")
    ]


def test_fails_when_a_starrocks_catalog_names_a_metastore():
    text = STARROCKS_SETUP.replace('"type" = "iceberg",', '"type" = "iceberg",\n  "hive.metastore.uris" = "thrift://hms:9083",')
    assert check(no_hive_metastore, site(starrocks(text))) == [
        ("ConfigMap starrocks/starrocks-setup (data.setup.sh, CREATE EXTERNAL CATALOG polaris) on site-a-compute sets "
         "hive.metastore.uris=thrift://hms:9083; no engine uses a Hive metastore, Polaris's REST catalog is the only catalog")
    ]


# fab-object-store-tables-denied ---------------------------------------------------------------------------------------

def iam_policy(statements: list[dict]) -> PolicyResource:
    document = {"Version": "2012-10-17", "Statement": statements}
    return resource("minio:index/iamPolicy:IamPolicy", {"name": "fab-spark", "policy": json.dumps(document)}, "storage-spark-policy")


ALLOW_READ = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::site-a-gold/*"]}
DENY_TABLES = {"Effect": "Deny", "Action": ["s3tables:*"], "Resource": ["arn:aws:s3tables:::bucket/site-a-gold"]}


def test_a_policy_denying_the_object_stores_tables_passes():
    assert check(object_store_tables_denied, [iam_policy([ALLOW_READ, DENY_TABLES])]) == []


def test_fails_when_a_policy_leaves_the_object_stores_table_catalog_reachable():
    assert check(object_store_tables_denied, [iam_policy([ALLOW_READ])]) == [
        ("MinIO policy fab-spark does not deny s3tables:*: the object store's own table catalog must stay unreachable, "
         "Polaris is the only catalog")
    ]


# Through the pack, on the smallest site's render ---------------------------------------------------------------------

def edited(plan: Plan, name: str, edit) -> Plan:
    resources = copy.deepcopy(plan.resources)
    (record,) = [r for r in resources if r["name"] == name]
    edit(record["inputs"])
    return dataclasses.replace(plan, resources=resources)


def messages(plan: Plan) -> list[tuple[str, str]]:
    """(policy, message) of each violation; the pack puts the rule's description on the message's first line."""
    return [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(plan)]


SITE_T_ALLOWED = ("allowed: this site's Polaris REST endpoint (10.30.101.11:8181, polaris-rest.polaris.svc:8181, "
                  "polaris-rest.polaris.svc.cluster.local:8181, polaris.site-t.fab.internal:8181, path /api/catalog), "
                  "or a linked peer's Polaris read from its stack")


def test_fails_when_a_plan_has_a_spark_hive_catalog(small_plan):
    def edit(inputs):
        inputs["data"]["spark-defaults.conf"] = inputs["data"]["spark-defaults.conf"].replace(".fab.type rest", ".fab.type hive")

    assert messages(edited(small_plan, "compute-spark-connect-yield-defaults", edit)) == [(
        "fab-single-catalog-authority",
        ("ConfigMap spark-team-yield/spark-defaults (data.spark-defaults.conf) on site-t-compute sets spark.sql.catalog.fab.type=hive, which "
         "is not a REST catalog; every catalog is Polaris's Iceberg REST catalog (type rest)"),
    )]


def test_fails_when_a_plan_gives_trino_a_hive_connector(small_plan):
    def edit(inputs):
        inputs["values"]["catalogs"]["hive"] = "connector.name=hive\nhive.metastore.uri=thrift://metastore:9083\n"

    assert messages(edited(small_plan, "compute-trino", edit)) == [
        ("fab-no-hive-metastore",
         ("Helm release compute-trino (values.catalogs.hive) on site-t-compute sets hive.metastore.uri=thrift://metastore:9083; "
          "no engine uses a Hive metastore, Polaris's REST catalog is the only catalog")),
        ("fab-single-catalog-authority",
         ("Helm release compute-trino (values.catalogs.hive) on site-t-compute sets connector.name=hive, which is a table catalog "
          "outside Polaris; every catalog is Polaris's Iceberg REST catalog (connector.name=iceberg, iceberg.catalog.type=rest)")),
    ]


def test_fails_when_a_plan_points_a_rest_catalog_elsewhere(small_plan):
    def edit(inputs):
        inputs["data"]["setup.sh"] = inputs["data"]["setup.sh"].replace("polaris-rest.polaris.svc", "catalog.example.com")

    assert messages(edited(small_plan, "compute-starrocks-setup", edit)) == [(
        "fab-catalog-uri-polaris",
        ("ConfigMap starrocks/starrocks-setup (data.setup.sh, CREATE EXTERNAL CATALOG polaris) on site-t-compute sets "
         f"iceberg.catalog.uri=http://catalog.example.com:8181/api/catalog, which is not Polaris's REST endpoint; {SITE_T_ALLOWED}"),
    )]


def test_fails_when_an_engine_reads_the_catalog_uri_from_its_polaris_secret(small_plan):
    """The URI in the engine's own Secret is a Pulumi secret the plan can't show: the program writes it out instead."""
    def edit(inputs):
        inputs["values"]["catalogs"]["fab"] = inputs["values"]["catalogs"]["fab"].replace(
            "http://polaris-rest.polaris.svc:8181/api/catalog", "${ENV:POLARIS_URI}")

    assert messages(edited(small_plan, "compute-trino", edit)) == [(
        "fab-catalog-uri-polaris",
        ("Helm release compute-trino (values.catalogs.fab) on site-t-compute sets iceberg.rest-catalog.uri=${ENV:POLARIS_URI}, "
         f"which Secret trino/polaris-trino sets to [secret], not Polaris's REST endpoint; {SITE_T_ALLOWED}"),
    )]
