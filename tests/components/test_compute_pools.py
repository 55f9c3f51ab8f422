"""Batch vs interactive isolation on the compute cluster: the pools' nodes in config, what reaches the rendered pods
(helm template of the pinned charts), the SparkApplication template, and StarRocks' cache StorageClass."""

from __future__ import annotations

import yaml

from components.engines.spark import spark_application_template
from fabctl.check.scheduling import pod_spec
from helpers import config_errors
from schemas import CrdSchemas, schema_errors
from small_site import small_site

COMPUTE = "site-t-compute"
POOL = "fab.internal/compute-pool"


def _placement(pod: dict) -> tuple:
    tolerated = sorted(t.get("value") for t in pod.get("tolerations") or [] if t.get("key") == POOL)
    return (pod.get("nodeSelector") or {}).get(POOL), tolerated, pod.get("priorityClassName")


def test_fails_when_a_node_is_in_both_pools():
    raw = small_site()
    raw["compute"]["interactive_nodes"] = ["compute-batch-1"]
    assert config_errors(raw) == [
        ("fab-platform:site.compute.interactive_nodes[0]: 'compute-batch-1' is also a batch node of compute.batch_nodes; a node "
        "serves one pool (it registers with one pool's taint)")
    ]


def test_fails_when_interactive_engines_are_on_without_interactive_nodes():
    raw = small_site()
    raw["compute"]["interactive_nodes"] = []
    assert config_errors(raw) == [
        ("fab-platform:site.compute.interactive_nodes: is empty, but jupyterhub, starrocks, superset, trino run in the "
        "interactive pool (their pods select and tolerate only its nodes): list the interactive pool's nodes, or switch "
        "those engines off")
    ]


def test_fails_when_spark_is_on_without_batch_nodes():
    raw = small_site()
    raw["compute"]["batch_nodes"] = []
    raw["compute"]["airflow"] = {"enabled": False}
    assert config_errors(raw) == [
        ("fab-platform:site.compute.batch_nodes: is empty, but spark runs in the batch pool (its pods select and tolerate "
        "only its nodes): list the batch pool's nodes, or switch that engine off")
    ]


def test_every_engine_pod_the_charts_render_is_placed_in_its_pool(small):
    placed = {
        f"{r.release['name']} {o['kind']} {o['metadata']['name']}": _placement(pod_spec(o))
        for r in small.releases if r.cluster == COMPUTE and r.release["inputs"]["chart"] in ("trino", "jupyterhub")
        for o in r.objects if pod_spec(o) is not None
    }
    interactive = ("interactive", ["interactive"], "compute-interactive")
    assert placed == {
        "compute-trino Deployment trino-coordinator": interactive,
        "compute-trino Deployment trino-worker": interactive,
        "compute-jupyterhub Deployment hub": interactive,
        "compute-jupyterhub Deployment proxy": interactive,
    }


def test_jupyter_single_user_servers_are_spawned_in_the_interactive_pool(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "jupyterhub"]
    values = release["inputs"]["values"]
    spawned = {"nodeSelector": values["singleuser"]["nodeSelector"], "tolerations": values["singleuser"]["extraTolerations"],
               "priorityClassName": values["hub"]["config"]["KubeSpawner"]["priority_class_name"]}
    assert _placement(spawned) == ("interactive", ["interactive"], "compute-interactive")


def test_airflow_task_pods_and_every_airflow_pod_are_placed_in_the_batch_pool(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "airflow"]
    values = release["inputs"]["values"]
    task = {"nodeSelector": values["nodeSelector"], "tolerations": values["tolerations"],
            "priorityClassName": values["workers"]["kubernetes"]["priorityClassName"]}
    assert _placement(task) == ("batch", ["batch"], "compute-batch")


CATALOG_URI = "http://polaris-rest.polaris.svc:8181/api/catalog"
"""The smallest site's Polaris catalog as compute's clients call it."""


def _airflow_template(plan):
    (config,) = [c for c in plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "spark-application"]
    return yaml.safe_load(config["data"]["sparkapplication.yaml"])


def test_airflow_mounts_the_spark_application_template(small_plan):
    assert _airflow_template(small_plan) == spark_application_template(CATALOG_URI)


