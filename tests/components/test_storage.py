"""StorageCluster behaviour: least privilege, nothing lost, endpoints, Polaris on Postgres, contracts."""

from __future__ import annotations

import json

import pytest

from components.config import parse_site
from components.storage import CATALOG_ACCESS, CATALOG_ROLES, ENGINE_ACCESS
from helpers import render_site, site_raw, stack_config
from helpers import render_config as render_with_config

READ = {"s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketLocation", "s3:ListBucket"}
WRITE = READ | {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads"}

# The issue's access table, written out independently of components/storage.py.
EXPECTED_CLASSES = {
    "spark": {"raw": WRITE, "warehouse": WRITE},
    "trino": {"warehouse": READ, "gold": READ},
    "starrocks": {"warehouse": READ, "gold": READ, "olap": WRITE},
    "polaris": {"warehouse": WRITE, "gold": WRITE},
    "training": {"datasets": READ, "warehouse": READ, "checkpoints": WRITE, "models": WRITE},
    "inference": {"models": READ},
    "sharing": {"gold": READ},
    "postgres-backup": {"backups": WRITE},
    "replication": {"gold": READ},
}


def allowed(policy: dict) -> dict[str, set[str]]:
    """bucket -> actions allowed on it or its objects."""
    out: dict[str, set[str]] = {}
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        for resource in statement["Resource"]:
            bucket = resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
            out.setdefault(bucket, set()).update(statement["Action"])
    return out


def policies(plan) -> dict[str, dict]:
    """The storage engines' policies (the federation's replica writers have their own test)."""
    return {
        r["inputs"]["name"].removeprefix("fab-"): json.loads(r["inputs"]["policy"]) for r in plan.of_type("minio:index/iamPolicy:IamPolicy")
        if plan.component(r)["name"] == "storage"
    }


def storage_objects(plan, kind: str) -> list[dict]:
    return plan.objects(kind, "site-a-storage")


def named(objects: list[dict], name: str) -> dict:
    (obj,) = [o for o in objects if o["metadata"]["name"] == name]
    return obj


@pytest.mark.parametrize("engine", sorted(EXPECTED_CLASSES))
def test_each_engine_gets_exactly_its_buckets_and_actions(plan_a, engine):
    site = parse_site(site_raw("site-a"))
    expected = {
        bucket: actions
        for bucket, spec in site.storage.buckets.items()
        for data_class, actions in EXPECTED_CLASSES[engine].items()
        if spec.data_class == data_class
    }
    assert allowed(policies(plan_a)[engine]) == expected


def test_every_engine_has_a_policy_user_and_keys(plan_a):
    engines = sorted(ENGINE_ACCESS)
    assert sorted(policies(plan_a)) == engines
    users = [r for r in plan_a.of_type("minio:index/iamUser:IamUser") if plan_a.component(r)["name"] == "storage"]
    assert sorted(r["inputs"]["name"] for r in users) == [f"fab-{e}" for e in engines]


def test_no_policy_grants_s3_star_or_a_wildcard_bucket(plan):
    for engine, policy in policies(plan).items():
        for statement in policy["Statement"]:
            if statement["Effect"] == "Allow":
                assert not any(a in ("*", "s3:*") for a in statement["Action"]), engine
                assert not any("*" in r.removeprefix("arn:aws:s3:::").split("/", 1)[0] for r in statement["Resource"]), engine


def test_every_policy_denies_the_object_stores_table_catalog(plan_a):
    for engine, policy in policies(plan_a).items():
        denies = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
        assert [s["Action"] for s in denies] == [["s3tables:*"]], engine


def test_buckets_are_protected_and_kept_on_delete(plan):
    buckets = plan.of_type("minio:index/s3Bucket:S3Bucket")
    assert buckets
    assert all(b["protect"] and b["retain_on_delete"] and b["inputs"]["forceDestroy"] is False for b in buckets)


def test_stateful_resources_are_protected_or_retained(plan_a):
    stateful = sorted(
        (r["type"], r["name"])
        for r in plan_a.resources
        if r["type"] in ("minio:index/s3Bucket:S3Bucket", "keycloak:index/realm:Realm")
        or (r["type"] == "kubernetes:postgresql.cnpg.io/v1:Cluster")
        or (r["type"].endswith("v1:PersistentVolumeClaim"))
    )
    unprotected = [r["name"] for r in plan_a.resources if (r["type"], r["name"]) in stateful and not (r["protect"] or r["retain_on_delete"])]
    assert len(stateful) == 14  # ten buckets, the replica of site-b's gold, and the Polaris, Airflow and Superset databases
    assert unprotected == []


def test_only_warehouse_models_and_checkpoints_are_versioned(plan_a):
    versioned = sorted(r["inputs"]["bucket"] for r in plan_a.of_type("minio:index/s3BucketVersioning:S3BucketVersioning"))
    assert versioned == ["site-a-checkpoints", "site-a-models", "site-a-warehouse"]


def test_lifecycle_rules_come_from_config(plan_a):
    rules = {r["inputs"]["bucket"]: r["inputs"]["rules"] for r in plan_a.of_type("minio:index/ilmPolicy:IlmPolicy")}
    assert rules["site-a-raw-fdc"] == [{"id": "retention", "expiration": "730d"}]
    assert rules["site-a-checkpoints"] == [
        {"id": "retention", "expiration": "90d"},
        {"id": "noncurrent-expiry", "noncurrentVersionExpirationDays": 7},
    ]
    assert "site-a-gold" not in rules


def test_every_bucket_is_tagged_with_its_class_and_residency(plan_a):
    tags = {r["inputs"]["bucket"]: r["inputs"]["tags"] for r in plan_a.of_type("pulumi-python:dynamic/storage:BucketTags")}
    assert len(tags) == 11
    assert tags["site-a-replica-site-b"]["fab.internal/residency"] == "replica"
    assert tags["site-a-gold"] == {"fab.internal/class": "gold", "fab.internal/residency": "replicable", "fab.internal/site": "site-a"}
    assert tags["site-a-raw-stdf"] == {"fab.internal/class": "raw", "fab.internal/residency": "site-local", "fab.internal/site": "site-a"}
    assert [b for b, t in tags.items() if t["fab.internal/residency"] == "replicable"] == ["site-a-gold"]
    assert {t["fab.internal/class"] for t in tags.values() if t["fab.internal/residency"] != "site-local"} == {"gold"}


def test_s3_endpoints_are_separate_local_vips_on_their_pools(plan_a):
    services = storage_objects(plan_a, "Service")
    internal, external = named(services, "s3-internal"), named(services, "s3-external")
    assert (internal["metadata"]["labels"], internal["metadata"]["annotations"]) == (
        {"lb.fab.internal/pool": "internal"}, {"lbipam.cilium.io/ips": "10.10.101.10"}
    )
    assert (external["metadata"]["labels"], external["metadata"]["annotations"]) == (
        {"lb.fab.internal/pool": "external"}, {"lbipam.cilium.io/ips": "198.51.100.10"}
    )
    for service in (internal, external):
        assert service["spec"]["type"] == "LoadBalancer"
        assert service["spec"]["externalTrafficPolicy"] == "Local"
        assert service["spec"]["selector"] == {"aistor.min.io/objectStore": "aistor"}


def test_site_b_has_no_external_s3_endpoint(plan_b):
    services = [o["metadata"]["name"] for c, o, r in plan_b.manifests() if o["kind"] == "Service" and plan_b.component(r)["name"] == "storage"]
    assert services == ["s3-internal", "polaris-rest"]
    assert plan_b.outputs["data"]["s3_endpoint_external"] is None


def test_storage_lives_on_the_storage_cluster_and_the_object_store(plan_a):
    for resource in plan_a.resources:
        top = plan_a.component(resource)
        if resource["custom"] and top and top["name"] == "storage" and resource["provider"]:
            delivered = resource["type"] == "kubernetes:core/v1:Secret" and resource["inputs"]["metadata"]["name"].startswith(("s3-", "polaris-", "fab-site-ca"))
            assert delivered or plan_a.target(resource) in ("site-a-storage", "site-a-minio"), resource["name"]


def test_credentials_are_delivered_into_the_consuming_cluster(plan_a):
    (secret,) = [r for r in plan_a.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "s3-inference"]
    assert (plan_a.target(secret), secret["inputs"]["metadata"]["namespace"]) == ("site-a-gpu", "inference")


def test_polaris_database_is_a_three_instance_cnpg_cluster_backed_up_to_aistor(plan_a):
    (cluster,) = storage_objects(plan_a, "Cluster")
    spec = cluster["spec"]
    assert (cluster["apiVersion"], spec["instances"]) == ("postgresql.cnpg.io/v1", 3)
    store = spec["backup"]["barmanObjectStore"]
    assert store["destinationPath"] == "s3://site-a-pg-backups/polaris-db"
    assert store["endpointURL"] == "https://s3.site-a.fab.internal:9000"
    assert store["s3Credentials"]["accessKeyId"] == {"name": "s3-postgres-backup", "key": "AWS_ACCESS_KEY_ID"}


def test_polaris_runs_on_the_cnpg_database_with_one_signing_key(plan_a):
    (release,) = [r for r in plan_a.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "polaris"]
    values = release["inputs"]["values"]
    assert values["persistence"] == {
        "type": "relational-jdbc",
        "relationalJdbc": {"secret": {"name": "polaris-db-app", "username": "username", "password": "password", "jdbcUrl": "jdbc-uri"}},
    }
    assert values["authentication"]["tokenBroker"]["secret"]["name"] == "polaris-token-broker"
    assert values["storage"]["secret"]["name"] == "s3-polaris"


def test_polaris_rest_endpoint_is_an_internal_local_vip(plan_a):
    service = named(storage_objects(plan_a, "Service"), "polaris-rest")
    assert service["metadata"]["labels"] == {"lb.fab.internal/pool": "internal"}
    assert service["metadata"]["annotations"] == {"lbipam.cilium.io/ips": "10.10.101.11"}
    assert service["spec"]["ports"] == [{"name": "rest", "port": 8181, "targetPort": 8181, "protocol": "TCP"}]
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_polaris_starts_after_the_bootstrap_job(plan_a):
    (release,) = [r for r in plan_a.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "polaris"]
    (bootstrap,) = [r for r in plan_a.of_type("kubernetes:batch/v1:Job") if r["name"] == "storage-job-polaris-bootstrap"]
    assert bootstrap["urn"] in release["dependencies"]


def test_setup_plan_declares_the_catalog_roles_and_principals(plan_a):
    (config_map,) = [c for c in storage_objects(plan_a, "ConfigMap") if c["metadata"]["name"] == "polaris-setup"]
    plan = json.loads(config_map["data"]["plan.json"])
    assert plan["catalog"]["storageConfigInfo"]["allowedLocations"] == ["s3://site-a-warehouse/", "s3://site-a-gold/"]
    assert plan["namespaces"] == [{"name": ["gold"], "properties": {"location": "s3://site-a-gold/gold/"}}]
    assert {p["name"]: p["catalog_roles"] for p in plan["principals"]} == {
        "fab-sharing": ["gold-reader"],
        "fab-spark": ["writer"],
        "fab-starrocks": ["reader"],
        "fab-training": ["reader"],
        "fab-trino": ["reader"],
        "fab-federation-site-b": ["gold-reader"],
    }
    assert plan["catalog_roles"] == CATALOG_ROLES


def test_the_sharing_principal_reads_the_gold_namespace_only():
    assert CATALOG_ACCESS["sharing"] == "gold-reader"
    assert {(g["type"], tuple(g.get("namespace", ()))) for g in CATALOG_ROLES["gold-reader"]} == {("namespace", ("gold",))}
    assert not any("WRITE" in g["privilege"] or "MANAGE" in g["privilege"] for g in CATALOG_ROLES["gold-reader"])


def test_credentials_reach_kubernetes_only_as_pulumi_secrets(plan_a):
    secrets = [r for r in plan_a.of_type("kubernetes:core/v1:Secret") if r["inputs"]["type"] == "Opaque"]
    assert {r["inputs"]["metadata"]["name"] for r in secrets} >= {"s3-polaris", "s3-postgres-backup", "polaris-root"}
    for resource in secrets:
        assert "stringData" in resource["secret_inputs"], resource["name"]
        assert set(resource["inputs"]["stringData"].values()) == {"[secret]"}


def test_no_credential_appears_in_helm_values(plan_a):
    text = json.dumps([r["inputs"] for r in plan_a.of_type("kubernetes:helm.sh/v3:Release")])
    assert "AKIA" not in text and "MOCK" not in text


def test_outputs_carry_the_data_and_artifacts_contracts(plan_a):
    assert plan_a.outputs["data"] == {
        "catalog_uri": "http://polaris.site-a.fab.internal:8181/api/catalog",
        "warehouse": "fab",
        "s3_endpoint_internal": "https://s3.site-a.fab.internal:9000",
        "s3_endpoint_external": "https://s3-external.site-a.fab.internal:9000",
        "warehouse_bucket": "site-a-warehouse",
        "gold_buckets": ["site-a-gold"],
    }
    assert plan_a.outputs["artifacts"] == {"models_bucket": "site-a-models", "checkpoints_bucket": "site-a-checkpoints"}
    assert plan_a.outputs["dns_records"] == {
        "s3.site-a.fab.internal": "10.10.101.10",
        "polaris.site-a.fab.internal": "10.10.101.11",
        "s3-external.site-a.fab.internal": "198.51.100.10",
        "llm.site-a.fab.internal": "10.10.103.10",
        "airflow.site-a.fab.internal": "203.0.113.10",
        "trino.site-a.fab.internal": "203.0.113.10",
        "superset.site-a.fab.internal": "203.0.113.10",
        "jupyter.site-a.fab.internal": "203.0.113.10",
    }


def test_the_existing_object_store_is_adopted_by_default(plan_a):
    charts = sorted(
        r["inputs"]["chart"] for r in plan_a.of_type("kubernetes:helm.sh/v3:Release") if plan_a.component(r)["name"] == "storage"
    )
    assert charts == ["cloudnative-pg", "polaris"]


def test_installing_the_object_store_uses_the_pinned_vendor_charts_and_protects_it():
    config = stack_config("site-b")
    config["fab-platform:site"]["storage"]["object_store"] = {"install": True}
    config["fab-platform:aistorLicense"] = {"secure": "v1:license"}
    config["fab-platform:aistorRootPassword"] = {"secure": "v1:password"}
    plan = render_with_config("site-b", config)
    releases = {r["inputs"]["chart"]: r for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    assert (releases["aistor-operator"]["inputs"]["version"], releases["aistor-objectstore"]["inputs"]["version"]) == ("5.10.0", "1.0.16")
    store = releases["aistor-objectstore"]
    assert store["protect"] and store["retain_on_delete"]
    assert store["inputs"]["values"]["secrets"]["secretKey"] == "[secret]"
    assert releases["aistor-operator"]["inputs"]["values"]["license"] == "[secret]"


def test_fails_when_the_object_store_is_installed_without_its_secrets():
    raw = site_raw("site-b")
    raw["storage"]["object_store"] = {"install": True}
    with pytest.raises(Exception) as info:
        render_site("site-b", raw)
    assert str(info.value).splitlines() == [
        "fab-platform:aistorLicense: required because storage.object_store.install is true; set it with: "
        "pulumi config set --secret aistorLicense <value>",
        "fab-platform:aistorRootPassword: required because storage.object_store.install is true; set it with: "
        "pulumi config set --secret aistorRootPassword <value>",
    ]


def test_engine_keys_reach_a_cluster_only_once_their_policy_is_attached(plan_a):
    """A MinIO service account inherits its user's policy: its keys are delivered after the attachment."""
    by_name = {r["name"]: r for r in plan_a.resources if r["custom"]}
    delivered = [r for r in plan_a.resources if r["type"] == "kubernetes:core/v1:Secret" and r["name"].startswith("storage-s3-")]
    assert delivered
    for secret in delivered:
        engine = secret["inputs"]["metadata"]["labels"]["fab.internal/engine"]
        assert by_name[f"storage-{engine}-policy-attachment"]["urn"] in secret["dependencies"], secret["name"]
