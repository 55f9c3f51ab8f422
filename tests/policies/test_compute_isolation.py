"""The compute cluster's rules through the real analyzer: batch vs interactive isolation by node pool and priority,
and StarRocks' shared-data compute nodes with a cache on a StorageClass of the same cluster.

Each test breaks one property of the full small site's render (which passes every policy, test_pack.py), as a
mistaken change to the program or a stack file would, and asserts the exact violations.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import yaml
from policy_fixtures import check, options, provider
from pulumi_policy import PolicyResource
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE
from rules.compute import compute_pool_placement

from components.engines.spark import spark_application_template
from fabctl.policy import analyze_in_process
from fabctl.render import Plan

COMPUTE = "site-t-compute"


def violations(plan: Plan, edit: Callable[[list[dict[str, Any]]], None]) -> list[tuple[str, str]]:
    """(policy, message without the policy's description) of every violation of the plan after one edit."""
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    found = analyze_in_process(dataclasses.replace(plan, resources=resources))
    return [(v.policy, v.message.splitlines()[-1]) for v in found]


def find(resources: list[dict[str, Any]], type_suffix: str, name: str) -> dict[str, Any]:
    (match,) = [r for r in resources if r["type"].endswith(type_suffix) and r["name"] == name]
    return match


def values(resources: list[dict[str, Any]], release: str) -> dict[str, Any]:
    return find(resources, ":Release", f"compute-{release}")["inputs"]["values"]


def starrocks(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return find(resources, ":StarRocksCluster", "compute-starrocks")["inputs"]["spec"]


def add_spark_application(resources: list[dict[str, Any]], edit: Callable[[dict[str, Any]], None]) -> None:
    """A SparkApplication applied on compute (as a program change could add one), from the platform's template."""
    record = copy.deepcopy(find(resources, ":StarRocksCluster", "compute-starrocks"))
    app = spark_application_template("http://polaris-rest.polaris.svc:8181/api/catalog")
    app["metadata"]["name"] = "compaction"
    app["spec"].update(type="Python", sparkVersion="4.0.1", mainApplicationFile="s3a://jobs/compaction.py")
    edit(app)
    kind = f"kubernetes:{app['apiVersion']}:SparkApplication"
    record.update(type=kind, name="compute-compaction", urn=record["urn"].rsplit("$", 1)[0] + f"${kind}::compute-compaction",
                  inputs=app, dependencies=[])
    resources.append(record)


def edit_connect_executors(resources: list[dict[str, Any]], **pod: Any) -> None:
    """Spark Connect's executor template of team yield (ConfigMap spark-connect-executor, labelled batch), its pod spec
    updated with `pod`."""
    data = find(resources, ":ConfigMap", "compute-spark-connect-yield-executor")["inputs"]["data"]
    template = yaml.safe_load(data["executor.yaml"])
    template["spec"].update(pod)
    data["executor.yaml"] = yaml.safe_dump(template)


POOL = "fab.internal/compute-pool"
INTERACTIVE_TAINT = f"{POOL}=interactive:NoSchedule"
BATCH_TOLERATION = [{"key": POOL, "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
INTERACTIVE_TOLERATION = [{"key": POOL, "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}]


# fab-compute-pool-placement ----------------------------------------------------------------------


def test_fails_when_a_compute_chart_is_declared_by_no_engine(full_plan):
    """The pack reads where a chart's pods run from its engine's declaration: a chart no engine declares fails closed."""
    def edit(rs):
        release = copy.deepcopy(find(rs, ":Release", "compute-trino"))
        release["inputs"].update(chart="flink-kubernetes-operator", name="flink-operator")
        release.update(name="compute-flink-operator", urn=release["urn"].replace("compute-trino", "compute-flink-operator"))
        rs.append(release)

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Helm release compute-flink-operator on {COMPUTE}: no engine declares chart flink-kubernetes-operator, so where its "
         "pods run is not known; allowed: a chart an engine declares (its EngineChart in the engine's `charts`, "
         "components/engines) or a platform chart (cilium, cloudnative-pg, gateway-helm, kube-prometheus-stack, "
         "kubeflow-trainer, kuberay-operator, kueue)"),
    )]


def test_fails_when_trino_workers_do_not_tolerate_the_interactive_pool(full_plan):
    def edit(rs):
        values(rs, "trino")["worker"]["tolerations"] = []

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Helm release compute-trino (chart trino) on {COMPUTE}: its worker pods do not tolerate the interactive pool's taint "
        f"(worker.tolerations: []); trino is interactive work, allowed: a toleration of {INTERACTIVE_TAINT}"),
    )]


