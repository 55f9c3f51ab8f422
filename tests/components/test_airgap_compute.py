"""The compute part on a site with a registry (docs/airgap.md): the image values of the compute charts
(the engines' `EngineChart`s, components/engines), the images and pull Secret of the compute components, and Spark's
packages from the site's Maven repository only (components/engines/_spark_packages.py). Without a registry nothing changes."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from airgap_cases import (
    CHART_REPOSITORY,
    MAVEN,
    MIRROR,
    PULL_SECRET,
    SECRETS,
    images,
    not_mirrored,
    pinned_release,
    rendered,
    site_registry,
    with_registry,
)
from cryptography.hazmat.primitives.serialization import pkcs12
from helpers import render_small
from small_site import add_gpu_notebooks, small_site

from components import versions
from components.airgap import chart_values
from components.config import GpuNotebooksConfig, RegistryConfig, SparkRapidsConfig
from components.engines import CHART_IMAGES, airflow, spark
from components.engines import _spark_connect as spark_connect
from components.engines import _spark_packages as packages
from components.jvm_trust import trust_store
from components.notebooks import hub_values
from components.registry import UPSTREAM, Registry
from components.spark_rapids import spark_rapids_application
from fabctl.check.mirror import pod_specs
from fabctl.render import PROJECT_DIR

CA_BUNDLE = "certs/site-b-ca.pem"
SITE_REGISTRY = site_registry()
TRUSTING = Registry(SITE_REGISTRY.mirror, ca_file=CA_BUNDLE)
"""The registry with a CA of the site's PKI (`registry.ca_bundle`)."""
CATALOG = "http://polaris.site-t.fab.internal:8181/api/catalog"

CHARTS = {chart.chart: chart for chart in (versions.SPARK_OPERATOR, versions.YUNIKORN, versions.TRINO,
                                           versions.STARROCKS_OPERATOR, versions.JUPYTERHUB, versions.ARGO_CD)}
"""The compute charts packaged in ../shared/charts (Airflow's and Superset's are not)."""
EVERY_PART = {
    # Components the charts leave off by default, switched on so that their images are rendered too.
    "spark-operator": {"hook": {"upgradeCrd": True}},
    "trino": {"jmx": {"enabled": True, "exporter": {"enabled": True}}},
    "argo-cd": {"dex": {"enabled": True}, "redis": {"exporter": {"enabled": True}}, "commitServer": {"enabled": True},
                "server": {"extensions": {"enabled": True}}},
    "jupyterhub": {"proxy": {"https": {"enabled": True, "type": "letsencrypt", "hosts": ["jupyter.example"],
                                       "letsencrypt": {"contactEmail": "ops@example.org"}}},
                   "scheduling": {"userPlaceholder": {"replicas": 1}}},
}


