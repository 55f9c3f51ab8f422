"""Air gap, storage part: CloudNativePG (operator and its Postgres), Polaris, AIStor (operator, what it launches, the
object store) and the program's own storage-cluster pods (Polaris setup, gold copies) from the site registry's mirror,
with its pull Secret (components/airgap/storage.py, components/object_store.py, components/polaris.py,
components/federation.py; docs/airgap.md).

The releases are rendered by a real Helm from the pinned chart packages, so an image key a chart does not read would show
as an upstream image here."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from airgap_cases import MIRROR, PULL_SECRET, SECRETS, images, not_mirrored, pods, rendered, site_registry, with_registry
from small_site import small_site

from components import versions
from components.airgap import chart_values
from components.registry import merge_values
from fabctl.render import HELM_RELEASE_TYPE, Plan, render_config
from fabctl.stackfile import SITE_KEY

SITE_U = "organization/fab-platform/site-u"
SITE_U_EXPORTS = {"federation": {
    "site": "site-u", "catalog_uri": "http://polaris.site-u.fab.internal:8181/api/catalog", "warehouse": "fab",
    "gold_namespace": "gold", "s3_endpoint": "https://s3.site-u.fab.internal:9000",
    "principals": {"site-t": {"client_id": "u-for-t", "client_secret": "u-secret-for-t"}},
    "replica_targets": {"site-t": {"endpoint": "https://s3.site-u.fab.internal:9000", "bucket": "site-u-replica-site-t",
                                   "access_key": "UKEY", "secret_key": "u-replica-secret"}},
}}
"""What site-u, which takes site-t's gold, exports to it."""
STORAGE = "site-t-storage"


def storage_site() -> dict[str, Any]:
    """The smallest site installing its object store and copying its gold to site-u."""
    site = small_site()
    site["storage"]["object_store"] = {"install": True}
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"consumers": {"site-u": {}}, "peers": {"site-u": {}}, "linked": ["site-u"],
                          "ranges": {"site-u": ["172.20.0.0/16"]}}
    return site


def render(site: dict[str, Any], secrets: dict[str, Any] | None = None) -> Plan:
    config = {SITE_KEY: site, "fab-platform:aistorLicense": {"secure": "v1:license"},
              "fab-platform:aistorRootPassword": {"secure": "v1:password"}, **copy.deepcopy(secrets or {})}
    return render_config("site-t", config, stack_references={SITE_U: SITE_U_EXPORTS})


@pytest.fixture(scope="module")
def mirrored() -> Plan:
    return render(with_registry(storage_site()), SECRETS)


@pytest.fixture(scope="module")
def upstream() -> Plan:
    return render(storage_site())


def release(plan: Plan, chart: str) -> dict[str, Any]:
    """The storage cluster's release of `chart`."""
    (found,) = [r for r in plan.of_type(HELM_RELEASE_TYPE)
                if r["inputs"]["chart"].rsplit("/", 1)[-1] == chart and plan.cluster(r) == STORAGE]
    return found


def upstream_images(objects: list[dict[str, Any]]) -> list[str]:
    found = images(objects)
    assert found
    return not_mirrored(found)


def without_pull_secret(objects: list[dict[str, Any]]) -> list[str]:
    found = pods(objects)
    assert found
    return sorted(name for name, spec in found.items() if spec.get("imagePullSecrets") != [{"name": PULL_SECRET}])


def mirrored_ref(reference: str) -> str:
    return site_registry().image(reference)


def objects_of(plan: Plan, kind: str, namespace: str) -> list[dict[str, Any]]:
    found = [o for o in plan.objects(kind, STORAGE) if o["metadata"]["namespace"] == namespace]
    assert found
    return found


# CloudNativePG ------------------------------------------------------------------------------------------------------


def test_every_image_of_the_cloudnative_pg_release_comes_from_the_mirror(mirrored, chart_dir, helm):
    """The operator's Deployment, and OPERATOR_IMAGE_NAME: the image of every Postgres pod's bootstrap init container."""
    assert upstream_images(rendered(release(mirrored, "cloudnative-pg"), chart_dir, helm)) == []


def test_the_cloudnative_pg_operator_defaults_to_the_pinned_postgres_from_the_mirror(mirrored, chart_dir, helm):
    (config,) = [o for o in rendered(release(mirrored, "cloudnative-pg"), chart_dir, helm) if o["kind"] == "ConfigMap"
                 and o["metadata"]["name"] == "cnpg-controller-manager-config"]
    assert config["data"]["POSTGRES_IMAGE_NAME"] == f"{MIRROR}/ghcr.io/cloudnative-pg/postgresql:18.4-system-trixie"


def test_the_cloudnative_pg_operator_names_the_pull_secret(mirrored, chart_dir, helm):
    assert without_pull_secret(rendered(release(mirrored, "cloudnative-pg"), chart_dir, helm)) == []