def test_fails_when_airflow_task_pods_select_the_interactive_pool(full_plan):
    def edit(rs):
        values(rs, "airflow")["workers"]["kubernetes"]["nodeSelector"] = {"fab.internal/compute-pool": "interactive"}

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Helm release compute-airflow (chart airflow) on {COMPUTE}: its task pods select fab.internal/compute-pool=interactive "
        "(workers.kubernetes.nodeSelector); airflow is batch work, allowed: nodeSelector fab.internal/compute-pool=batch"),
    )]


def test_fails_when_jupyter_single_user_servers_select_no_pool(full_plan):
    def edit(rs):
        del values(rs, "jupyterhub")["singleuser"]["nodeSelector"]

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Helm release compute-jupyterhub (chart jupyterhub) on {COMPUTE}: its single-user pods select "
        "fab.internal/compute-pool=None (singleuser.nodeSelector); jupyterhub is interactive work, allowed: nodeSelector "
        "fab.internal/compute-pool=interactive"),
    )]


def test_fails_when_starrocks_compute_nodes_tolerate_the_batch_pool_instead(full_plan):
    def edit(rs):
        starrocks(rs)["starRocksCnSpec"]["tolerations"] = BATCH_TOLERATION

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE}: its CN pods do not tolerate the interactive pool's taint "
        "(spec.starRocksCnSpec.tolerations: [fab.internal/compute-pool=batch:NoSchedule]); StarRocksCluster is interactive "
        "work, allowed: a "
        f"toleration of {INTERACTIVE_TAINT}"),
    )]


def test_fails_when_a_spark_application_selects_no_pool(full_plan):
    def edit(rs):
        add_spark_application(rs, lambda app: app["spec"].pop("nodeSelector"))

    assert violations(full_plan, edit) == [
        ("fab-compute-pool-placement",
         (f"SparkApplication spark/compaction on {COMPUTE}: its {role} pods select fab.internal/compute-pool=None "
         f"(spec.nodeSelector); SparkApplication is batch work, allowed: nodeSelector fab.internal/compute-pool=batch"))
        for role in ("driver", "executor")
    ]


def test_fails_when_a_job_in_an_interactive_namespace_selects_the_batch_pool(full_plan):
    def edit(rs):
        pod = find(rs, ":Job", "compute-starrocks-setup-job")["inputs"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"fab.internal/compute-pool": "batch"}

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Job starrocks/starrocks-setup on {COMPUTE}: its pods select fab.internal/compute-pool=batch (nodeSelector); "
        "namespace starrocks is interactive work, allowed: nodeSelector fab.internal/compute-pool=interactive"),
    )]


def test_fails_when_an_engine_database_does_not_tolerate_its_pool(full_plan):
    def edit(rs):
        del find(rs, ":Cluster", "compute-superset-db")["inputs"]["spec"]["affinity"]["tolerations"]

    assert violations(full_plan, edit) == [(
        "fab-compute-pool-placement",
        (f"Cluster superset/superset-db on {COMPUTE}: its database pods do not tolerate the interactive pool's taint "
        f"(spec.affinity.tolerations: []); namespace superset is interactive work, allowed: a toleration of {INTERACTIVE_TAINT}"),
    )]


def test_fails_when_spark_connect_executors_select_the_interactive_pool(full_plan):
    """The executors' template is a ConfigMap the server mounts: the pack reads the pool of its pods from its label."""
    assert violations(full_plan, lambda rs: edit_connect_executors(
        rs, nodeSelector={POOL: "interactive"}, tolerations=INTERACTIVE_TOLERATION)) == [
        ("fab-compute-pool-placement",
         (f"ConfigMap spark-team-yield/spark-connect-executor (pod template executor.yaml) on {COMPUTE}: its pods select "
          "fab.internal/compute-pool=interactive (nodeSelector); the template (its ConfigMap labelled "
          "fab.internal/compute-pool=batch) is batch work, allowed: nodeSelector fab.internal/compute-pool=batch")),
        ("fab-compute-pool-placement",
         (f"ConfigMap spark-team-yield/spark-connect-executor (pod template executor.yaml) on {COMPUTE}: its pods do not "
          f"tolerate the batch pool's taint (tolerations: [{INTERACTIVE_TAINT}]); the template (its ConfigMap labelled "
          "fab.internal/compute-pool=batch) is batch work, allowed: a toleration of fab.internal/compute-pool=batch:NoSchedule")),
    ]


# fab-compute-priority-class ----------------------------------------------------------------------


