"""No GPU work on storage or compute clusters, whatever the route: Spark applications, Helm values, Spark configuration.

(The pod-template route, fab-no-gpu-outside-gpu-clusters, is tested in test_rules.py.) Unit tests put one object on the
compute cluster, then on a GPU cluster, and change one property; the pack tests break the smallest site's render the
way a careless change to an engine would.
"""

from __future__ import annotations

import copy
import dataclasses

from policy_fixtures import check, k8s, kube, resource
from pulumi_policy import PolicyResource
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE
from rules.gpu_routes import no_gpu_helm_values, no_gpu_spark_applications, no_gpu_spark_conf

from components.engines.spark import spark_application_template
from fabctl.policy import analyze_in_process
from fabctl.render import Plan

COMPUTE, GPU = "site-a-compute", "site-a-gpu"
NOT_GPU = "site-a-compute is not a GPU cluster, GPU work runs on GPU clusters only"
FAILS_CLOSED = ("can't be known during preview, and this rule decides on it, so it fails closed; compute the value in the "
                "program instead of from another resource's output")


def spark_app(kind: str = "SparkApplication", **roles: dict) -> dict:
    spec = {"type": "Python", "mode": "cluster", "mainApplicationFile": "local:///app/etl.py",
            "driver": {"cores": 1, "memory": "2g"}, "executor": {"instances": 2, "cores": 4, "memory": "16g"}}
    for role, extra in roles.items():
        spec[role] = {**spec[role], **extra}
    if kind == "ScheduledSparkApplication":
        spec = {"schedule": "@daily", "template": spec}
    return k8s(kind, "etl", "spark", api="sparkoperator.k8s.io/v1beta2", spec=spec)


def notebooks(profile_override: dict | None = None, **values) -> dict:
    """JupyterHub's values as the program renders them, one profile's kubespawner_override extended."""
    override = {"cpu_guarantee": 2, "cpu_limit": 2, "mem_guarantee": "8G", "mem_limit": "8G", **(profile_override or {})}
    return {"chart": "jupyterhub", "namespace": "jupyterhub",
            "values": {"singleuser": {"profileList": [{"display_name": "small", "kubespawner_override": override}]}, **values}}


def release(props: dict, cluster: str = COMPUTE, gpu: bool = False) -> PolicyResource:
    return resource("kubernetes:helm.sh/v3:Release", props, "compute-jupyterhub", cluster, gpu=gpu)


def spark_defaults(extra: str = "", cluster: str = COMPUTE, gpu: bool = False) -> PolicyResource:
    text = "spark.sql.defaultCatalog fab\nspark.sql.catalog.fab.type rest\n" + extra
    return kube(k8s("ConfigMap", "spark-defaults", "spark", data={"spark-defaults.conf": text}), cluster, gpu=gpu)


# fab-no-gpu-spark-applications ----------------------------------------------------------------------------------------

GPU_EXECUTOR = {"gpu": {"name": "nvidia.com/gpu", "quantity": 1}}


def test_a_spark_application_without_gpus_on_compute_passes():
    assert check(no_gpu_spark_applications, [kube(spark_app(), COMPUTE)]) == []


def test_a_gpu_spark_application_on_a_gpu_cluster_passes():
    assert check(no_gpu_spark_applications, [kube(spark_app(executor=GPU_EXECUTOR), GPU, gpu=True)]) == []


def test_fails_when_a_spark_application_gives_its_executors_gpus():
    assert check(no_gpu_spark_applications, [kube(spark_app(executor=GPU_EXECUTOR), COMPUTE)]) == [
        f"SparkApplication spark/etl on site-a-compute gives its executor 1 nvidia.com/gpu; {NOT_GPU}"
    ]


def test_fails_when_a_scheduled_spark_application_gives_its_driver_a_gpu():
    app = spark_app("ScheduledSparkApplication", driver={"gpu": {"name": "nvidia.com/gpu", "quantity": 1}})
    assert check(no_gpu_spark_applications, [kube(app, COMPUTE)]) == [
        f"ScheduledSparkApplication spark/etl on site-a-compute gives its driver 1 nvidia.com/gpu; {NOT_GPU}"
    ]


