"""StorageCluster behaviour on small sites: least privilege, nothing lost, endpoints, Polaris on Postgres, contracts."""

from __future__ import annotations

import json

import pytest

from fabctl.stackfile import SITE_KEY
from helpers import render_config, render_small
from small_site import full_site, small_site

READ = {"s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketLocation", "s3:ListBucket"}
WRITE = READ | {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads"}

# The access table, written out independently of components/storage.py. Training has a principal per team,
# confined to its prefixes (tests/components/test_team_credentials.py).
EXPECTED_CLASSES = {
    "spark": {"raw": WRITE, "warehouse": WRITE},
    "trino": {"warehouse": READ, "gold": READ},
    "starrocks": {"warehouse": READ, "gold": READ, "olap": WRITE},
    "polaris": {"warehouse": WRITE, "gold": WRITE},
    "inference": {"models": READ},
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
    """The storage engines' policies (the federation's replica writers and the training teams' have their own tests)."""
    return {
        r["inputs"]["name"].removeprefix("fab-"): json.loads(r["inputs"]["policy"]) for r in plan.of_type("minio:index/iamPolicy:IamPolicy")
        if plan.component(r)["name"] == "storage" and not r["inputs"]["name"].startswith("fab-training-")
    }


def storage_objects(plan, kind: str) -> list[dict]:
    return plan.objects(kind, "site-t-storage")


def named(objects: list[dict], name: str) -> dict:
    (obj,) = [o for o in objects if o["metadata"]["name"] == name]
    return obj


@pytest.mark.parametrize("engine", sorted(EXPECTED_CLASSES))
def test_each_engine_gets_exactly_its_buckets_and_actions(full_plan, engine):
    # The full site has one bucket of every class, named site-t-<class> but for raw-fdc and pg-backups.
    bucket_of = {"raw": "site-t-raw-fdc", "backups": "site-t-pg-backups"}
    expected = {bucket_of.get(data_class, f"site-t-{data_class}"): actions for data_class, actions in EXPECTED_CLASSES[engine].items()}
    assert set(expected) <= set(full_site()["storage"]["buckets"])
    assert allowed(policies(full_plan)[engine]) == expected


def test_every_engine_has_a_policy_user_and_keys(small_plan):
    engines = sorted(EXPECTED_CLASSES)
    assert sorted(policies(small_plan)) == engines
    users = [r for r in small_plan.of_type("minio:index/iamUser:IamUser") if small_plan.component(r)["name"] == "storage"]
    assert sorted(r["inputs"]["name"] for r in users) == sorted([*(f"fab-{e}" for e in engines), "fab-training-yield"])


def test_no_policy_grants_s3_star_or_a_wildcard_bucket(plan):
    assert policies(plan)
    for engine, policy in policies(plan).items():
        for statement in policy["Statement"]:
            if statement["Effect"] == "Allow":
                assert not any(a in ("*", "s3:*") for a in statement["Action"]), engine
                assert not any("*" in r.removeprefix("arn:aws:s3:::").split("/", 1)[0] for r in statement.get("Resource", [])), engine


def test_every_policy_denies_the_object_stores_table_catalog(small_plan):
    assert policies(small_plan)
    for engine, policy in policies(small_plan).items():
        denies = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
        assert [s["Action"] for s in denies] == [["s3tables:*"]], engine


def test_buckets_are_protected_and_kept_on_delete(plan):
    buckets = plan.of_type("minio:index/s3Bucket:S3Bucket")
    assert buckets
    assert all(b["protect"] and b["retain_on_delete"] and b["inputs"]["forceDestroy"] is False for b in buckets)


def test_stateful_resources_are_protected_and_retained(full_plan):
    stateful = {
        r["name"]: (r["protect"], r["retain_on_delete"])
        for r in full_plan.resources
        if r["type"] in ("minio:index/s3Bucket:S3Bucket", "keycloak:index/realm:Realm", "kubernetes:postgresql.cnpg.io/v1:Cluster")
        or r["type"].endswith("v1:PersistentVolumeClaim")
    }
    buckets = ("checkpoints", "datasets", "gold", "models", "olap", "pg-backups", "raw-fdc", "warehouse")
    assert stateful == {
        **{f"storage-bucket-site-t-{b}": (True, True) for b in buckets},
        "storage-polaris-db": (True, True), "compute-airflow-db": (True, True), "compute-superset-db": (True, True),
    }


def test_only_warehouse_models_and_checkpoints_are_versioned(full_plan):
    versioned = sorted(r["inputs"]["bucket"] for r in full_plan.of_type("minio:index/s3BucketVersioning:S3BucketVersioning"))
    assert versioned == ["site-t-checkpoints", "site-t-models", "site-t-warehouse"]


def test_lifecycle_rules_come_from_config(full_plan):
    rules = {r["inputs"]["bucket"]: r["inputs"]["rules"] for r in full_plan.of_type("minio:index/ilmPolicy:IlmPolicy")}
    assert rules == {
        "site-t-raw-fdc": [{"id": "retention", "expiration": "730d"}],
        "site-t-checkpoints": [{"id": "retention", "expiration": "90d"}, {"id": "noncurrent-expiry", "noncurrentVersionExpirationDays": 7}],
    }


def test_every_bucket_is_tagged_with_its_class_and_residency(full_plan):
    tags = {r["inputs"]["bucket"]: r["inputs"]["tags"] for r in full_plan.of_type("pulumi-python:dynamic/storage:BucketTags")}
    local = lambda data_class: {"fab.internal/class": data_class, "fab.internal/residency": "site-local", "fab.internal/site": "site-t"}  # noqa: E731
    assert tags == {
        "site-t-gold": {"fab.internal/class": "gold", "fab.internal/residency": "replicable", "fab.internal/site": "site-t"},
        "site-t-raw-fdc": local("raw"), "site-t-warehouse": local("warehouse"), "site-t-datasets": local("datasets"),
        "site-t-models": local("models"), "site-t-checkpoints": local("checkpoints"), "site-t-pg-backups": local("backups"),
        "site-t-olap": local("olap"),
    }


def test_a_peers_replica_bucket_is_tagged_as_a_replica():
    site = small_site()
    site["federation"] = {"peers": {"site-u": {}}, "ranges": {"site-u": ["172.20.0.0/16"]}}
    tags = {r["inputs"]["bucket"]: r["inputs"]["tags"] for r in render_small(site).of_type("pulumi-python:dynamic/storage:BucketTags")}
    assert tags["site-t-replica-site-u"]["fab.internal/residency"] == "replica"


def test_s3_endpoints_are_separate_local_vips_on_their_pools(full_plan):
    services = storage_objects(full_plan, "Service")
    internal, external = named(services, "s3-internal"), named(services, "s3-external")
    assert (internal["metadata"]["labels"], internal["metadata"]["annotations"]) == (
        {"lb.fab.internal/pool": "internal"},
        {"lbipam.cilium.io/ips": "10.30.101.10", "external-dns.alpha.kubernetes.io/hostname": "s3.site-t.fab.internal"},
    )
    assert (external["metadata"]["labels"], external["metadata"]["annotations"]) == (
        {"lb.fab.internal/pool": "external"},
        {"lbipam.cilium.io/ips": "198.51.100.10", "external-dns.alpha.kubernetes.io/hostname": "s3-external.site-t.fab.internal"},
    )
    for service in (internal, external):
        assert service["spec"]["type"] == "LoadBalancer"
        assert service["spec"]["externalTrafficPolicy"] == "Local"
        assert service["spec"]["selector"] == {"aistor.min.io/objectStore": "aistor"}


def test_a_site_without_an_external_endpoint_has_none(small_plan):
    services = sorted(o["metadata"]["name"] for c, o, r in small_plan.manifests() if o["kind"] == "Service" and small_plan.component(r)["name"] == "storage")
    assert services == ["polaris-rest", "s3-internal"]
    assert small_plan.outputs["data"]["s3_endpoint_external"] is None


def test_storage_lives_on_the_storage_cluster_and_the_object_store(full_plan):
    placed = {}
    for resource in full_plan.resources:
        top = full_plan.component(resource)
        if resource["custom"] and top and top["name"] == "storage" and resource["provider"]:
            delivered = resource["type"] == "kubernetes:core/v1:Secret" and resource["inputs"]["metadata"]["name"].startswith(("s3-", "polaris-", "fab-site-ca"))
            placed[resource["name"]] = "delivered" if delivered else full_plan.target(resource)
    assert set(placed.values()) == {"delivered", "site-t-storage", "site-t-minio"}


def test_credentials_are_delivered_into_the_consuming_cluster(small_plan):
    (secret,) = [r for r in small_plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "s3-inference"]
    assert (small_plan.target(secret), secret["inputs"]["metadata"]["namespace"]) == ("site-t-gpu", "inference")


def test_polaris_database_is_a_three_instance_cnpg_cluster_backed_up_to_aistor(small_plan):
    (cluster,) = storage_objects(small_plan, "Cluster")
    spec = cluster["spec"]
    assert (cluster["apiVersion"], spec["instances"]) == ("postgresql.cnpg.io/v1", 3)
    store = spec["backup"]["barmanObjectStore"]
    assert store["destinationPath"] == "s3://site-t-pg-backups/polaris-db"
    assert store["endpointURL"] == "https://s3.site-t.fab.internal:9000"
    assert store["s3Credentials"]["accessKeyId"] == {"name": "s3-postgres-backup", "key": "AWS_ACCESS_KEY_ID"}


def test_polaris_runs_on_the_cnpg_database_with_one_signing_key(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "polaris"]
    values = release["inputs"]["values"]
    assert values["persistence"] == {
        "type": "relational-jdbc",
        "relationalJdbc": {"secret": {"name": "polaris-db-app", "username": "username", "password": "password", "jdbcUrl": "jdbc-uri"}},
    }
    assert values["authentication"]["tokenBroker"]["secret"]["name"] == "polaris-token-broker"
    assert values["storage"]["secret"]["name"] == "s3-polaris"


def test_polaris_rest_endpoint_is_an_internal_local_vip(small_plan):
    service = named(storage_objects(small_plan, "Service"), "polaris-rest")
    assert service["metadata"]["labels"] == {"lb.fab.internal/pool": "internal"}
    assert service["metadata"]["annotations"] == {
        "lbipam.cilium.io/ips": "10.30.101.11", "external-dns.alpha.kubernetes.io/hostname": "polaris.site-t.fab.internal",
        # A phase 5 site announces it as a ClusterMesh global service (tests/components/test_global_services.py).
        "service.cilium.io/global": "true", "service.cilium.io/affinity": "local",
    }
    assert service["spec"]["ports"] == [{"name": "rest", "port": 8181, "targetPort": 8181, "protocol": "TCP"}]
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_polaris_starts_after_the_bootstrap_job(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "polaris"]
    (bootstrap,) = [r for r in small_plan.of_type("kubernetes:batch/v1:Job") if r["name"] == "storage-job-polaris-bootstrap"]
    assert bootstrap["urn"] in release["dependencies"]


def setup_plan(plan) -> dict:
    (config_map,) = [c for c in storage_objects(plan, "ConfigMap") if c["metadata"]["name"] == "polaris-setup"]
    return json.loads(config_map["data"]["plan.json"])


READ_TABLES = ["NAMESPACE_READ_PROPERTIES", "TABLE_LIST", "TABLE_READ_PROPERTIES", "TABLE_READ_DATA"]


def test_setup_plan_declares_the_catalog_roles_and_principals(full_plan):
    plan = setup_plan(full_plan)
    assert plan["catalog"]["storageConfigInfo"]["allowedLocations"] == ["s3://site-t-warehouse/", "s3://site-t-gold/"]
    assert plan["namespaces"] == [{"name": ["gold"], "properties": {"location": "s3://site-t-gold/gold/"}}]
    assert {p["name"]: p["catalog_roles"] for p in plan["principals"]} == {
        "fab-spark": ["writer"],
        "fab-starrocks": ["reader"],
        "fab-trino": ["reader"],
    }
    assert plan["catalog_roles"] == {
        "gold-reader": [{"type": "namespace", "namespace": ["gold"], "privilege": p} for p in READ_TABLES],
        "reader": [{"type": "catalog", "privilege": p} for p in ["NAMESPACE_LIST", *READ_TABLES]],
        "writer": [{"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}],
    }


def test_credentials_reach_kubernetes_only_as_pulumi_secrets(small_plan):
    secrets = [r for r in small_plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["type"] == "Opaque"]
    assert {r["inputs"]["metadata"]["name"] for r in secrets} >= {"s3-polaris", "s3-postgres-backup", "polaris-root"}
    for resource in secrets:
        assert "stringData" in resource["secret_inputs"], resource["name"]
        assert set(resource["inputs"]["stringData"].values()) == {"[secret]"}


def test_no_credential_appears_in_helm_values(small_plan):
    releases = small_plan.of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    text = json.dumps([r["inputs"] for r in releases])
    assert "AKIA" not in text and "MOCK" not in text


def test_outputs_carry_the_data_and_artifacts_contracts(full_plan):
    assert full_plan.outputs["data"] == {
        "catalog_uri": "http://polaris.site-t.fab.internal:8181/api/catalog",
        "warehouse": "fab",
        "s3_endpoint_internal": "https://s3.site-t.fab.internal:9000",
        "s3_endpoint_external": "https://s3-external.site-t.fab.internal:9000",
        "warehouse_bucket": "site-t-warehouse",
        "gold_buckets": ["site-t-gold"],
    }
    assert full_plan.outputs["artifacts"] == {"models_bucket": "site-t-models", "checkpoints_bucket": "site-t-checkpoints"}
    assert full_plan.outputs["dns_records"] == {
        "s3.site-t.fab.internal": "10.30.101.10",
        "polaris.site-t.fab.internal": "10.30.101.11",
        "s3-external.site-t.fab.internal": "198.51.100.10",
        "llm.site-t.fab.internal": "10.30.103.10",
        "airflow.site-t.fab.internal": "203.0.113.20",
        "trino.site-t.fab.internal": "203.0.113.20",
        "superset.site-t.fab.internal": "203.0.113.20",
        "jupyter.site-t.fab.internal": "203.0.113.20",
    }


def test_the_existing_object_store_is_adopted_by_default(small_plan):
    charts = sorted(
        r["inputs"]["chart"] for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if small_plan.component(r)["name"] == "storage"
    )
    assert charts == ["cloudnative-pg", "polaris"]


def installing_site() -> dict:
    site = small_site()
    site["storage"]["object_store"] = {"install": True}
    return site


def test_installing_the_object_store_uses_the_pinned_vendor_charts_and_protects_it():
    config = {SITE_KEY: installing_site(), "fab-platform:aistorLicense": {"secure": "v1:license"},
              "fab-platform:aistorRootPassword": {"secure": "v1:password"}}
    plan = render_config("site-t", config)
    releases = {r["inputs"]["chart"]: r for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    assert (releases["aistor-operator"]["inputs"]["version"], releases["aistor-objectstore"]["inputs"]["version"]) == ("5.10.0", "1.0.16")
    store = releases["aistor-objectstore"]
    assert store["protect"] and store["retain_on_delete"]
    assert store["inputs"]["values"]["secrets"]["secretKey"] == "[secret]"
    assert releases["aistor-operator"]["inputs"]["values"]["license"] == "[secret]"


def test_fails_when_the_object_store_is_installed_without_its_secrets():
    with pytest.raises(Exception) as info:
        render_small(installing_site())
    assert str(info.value).splitlines() == [
        "fab-platform:aistorLicense: required because storage.object_store.install is true; set it with: "
        "pulumi config set --secret aistorLicense <value>",
        "fab-platform:aistorRootPassword: required because storage.object_store.install is true; set it with: "
        "pulumi config set --secret aistorRootPassword <value>",
    ]


def test_engine_keys_reach_a_cluster_only_once_their_policy_is_attached(small_plan):
    """A MinIO service account inherits its user's policy: its keys are delivered after the attachment."""
    by_name = {r["name"]: r for r in small_plan.resources if r["custom"]}
    delivered = [r for r in small_plan.resources if r["type"] == "kubernetes:core/v1:Secret" and r["name"].startswith("storage-s3-")]
    assert delivered
    for secret in delivered:
        labels = secret["inputs"]["metadata"]["labels"]
        owner = "-".join(labels[key] for key in ("fab.internal/engine", "fab.internal/team") if key in labels)  # training-<team>
        assert by_name[f"storage-{owner}-policy-attachment"]["urn"] in secret["dependencies"], secret["name"]