def test_the_spark_application_template_carries_the_catalog_where_spark_3_drivers_read_it(small_plan):
    # In sparkConf (spark-submit --conf), not a sparkConfigMap's spark-defaults.conf, which the driver never reads.
    spec = _airflow_template(small_plan)["spec"]
    assert ("sparkConfigMap" not in spec, spec["sparkConf"]["spark.sql.catalog.fab.uri"],
            spec["sparkConf"]["spark.sql.catalog.fab.credential"]) == (
        True, CATALOG_URI, "env:POLARIS_CREDENTIAL")


def test_the_spark_application_templates_jobs_read_the_engines_credentials_from_its_secrets(small_plan):
    spec = _airflow_template(small_plan)["spec"]
    secrets = [{"secretRef": {"name": "s3-spark"}}, {"secretRef": {"name": "polaris-spark"}}]
    assert (spec["driver"]["envFrom"], spec["executor"]["envFrom"]) == (secrets, secrets)


def test_the_spark_application_template_resolves_packages_into_a_writable_tmp(small_plan):
    spec = _airflow_template(small_plan)["spec"]
    tmp = [{"name": "tmp", "mountPath": "/tmp"}]
    assert (spec["sparkConf"]["spark.jars.ivy"], spec["volumes"], spec["driver"]["volumeMounts"], spec["executor"]["volumeMounts"]) == (
        "/tmp/ivy", [{"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}}], tmp, tmp)


def test_the_serving_loops_feature_job_reads_the_catalog_from_its_spark_conf(small_plan):
    from components.dags import serving_loop_steps
    from components.engines.airflow import platform_settings

    platform = platform_settings(models_bucket="m", checkpoints_bucket="c", spark_on=True, serving_repo=None)
    app = serving_loop_steps.feature_application(_airflow_template(small_plan), platform, [])
    assert ("sparkConfigMap" in app["spec"], app["spec"]["sparkConf"]["spark.sql.catalog.fab.uri"]) == (False, CATALOG_URI)


def test_the_spark_application_template_places_driver_and_executors_in_the_batch_pool():
    spec = spark_application_template(CATALOG_URI)["spec"]
    for role in ("driver", "executor"):
        assert _placement({**spec[role], "nodeSelector": spec["nodeSelector"]}) == ("batch", ["batch"], "compute-batch")


def test_a_job_from_the_spark_application_template_validates_against_the_crd(crd_dir):
    app = spark_application_template(CATALOG_URI)
    app["metadata"]["name"] = "compaction"
    app["spec"].update(type="Python", sparkVersion="4.0.1", mainApplicationFile="s3a://jobs/compaction.py")
    assert schema_errors(app, CrdSchemas(crd_dir)) == []


def test_starrocks_and_engine_databases_are_placed_in_their_pools(small_plan):
    (cluster,) = small_plan.objects("StarRocksCluster", COMPUTE)
    databases = {d["metadata"]["name"]: d["spec"] for d in small_plan.objects("Cluster", COMPUTE)}
    assert {
        "fe": _placement(cluster["spec"]["starRocksFeSpec"]),
        "cn": _placement(cluster["spec"]["starRocksCnSpec"]),
        **{name: _placement({**spec["affinity"], "priorityClassName": spec["priorityClassName"]}) for name, spec in databases.items()},
    } == {
        "fe": ("interactive", ["interactive"], None),
        "cn": ("interactive", ["interactive"], None),
        "airflow-db": ("batch", ["batch"], "compute-batch"),
        "superset-db": ("interactive", ["interactive"], "compute-interactive"),
    }


def test_batch_runs_below_every_interactive_pod(small_plan):
    classes = {c["metadata"]["name"]: (c["metadata"]["labels"][POOL], c["value"]) for c in small_plan.objects("PriorityClass", COMPUTE)}
    assert classes == {"compute-batch": ("batch", -1), "compute-interactive": ("interactive", 100_000)}


def test_the_starrocks_cache_storage_class_is_on_the_compute_cluster(small_plan):
    (cluster,) = small_plan.objects("StarRocksCluster", COMPUTE)
    (volume,) = cluster["spec"]["starRocksCnSpec"]["storageVolumes"]
    classes = {c["metadata"]["name"]: (c["provisioner"], c["reclaimPolicy"], c["volumeBindingMode"])
               for c in small_plan.objects("StorageClass", COMPUTE)}
    assert classes == {volume["storageClassName"]: ("rancher.io/local-path", "Delete", "WaitForFirstConsumer")}