def _rendered(chart: str, chart_dir: Path, helm: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    return rendered(pinned_release(chart, CHARTS[chart], "fab", values), chart_dir, helm)


def _merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overlay.items():
        merged[key] = _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_every_image_of_the_chart_comes_from_the_mirror(chart, chart_dir, helm):
    objects = _rendered(chart, chart_dir, helm, _merged(EVERY_PART.get(chart, {}), CHART_IMAGES[chart](SITE_REGISTRY)))
    assert images(objects), f"{chart} renders no image"
    assert not_mirrored(images(objects)) == []


RUN_TIME = {"yunikorn": {versions.YUNIKORN_PLACEHOLDER_IMAGE}}
"""Images an operator launches at run time, which its chart names only once the values set them."""


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_the_mirror_keeps_each_images_source_and_tag(chart, chart_dir, helm):
    upstream = images(_rendered(chart, chart_dir, helm, EVERY_PART.get(chart, {})))
    mirrored = images(_rendered(chart, chart_dir, helm, _merged(EVERY_PART.get(chart, {}), CHART_IMAGES[chart](SITE_REGISTRY))))
    assert upstream
    assert mirrored == {SITE_REGISTRY.image(ref) for ref in upstream | RUN_TIME.get(chart, set())}


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_every_pod_of_the_chart_names_the_pull_secret(chart, chart_dir, helm):
    objects = _rendered(chart, chart_dir, helm, _merged(EVERY_PART.get(chart, {}), CHART_IMAGES[chart](SITE_REGISTRY)))
    pods = [(obj["kind"], obj["metadata"]["name"], spec) for obj in objects for _, spec in pod_specs(obj.get("spec") or {})]
    assert pods
    assert [(kind, name) for kind, name, spec in pods if {"name": PULL_SECRET} not in (spec.get("imagePullSecrets") or [])] == []


def test_jupyterhub_hands_the_pull_secret_to_the_servers_it_spawns():
    # z2jh's hub config: KubeSpawner.image_pull_secrets from the top-level imagePullSecrets (files/hub/jupyterhub_config.py).
    assert CHART_IMAGES["jupyterhub"](SITE_REGISTRY)["imagePullSecrets"] == [PULL_SECRET]


def test_yunikorn_starts_its_placeholders_from_the_mirror():
    defaults = CHART_IMAGES["yunikorn"](SITE_REGISTRY)["yunikornDefaults"]
    assert defaults == {"service.placeholderImage": f"{MIRROR}/registry.k8s.io/pause:3.7"}


def test_a_chart_without_the_pull_secret_gets_no_pull_secret_keys():
    registry = Registry(RegistryConfig(charts=CHART_REPOSITORY, images=MIRROR))
    values = {chart: entry(registry) for chart, entry in CHART_IMAGES.items()}
    assert (values["yunikorn"]["imagePullSecrets"], values["jupyterhub"]["imagePullSecrets"], values["trino"]["imagePullSecrets"],
            "registry" in values["airflow"]) == ([], [], [], False)


AIRFLOW_KEYS = {"defaultAirflowRepository", "images.statsd.repository", "images.redis.repository", "images.pgbouncer.repository",
                "images.pgbouncerExporter.repository", "images.gitSync.repository", "registry.secretName"}
"""Airflow chart 1.22.0's image and pull-secret keys (its values.yaml: `defaultAirflowRepository`, `images.*`, `registry`)."""
SUPERSET_KEYS = {"image.repository", "initImage.repository", "supersetWebsockets.image.repository", "imagePullSecrets"}
"""Superset chart 0.22.4's (its values.yaml: `image`, `initImage`, `supersetWebsockets.image`, `imagePullSecrets`)."""


def _paths(values: dict[str, Any], prefix: str = "") -> set[str]:
    return {p for key, value in values.items()
            for p in (_paths(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}"})}


def test_the_airflow_and_superset_values_are_their_charts_image_keys():
    # Neither chart is packaged in ../shared/charts: the keys are checked by hand against the values.yaml of the pinned version.
    assert (_paths(CHART_IMAGES["airflow"](SITE_REGISTRY)), _paths(CHART_IMAGES["superset"](SITE_REGISTRY))) == (AIRFLOW_KEYS, SUPERSET_KEYS)


def test_airflow_and_superset_images_come_from_the_mirror():
    airflow_values, superset_values = CHART_IMAGES["airflow"](SITE_REGISTRY), CHART_IMAGES["superset"](SITE_REGISTRY)
    repositories = [airflow_values["defaultAirflowRepository"], *(image["repository"] for image in airflow_values["images"].values()),
                    superset_values["image"]["repository"], superset_values["initImage"]["repository"],
                    superset_values["supersetWebsockets"]["image"]["repository"]]
    assert [r for r in repositories if not r.startswith(f"{MIRROR}/")] == []


def test_without_a_registry_no_compute_chart_gets_values():
    assert {chart: chart_values(pinned, UPSTREAM) for chart, pinned in CHARTS.items()} == {chart: {} for chart in CHARTS}


# Spark's packages.

def test_the_ivy_settings_name_the_sites_repository_as_the_only_resolver():
    settings = packages.ivy_settings(MAVEN)
    assert (settings.count("<ibiblio "), f'root="{MAVEN}/"' in settings, "maven.org" in settings) == (1, True, False)


def test_spark_resolves_with_the_settings_file_not_its_own_chain():
    assert packages.spark_conf(SITE_REGISTRY) == {"spark.jars.ivySettings": "/etc/spark-maven/ivysettings.xml", "spark.jars.ivy": "/tmp/ivy"}


def test_the_trust_store_holds_every_certificate_of_the_registry_ca():
    pem = (PROJECT_DIR / CA_BUNDLE).read_text()
    store = pkcs12.load_pkcs12(trust_store(pem), None)
    assert len(store.additional_certs) == pem.count("-----BEGIN CERTIFICATE-----") > 0


def test_the_trust_store_is_the_same_for_the_same_certificates():
    pem = (PROJECT_DIR / CA_BUNDLE).read_text()
    assert trust_store(pem) == trust_store(pem)


def test_java_reads_the_trust_store(tmp_path):
    keytool = subprocess.run(["which", "keytool"], capture_output=True, text=True, check=False).stdout.strip()
    if not keytool:
        pytest.skip("no JDK keytool on this machine")
    store = tmp_path / "truststore.p12"
    store.write_bytes(trust_store((PROJECT_DIR / CA_BUNDLE).read_text()))
    listed = subprocess.run([keytool, "-list", "-keystore", str(store), "-storetype", "PKCS12", "-storepass", ""],
                            capture_output=True, text=True, check=False)
    assert listed.stdout.count("trustedCertEntry") == (PROJECT_DIR / CA_BUNDLE).read_text().count("-----BEGIN CERTIFICATE-----")


def test_the_jvms_trust_the_registry_ca_only_when_it_has_one():
    assert (packages.java_env(SITE_REGISTRY), [e["name"] for e in packages.java_env(TRUSTING)]) == ([], ["JAVA_TOOL_OPTIONS"])


def test_the_operator_controller_keeps_its_tmp_volume_beside_the_settings():
    values = packages.operator_controller_values(SITE_REGISTRY)
    assert [v["name"] for v in values["volumes"]] == ["tmp", "spark-maven"]
    assert [m["mountPath"] for m in values["volumeMounts"]] == ["/tmp", "/etc/spark-maven"]


def test_the_connect_server_resolves_from_the_sites_repository():
    conf = spark_connect.server_conf(8, "spark-team-yield", SITE_REGISTRY)
    assert (conf["spark.jars.ivySettings"], conf["spark.kubernetes.container.image"]) == (
        "/etc/spark-maven/ivysettings.xml", f"{MIRROR}/docker.io/{versions.SPARK_IMAGE}")


def test_the_connect_executors_pull_from_the_mirror_with_the_pull_secret():
    spec = spark_connect.executor_template(SITE_REGISTRY)["spec"]
    assert (spec["containers"][0]["image"], spec["imagePullSecrets"]) == (f"{MIRROR}/docker.io/{versions.SPARK_IMAGE}",
                                                                       [{"name": PULL_SECRET}])


def test_the_airflow_spark_template_resolves_from_the_sites_repository():
    spec = spark.spark_application_template(CATALOG, TRUSTING)["spec"]
    assert spec["sparkConf"] == {**spark.spark_conf(CATALOG), **packages.spark_conf(SITE_REGISTRY)}
    assert (spec["imagePullSecrets"], spec["volumes"], spec["driver"]["volumeMounts"], spec["driver"]["env"]) == (
        [PULL_SECRET], [*spark.SCRATCH["volumes"], *packages.volumes(SITE_REGISTRY)],
        [*spark.SCRATCH["volumeMounts"], *packages.volume_mounts(SITE_REGISTRY)], packages.java_env(TRUSTING))


def test_the_rapids_template_resolves_the_rapids_jar_from_the_sites_repository():
    spec = spark_rapids_application(SparkRapidsConfig(), CATALOG, registry=SITE_REGISTRY)["spec"]
    assert (spec["sparkConf"]["spark.jars.packages"], spec["sparkConf"]["spark.jars.ivySettings"], spec["image"]) == (
        versions.SPARK_RAPIDS, "/etc/spark-maven/ivysettings.xml", f"{MIRROR}/docker.io/{versions.SPARK_IMAGE}")
    assert spec["driver"]["volumeMounts"] == [*spark.SCRATCH["volumeMounts"], *packages.volume_mounts(SITE_REGISTRY)]


def test_the_feature_job_keeps_the_templates_volumes():
    from components.dags import serving_loop_steps

    template = spark.spark_application_template(CATALOG, SITE_REGISTRY)
    platform = airflow.platform_settings(models_bucket="m", checkpoints_bucket="c", spark_on=True, serving_repo=None, registry=SITE_REGISTRY)
    app = serving_loop_steps.feature_application(template, platform, [])
    assert [v["name"] for v in app["spec"]["volumes"]] == ["tmp", "spark-maven", airflow.FEATURE_JOB]


def test_the_feature_step_pulls_the_platforms_spark_image_from_the_mirror():
    platform = airflow.platform_settings(models_bucket="m", checkpoints_bucket="c", spark_on=True, serving_repo=None, registry=SITE_REGISTRY)
    assert platform["spark"]["image"] == f"{MIRROR}/docker.io/{versions.SPARK_IMAGE}"


def test_the_dags_jobs_pull_their_images_from_the_mirror_with_the_pull_secret():
    platform = airflow.platform_settings(models_bucket="m", checkpoints_bucket="c", spark_on=False, serving_repo=None, registry=SITE_REGISTRY)
    assert (platform["images"], platform["image_pull_secrets"]) == (
        {"s3": SITE_REGISTRY.image(versions.WEIGHTS_SYNC_IMAGE), "python": f"{MIRROR}/docker.io/library/{versions.SETUP_IMAGE}"},
        [{"name": PULL_SECRET}])


def test_a_configured_notebook_image_is_pulled_from_the_mirror():
    config = GpuNotebooksConfig(cluster="gpu", vip="10.30.103.11", team_quotas={"yield": 2},
                                image="quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02")
    spawner = hub_values(config, "nvidia.com/gpu.shared", "https://kc/realms/fab", "https://x/hub/oauth_callback", SITE_REGISTRY)
    assert spawner["hub"]["config"]["KubeSpawner"]["image"] == f"{MIRROR}/quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02"


# Without a registry.

def test_without_a_registry_the_spark_settings_are_unchanged():
    assert (packages.spark_conf(UPSTREAM), packages.java_env(UPSTREAM), packages.volumes(UPSTREAM),
            packages.operator_controller_values(UPSTREAM)) == ({"spark.jars.ivy": "/tmp/ivy"}, [], [], {})


def test_without_a_registry_the_templates_have_no_registry_fields():
    spec = spark.spark_application_template(CATALOG)["spec"]
    rapids = spark_rapids_application(SparkRapidsConfig(), CATALOG)["spec"]
    assert ("imagePullSecrets" in spec, "spark.jars.ivySettings" in spec["sparkConf"], spec["volumes"], spec["driver"]["volumeMounts"],
            {"imagePullSecrets", "spark.jars.ivySettings"} & (set(rapids) | set(rapids["sparkConf"])), rapids["volumes"],
            rapids["image"]) == (False, False, spark.SCRATCH["volumes"], spark.SCRATCH["volumeMounts"], set(), spark.SCRATCH["volumes"],
                                 versions.SPARK_IMAGE)


def test_without_a_registry_the_connect_server_is_unchanged():
    conf = spark_connect.server_conf(8, "spark-team-yield")
    spec = spark_connect.executor_template()["spec"]
    assert ("spark.jars.ivySettings" in conf, conf["spark.kubernetes.container.image"], "imagePullSecrets" in spec) == (
        False, versions.SPARK_IMAGE, False)


# The rendered site.

@pytest.fixture(scope="module")
def airgapped_plan():
    site = small_site()
    add_gpu_notebooks(site)
    return render_small(with_registry(site, ca_bundle=CA_BUNDLE), secrets=SECRETS)


def _config_maps(plan, name: str) -> dict[str, dict[str, Any]]:
    return {f"{plan.cluster(r)}/{r['inputs']['metadata']['namespace']}": r["inputs"]
            for r in plan.of_type("kubernetes:core/v1:ConfigMap") if r["inputs"]["metadata"]["name"] == name}


def test_the_ivy_settings_are_wherever_spark_resolves_packages(airgapped_plan):
    assert set(_config_maps(airgapped_plan, packages.CONFIG_MAP)) == {
        "site-t-compute/spark-operator", "site-t-compute/spark", "site-t-compute/spark-team-yield"}


def test_the_settings_config_map_holds_the_registry_ca_trust_store(airgapped_plan):
    (config_map, *_) = _config_maps(airgapped_plan, packages.CONFIG_MAP).values()
    store = pkcs12.load_pkcs12(base64.b64decode(config_map["binaryData"][packages.TRUST_STORE_KEY]), None)
    assert store.additional_certs


def test_the_connect_server_mounts_the_settings_and_names_the_pull_secret(airgapped_plan):
    (server,) = [r["inputs"] for r in airgapped_plan.of_type("kubernetes:apps/v1:Deployment")
                 if r["inputs"]["metadata"]["name"] == spark_connect.NAME]
    pod = server["spec"]["template"]["spec"]
    assert (pod["imagePullSecrets"], packages.VOLUME in {v["name"] for v in pod["volumes"]},
            pod["containers"][0]["image"]) == ([{"name": PULL_SECRET}], True, f"{MIRROR}/docker.io/{versions.SPARK_IMAGE}")


def test_the_airflow_template_config_map_carries_the_settings(airgapped_plan):
    (config_map,) = _config_maps(airgapped_plan, airflow.SPARK_TEMPLATE).values()
    app = yaml.safe_load(config_map["data"]["sparkapplication.yaml"])
    assert app["spec"]["sparkConf"]["spark.jars.ivySettings"] == "/etc/spark-maven/ivysettings.xml"


def test_the_starrocks_cluster_pulls_fe_and_cn_from_the_mirror(airgapped_plan):
    (cluster,) = [r["inputs"] for r in airgapped_plan.of_type("kubernetes:starrocks.com/v1:StarRocksCluster")]
    fe, cn = cluster["spec"]["starRocksFeSpec"], cluster["spec"]["starRocksCnSpec"]
    assert (fe["image"], cn["image"], fe["imagePullSecrets"], cn["imagePullSecrets"]) == (
        f"{MIRROR}/docker.io/{versions.STARROCKS_FE_IMAGE}", f"{MIRROR}/docker.io/{versions.STARROCKS_CN_IMAGE}",
        [{"name": PULL_SECRET}], [{"name": PULL_SECRET}])


def test_the_gpu_notebooks_hub_gets_the_jupyterhub_image_values(airgapped_plan):
    (hub,) = [r["inputs"] for r in airgapped_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "gpu-notebooks"]
    assert (hub["values"]["hub"]["image"]["name"], hub["values"]["imagePullSecrets"]) == (
        f"{MIRROR}/quay.io/jupyterhub/k8s-hub", [PULL_SECRET])