def test_the_polaris_database_runs_the_pinned_postgres_from_the_mirror_with_the_pull_secret(mirrored):
    (cluster,) = mirrored.objects("Cluster", STORAGE)
    assert (cluster["spec"]["imageName"], cluster["spec"]["imagePullSecrets"]) == (
        mirrored_ref(versions.CNPG_POSTGRES_IMAGE), [{"name": PULL_SECRET}])


def test_without_a_registry_the_polaris_database_leaves_its_image_to_the_operator(upstream):
    (cluster,) = upstream.objects("Cluster", STORAGE)
    assert {"imageName", "imagePullSecrets"} & set(cluster["spec"]) == set()


# Polaris --------------------------------------------------------------------------------------------------------------


def test_every_image_of_the_polaris_release_comes_from_the_mirror_with_the_pull_secret(mirrored, chart_dir, helm):
    """The server and, switched on, a maintenance CronJob (the admin tool): each image key is one the chart reads."""
    polaris = copy.deepcopy(release(mirrored, "polaris"))
    polaris["inputs"]["values"] = merge_values(polaris["inputs"]["values"],
                                               {"maintenance": {"jobs": {"nosql-maintenance": {"enabled": True}}}})
    objects = rendered(polaris, chart_dir, helm)
    assert {"Deployment/polaris", "CronJob/polaris-nosql-maintenance"} <= set(pods(objects))
    assert (upstream_images(objects), without_pull_secret(objects)) == ([], [])


def test_the_polaris_jobs_run_from_the_mirror_with_the_pull_secret(mirrored):
    jobs = objects_of(mirrored, "Job", "polaris")
    assert {job["metadata"]["name"]: (upstream_images([job]), without_pull_secret([job])) for job in jobs} == {
        job["metadata"]["name"]: ([], []) for job in jobs}


def test_without_a_registry_the_polaris_jobs_pull_their_pinned_images_upstream(upstream):
    pod_images = {(c["image"], "imagePullSecrets" in job["spec"]["template"]["spec"])
                  for job in objects_of(upstream, "Job", "polaris") for c in job["spec"]["template"]["spec"]["containers"]}
    assert pod_images == {(versions.POLARIS_ADMIN_TOOL_IMAGE, False), (versions.SETUP_IMAGE, False)}


# AIStor ---------------------------------------------------------------------------------------------------------------


def operand_configs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """image name -> its entry in the operators' ConfigMaps (what the operator launches it with)."""
    return {name: yaml.safe_load(text) for o in objects
            if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-operator") for name, text in o["data"].items()}


def test_every_image_of_the_aistor_operator_comes_from_the_mirror(mirrored, chart_dir, helm):
    assert upstream_images(rendered(release(mirrored, "aistor-operator"), chart_dir, helm)) == []


def test_the_aistor_operator_launches_its_operands_from_the_mirror_with_the_pull_secret(mirrored, chart_dir, helm):
    """MinIO, its sidecar, KES and its sidecar, the firewall and mc: what the operator reads from its ConfigMaps."""
    configs = operand_configs(rendered(release(mirrored, "aistor-operator"), chart_dir, helm))
    assert set(configs) == {"minio", "minio-sidecar", "kes", "kes-sidecar", "minwall", "mc"}
    assert {name: (c["image"].startswith(f"{MIRROR}/quay.io/minio/aistor/{name}:"), c["imagePullSecrets"])
            for name, c in configs.items()} == {name: (True, [{"name": PULL_SECRET}]) for name in configs}


def test_the_aistor_operator_pods_name_the_pull_secret(mirrored, chart_dir, helm):
    assert without_pull_secret(rendered(release(mirrored, "aistor-operator"), chart_dir, helm)) == []


def test_the_object_store_names_the_pull_secret(mirrored, chart_dir, helm):
    (store,) = [o for o in rendered(release(mirrored, "aistor-objectstore"), chart_dir, helm) if o["kind"] == "ObjectStore"]
    assert store["spec"]["imagePullSecret"] == {"name": PULL_SECRET}


def test_without_a_pull_secret_the_aistor_charts_name_none():
    registry = site_registry(pull_secret=None)
    assert (chart_values(versions.AISTOR_OPERATOR, registry), chart_values(versions.AISTOR_OBJECTSTORE, registry)) == (
        {"repositories": {"aistor": {"hostname": f"{MIRROR}/quay.io/minio/aistor", "pathPrefix": ""}}}, {})


# Federation -----------------------------------------------------------------------------------------------------------


def test_the_gold_copy_job_runs_mc_from_the_mirror_with_the_pull_secret(mirrored):
    (cron,) = objects_of(mirrored, "CronJob", "fab-replication")
    assert (upstream_images([cron]), without_pull_secret([cron])) == ([], [])
    (mirror,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert mirror["image"] == mirrored_ref(versions.WEIGHTS_SYNC_IMAGE)


def test_without_a_registry_the_gold_copy_job_is_unchanged(upstream):
    (cron,) = objects_of(upstream, "CronJob", "fab-replication")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "imagePullSecrets" not in pod
    assert {c["image"] for c in [*pod["initContainers"], *pod["containers"]]} == {versions.WEIGHTS_SYNC_IMAGE}