def test_fails_when_airflow_task_pods_run_at_the_interactive_priority(full_plan):
    def edit(rs):
        values(rs, "airflow")["workers"]["kubernetes"]["priorityClassName"] = "compute-interactive"

    assert violations(full_plan, edit) == [(
        "fab-compute-priority-class",
        (f"Helm release compute-airflow (chart airflow) on {COMPUTE}: its task pods run at PriorityClass compute-interactive "
        "(labelled fab.internal/compute-pool=interactive) (workers.kubernetes.priorityClassName); airflow is batch work, "
        "allowed: compute-batch"),
    )]


def test_fails_when_jupyter_single_user_servers_name_no_priority_class(full_plan):
    def edit(rs):
        del values(rs, "jupyterhub")["hub"]["config"]["KubeSpawner"]

    assert violations(full_plan, edit) == [(
        "fab-compute-priority-class",
        (f"Helm release compute-jupyterhub (chart jupyterhub) on {COMPUTE}: its single-user pods run at no PriorityClass "
        "(hub.config.KubeSpawner.priority_class_name); jupyterhub is interactive work, allowed: compute-interactive"),
    )]


def test_fails_when_a_priority_class_is_not_defined_on_the_cluster(full_plan):
    def edit(rs):
        values(rs, "trino")["coordinator"]["priorityClassName"] = "high-priority"

    assert violations(full_plan, edit) == [(
        "fab-compute-priority-class",
        (f"Helm release compute-trino (chart trino) on {COMPUTE}: its coordinator pods run at PriorityClass high-priority, "
        f"which is not defined on {COMPUTE} (coordinator.priorityClassName); trino is interactive work, allowed: "
        "compute-interactive"),
    )]


def test_fails_when_a_spark_executor_runs_at_the_interactive_priority(full_plan):
    def edit(rs):
        add_spark_application(rs, lambda app: app["spec"]["executor"].update(priorityClassName="compute-interactive"))

    assert violations(full_plan, edit) == [(
        "fab-compute-priority-class",
        (f"SparkApplication spark/compaction on {COMPUTE}: its executor pods run at PriorityClass compute-interactive "
        "(labelled fab.internal/compute-pool=interactive) (spec.executor.priorityClassName); SparkApplication is batch work, "
        "allowed: compute-batch"),
    )]


def test_fails_when_spark_connect_executors_run_at_the_interactive_priority(full_plan):
    assert violations(full_plan, lambda rs: edit_connect_executors(rs, priorityClassName="compute-interactive")) == [(
        "fab-compute-priority-class",
        (f"ConfigMap spark-team-yield/spark-connect-executor (pod template executor.yaml) on {COMPUTE}: its pods run at "
         "PriorityClass compute-interactive (labelled fab.internal/compute-pool=interactive) (priorityClassName); the "
         "template (its ConfigMap labelled fab.internal/compute-pool=batch) is batch work, allowed: compute-batch"),
    )]


# fab-compute-batch-below-interactive -------------------------------------------------------------


def test_fails_when_batch_outranks_interactive(full_plan):
    def edit(rs):
        find(rs, ":PriorityClass", "compute-priority-batch")["inputs"]["value"] = 200_000

    assert violations(full_plan, edit) == [(
        "fab-compute-batch-below-interactive",
        (f"PriorityClass compute-batch (batch) on {COMPUTE} has value 200000; allowed: below every interactive priority "
        "(PriorityClass compute-interactive: 100000, pods that name no PriorityClass: 0)"),
    )]


def test_fails_when_batch_is_at_the_priority_of_pods_that_name_none(full_plan):
    def edit(rs):
        find(rs, ":PriorityClass", "compute-priority-batch")["inputs"]["value"] = 0

    assert violations(full_plan, edit) == [(
        "fab-compute-batch-below-interactive",
        (f"PriorityClass compute-batch (batch) on {COMPUTE} has value 0; allowed: below every interactive priority "
        "(PriorityClass compute-interactive: 100000, pods that name no PriorityClass: 0)"),
    )]


# fab-starrocks-shared-data -----------------------------------------------------------------------


def test_fails_when_starrocks_runs_shared_nothing(full_plan):
    def edit(rs):
        find(rs, ":ConfigMap", "compute-starrocks-fe-conf")["inputs"]["data"]["fe.conf"] = "run_mode = shared_nothing\n"

    assert violations(full_plan, edit) == [(
        "fab-starrocks-shared-data",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE} runs shared_nothing: ConfigMap starrocks/starrocks-fe-conf key "
        "fe.conf sets run_mode = shared_nothing; allowed: run_mode = shared_data"),
    )]