def test_fails_when_a_spark_executor_template_requests_a_gpu():
    template = {"spec": {"containers": [{"name": "executor", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    assert check(no_gpu_spark_applications, [kube(spark_app(executor={"template": template}), COMPUTE)]) == [
        ("SparkApplication spark/etl on site-a-compute: spec.executor.template.spec.containers[0].resources.limits.nvidia.com/gpu "
         f"asks for 1 nvidia.com/gpu; {NOT_GPU}")
    ]


def test_fails_when_spark_executors_tolerate_the_gpu_taint():
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert check(no_gpu_spark_applications, [kube(spark_app(executor={"tolerations": [toleration]}), COMPUTE)]) == [
        f"SparkApplication spark/etl on site-a-compute: spec.executor.tolerations[0] tolerates or selects the GPU node key nvidia.com/gpu; {NOT_GPU}"
    ]


def test_fails_closed_when_an_executors_gpu_is_unknown():
    assert check(no_gpu_spark_applications, [kube(spark_app(executor={"gpu": UNKNOWN_OBJECT_VALUE}), COMPUTE)]) == [
        f"SparkApplication spark/etl on site-a-compute: .spec.executor {FAILS_CLOSED}"
    ]


# fab-no-gpu-helm-values -------------------------------------------------------------------------------------------------

def test_cpu_notebooks_on_compute_pass():
    assert check(no_gpu_helm_values, [release(notebooks())]) == []


def test_gpu_notebooks_on_a_gpu_cluster_pass():
    assert check(no_gpu_helm_values, [release(notebooks({"extra_resource_limits": {"nvidia.com/gpu": "1"}}), GPU, gpu=True)]) == []


def test_a_zero_gpu_quota_in_values_passes():
    assert check(no_gpu_helm_values, [release(notebooks(quota={"hard": {"requests.nvidia.com/gpu": "0"}}))]) == []


def test_fails_when_a_notebook_profile_is_given_gpu_limits():
    assert check(no_gpu_helm_values, [release(notebooks({"extra_resource_limits": {"nvidia.com/gpu": "1"}}))]) == [
        ("Helm release compute-jupyterhub on site-a-compute: values.singleuser.profileList[0].kubespawner_override."
         f"extra_resource_limits.nvidia.com/gpu asks for 1 nvidia.com/gpu; {NOT_GPU}")
    ]


def test_fails_when_a_notebook_profile_is_guaranteed_a_mig_slice():
    override = {"extra_resource_guarantees": {"nvidia.com/mig-1g.10gb": "1"}}
    assert check(no_gpu_helm_values, [release(notebooks(override))]) == [
        ("Helm release compute-jupyterhub on site-a-compute: values.singleuser.profileList[0].kubespawner_override."
         f"extra_resource_guarantees.nvidia.com/mig-1g.10gb asks for 1 nvidia.com/mig-1g.10gb; {NOT_GPU}")
    ]


def test_fails_when_a_notebook_profile_selects_gpu_nodes():
    assert check(no_gpu_helm_values, [release(notebooks({"node_selector": {"nvidia.com/gpu.present": "true"}}))]) == [
        ("Helm release compute-jupyterhub on site-a-compute: values.singleuser.profileList[0].kubespawner_override.node_selector."
         f"nvidia.com/gpu.present selects GPU nodes (nvidia.com/gpu.present=true); {NOT_GPU}")
    ]


def test_fails_when_a_chart_tolerates_the_gpu_pool_taint():
    toleration = {"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
    props = {"chart": "trino", "namespace": "trino", "values": {"worker": {"tolerations": [toleration]}}}
    assert check(no_gpu_helm_values, [release(props)]) == [
        ("Helm release compute-jupyterhub on site-a-compute: values.worker.tolerations[0] tolerates or selects the GPU node key "
         f"fab.internal/gpu-pool; {NOT_GPU}")
    ]


def test_fails_closed_when_a_gpu_quantity_is_unknown():
    assert check(no_gpu_helm_values, [release(notebooks({"extra_resource_limits": {"nvidia.com/gpu": UNKNOWN_STRING_VALUE}}))]) == [
        ("Helm release compute-jupyterhub on site-a-compute: values.singleuser.profileList[0].kubespawner_override."
         f"extra_resource_limits.nvidia.com/gpu asks for an unknown number of nvidia.com/gpu; {NOT_GPU}")
    ]


def test_fails_closed_when_values_are_unknown():
    props = {"chart": "jupyterhub", "namespace": "jupyterhub", "values": UNKNOWN_OBJECT_VALUE}
    assert check(no_gpu_helm_values, [release(props)]) == [f"Helm release compute-jupyterhub on site-a-compute: .values {FAILS_CLOSED}"]


# fab-no-gpu-spark-conf --------------------------------------------------------------------------------------------------

def test_spark_defaults_without_gpus_pass():
    assert check(no_gpu_spark_conf, [spark_defaults("spark.executor.resource.gpu.amount 0\n")]) == []


def test_rapids_on_a_gpu_cluster_passes():
    extra = "spark.plugins com.nvidia.spark.SQLPlugin\nspark.executor.resource.gpu.amount 1\nspark.rapids.sql.enabled true\n"
    assert check(no_gpu_spark_conf, [spark_defaults(extra, GPU, gpu=True)]) == []


def test_fails_when_spark_defaults_give_executors_gpus():
    assert check(no_gpu_spark_conf, [spark_defaults("spark.executor.resource.gpu.amount 1\n")]) == [
        f"ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.executor.resource.gpu.amount=1; {NOT_GPU}"
    ]


def test_fails_when_a_spark_application_gives_tasks_gpus():
    app = spark_app()
    app["spec"]["sparkConf"] = {"spark.task.resource.gpu.amount": "0.25"}
    assert check(no_gpu_spark_conf, [kube(app, COMPUTE)]) == [
        f"SparkApplication spark/etl (spec.sparkConf) on site-a-compute sets spark.task.resource.gpu.amount=0.25; {NOT_GPU}"
    ]


def test_fails_when_a_chart_passes_spark_a_driver_gpu():
    props = {"chart": "airflow", "namespace": "airflow",
             "values": {"env": [{"name": "SPARK_SUBMIT_OPTS", "value": "--conf spark.driver.resource.gpu.amount=1"}]}}
    assert check(no_gpu_spark_conf, [release(props)]) == [
        f"Helm release compute-jupyterhub (values.env[0].value) on site-a-compute sets spark.driver.resource.gpu.amount=1; {NOT_GPU}"
    ]


def test_fails_when_spark_defaults_set_rapids():
    assert check(no_gpu_spark_conf, [spark_defaults("spark.rapids.sql.enabled true\n")]) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets the Spark RAPIDS setting "
         f"spark.rapids.sql.enabled=true; {NOT_GPU}")
    ]


def test_fails_when_spark_defaults_load_the_rapids_plugin():
    assert check(no_gpu_spark_conf, [spark_defaults("spark.plugins com.nvidia.spark.SQLPlugin\n")]) == [
        ("ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute loads Spark RAPIDS "
         f"(spark.plugins=com.nvidia.spark.SQLPlugin); {NOT_GPU}")
    ]


def test_fails_closed_when_a_gpu_amount_is_unknown():
    app = spark_app()
    app["spec"]["sparkConf"] = {"spark.executor.resource.gpu.amount": UNKNOWN_STRING_VALUE}
    assert check(no_gpu_spark_conf, [kube(app, COMPUTE)]) == [
        f"SparkApplication spark/etl (spec.sparkConf) on site-a-compute: .spark.executor.resource.gpu.amount {FAILS_CLOSED}"
    ]


# Through the pack, on the smallest site's render -------------------------------------------------------------------------

def messages(plan: Plan, edit) -> list[tuple[str, str]]:
    """(policy, message) of each violation of the plan with one edit; the pack puts the rule's description first."""
    resources = copy.deepcopy(plan.resources)
    edit({r["name"]: r for r in resources}, resources)
    violations = analyze_in_process(dataclasses.replace(plan, resources=resources))
    return [(v.policy, v.message.splitlines()[-1]) for v in violations]


SITE_T = "site-t-compute is not a GPU cluster, GPU work runs on GPU clusters only"


def test_fails_when_a_plan_gives_a_compute_spark_application_gpus(small_plan):
    def edit(by_name, resources):
        app = copy.deepcopy(by_name["compute-spark-application"])
        app["name"], app["urn"] = "compute-gpu-etl", app["urn"] + "-gpu-etl"
        # A job from the platform's template (batch pool, its priority and queue), with GPUs on its executors.
        placed = spark_application_template("http://polaris-rest.polaris.svc:8181/api/catalog")
        placed["metadata"]["name"] = "etl"
        for role, spec in spark_app(executor=GPU_EXECUTOR)["spec"].items():
            placed["spec"][role] = {**placed["spec"][role], **spec} if isinstance(spec, dict) and role in placed["spec"] else spec
        app["type"], app["inputs"] = "kubernetes:sparkoperator.k8s.io/v1beta2:SparkApplication", placed
        resources.append(app)

    assert messages(small_plan, edit) == [
        ("fab-no-gpu-spark-applications", f"SparkApplication spark/etl on site-t-compute gives its executor 1 nvidia.com/gpu; {SITE_T}"),
    ]


def test_fails_when_a_plan_gives_a_notebook_profile_a_gpu(small_plan):
    def edit(by_name, resources):
        profile = by_name["compute-jupyterhub"]["inputs"]["values"]["singleuser"]["profileList"][0]
        profile["kubespawner_override"]["extra_resource_limits"] = {"nvidia.com/gpu": "1"}

    assert messages(small_plan, edit) == [(
        "fab-no-gpu-helm-values",
        ("Helm release compute-jupyterhub on site-t-compute: values.singleuser.profileList[0].kubespawner_override."
         f"extra_resource_limits.nvidia.com/gpu asks for 1 nvidia.com/gpu; {SITE_T}"),
    )]


def test_fails_when_a_plan_loads_rapids_in_the_spark_template(small_plan):
    def edit(by_name, resources):
        data = by_name["compute-spark-application"]["inputs"]["data"]
        data["sparkapplication.yaml"] = data["sparkapplication.yaml"].replace(
            "sparkConf:\n", "sparkConf:\n    spark.plugins: com.nvidia.spark.SQLPlugin\n")

    assert messages(small_plan, edit) == [(
        "fab-no-gpu-spark-conf",
        ("ConfigMap airflow/spark-application (data.sparkapplication.yaml) on site-t-compute loads Spark RAPIDS "
         f"(spark.plugins=com.nvidia.spark.SQLPlugin); {SITE_T}"),
    )]