def test_fails_when_the_fe_config_sets_no_run_mode(full_plan):
    def edit(rs):
        find(rs, ":ConfigMap", "compute-starrocks-fe-conf")["inputs"]["data"]["fe.conf"] = "cloud_native_storage_type = S3\n"

    assert violations(full_plan, edit) == [(
        "fab-starrocks-shared-data",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE} runs shared_nothing: ConfigMap starrocks/starrocks-fe-conf key "
        "fe.conf sets no run_mode; allowed: run_mode = shared_data"),
    )]


def test_fails_when_starrocks_names_no_fe_config(full_plan):
    def edit(rs):
        del starrocks(rs)["starRocksFeSpec"]["configMapInfo"]

    assert violations(full_plan, edit) == [(
        "fab-starrocks-shared-data",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE} runs shared_nothing: its FE config "
        "(starRocksFeSpec.configMapInfo) names no ConfigMap; allowed: an FE config with run_mode = shared_data"),
    )]


# fab-starrocks-cn-cache --------------------------------------------------------------------------


def test_fails_when_the_cache_storage_class_is_only_on_the_gpu_cluster(full_plan):
    def edit(rs):
        rs.remove(find(rs, ":StorageClass", "compute-starrocks-cache"))

    assert violations(full_plan, edit) == [(
        "fab-starrocks-cn-cache",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE}: CN volume cn-cache uses StorageClass local-nvme-cache, which the "
        f"stack does not define on {COMPUTE}; allowed: a StorageClass defined on {COMPUTE} (none is)"),
    )]


def test_fails_when_the_compute_nodes_have_no_cache_volume(full_plan):
    def edit(rs):
        starrocks(rs)["starRocksCnSpec"]["storageVolumes"] = []

    assert violations(full_plan, edit) == [(
        "fab-starrocks-cn-cache",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE}: its CN have no cache volume (starRocksCnSpec.storageVolumes is "
        f"empty); allowed: a volume on a StorageClass defined on {COMPUTE} (local-nvme-cache)"),
    )]


def test_fails_when_the_cache_volume_uses_the_default_storage_class(full_plan):
    def edit(rs):
        del starrocks(rs)["starRocksCnSpec"]["storageVolumes"][0]["storageClassName"]

    assert violations(full_plan, edit) == [(
        "fab-starrocks-cn-cache",
        (f"StarRocksCluster starrocks/starrocks on {COMPUTE}: CN volume cn-cache uses the default StorageClass, which the stack "
        f"does not define on {COMPUTE}; allowed: a StorageClass defined on {COMPUTE} (local-nvme-cache)"),
    )]


# Unknown values (preview) ------------------------------------------------------------------------

COMPUTE_COMPONENT = PolicyResource(
    "fab:compute:ComputeCluster", {}, "urn:pulumi:s::p::fab:compute:ComputeCluster::compute", "compute", options(), None,
    None, [], {},
)
FAILS_CLOSED = ("can't be known during preview, and this rule decides on it, so it fails closed; compute the value in the "
                "program instead of from another resource's output")


def test_fails_closed_when_a_node_selector_is_unknown_in_preview():
    trino = {"chart": "trino", "version": "1.42.2", "values": {
        "coordinator": {"nodeSelector": {POOL: "interactive"}, "tolerations": INTERACTIVE_TOLERATION},
        "worker": {"nodeSelector": UNKNOWN_OBJECT_VALUE, "tolerations": INTERACTIVE_TOLERATION},
    }}
    release = PolicyResource("kubernetes:helm.sh/v3:Release", trino, "urn:pulumi:s::p::kubernetes:helm.sh/v3:Release::compute-trino",
                             "compute-trino", options(), provider("site-a-compute"), COMPUTE_COMPONENT, [], {})
    assert check(compute_pool_placement, [release]) == [
        f"Helm release compute-trino (chart trino) on site-a-compute: its worker pods: .worker.nodeSelector {FAILS_CLOSED}"
    ]


def test_fails_closed_when_a_pod_template_configmaps_data_is_unknown_in_preview():
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "data": UNKNOWN_OBJECT_VALUE,
                  "metadata": {"name": "spark-connect-executor", "namespace": "spark-team-yield", "labels": {POOL: "batch"}}}
    resource = PolicyResource("kubernetes:core/v1:ConfigMap", config_map,
                              "urn:pulumi:s::p::kubernetes:core/v1:ConfigMap::compute-spark-connect-yield-executor",
                              "compute-spark-connect-yield-executor", options(), provider("site-a-compute"), COMPUTE_COMPONENT, [], {})
    assert check(compute_pool_placement, [resource]) == [
        "ConfigMap spark-team-yield/spark-connect-executor (pod template data) on site-a-compute: its pods: .nodeSelector "
        f"{FAILS_CLOSED}"
    ]
