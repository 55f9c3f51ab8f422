"""Spark RAPIDS by method B (components/spark_rapids.py): the Spark operator on the GPU cluster that names it, Kueue's
SparkApplication integration there, Airflow's right to submit, the RAPIDS defaults and the submitted application."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from helpers import config_errors, render_small
from schemas import CrdSchemas
from small_site import small_site

from components.config import SparkRapidsConfig
from components.spark_rapids import SUBMITTER_ROLE, SUBMITTER_RULES, rapids_conf, spark_rapids_application

GPUS_DOC = Path(__file__).parents[2] / "docs" / "gpus.md"
CATALOG = "http://polaris-rest.polaris.svc:8181/api/catalog"
"""How the site's own clusters call Polaris (its global service's cluster-local name, phase 5)."""


def rapids_site(**spec: Any) -> dict[str, Any]:
    """The smallest site with a training-only cluster `gpu-train` and Spark RAPIDS on it (two teams)."""
    site = small_site(gpu_clusters=2, teams=("fdc", "yield"))
    site["gpu"]["gpu-train"]["spark_rapids"] = spec
    return site


def operator_releases(plan) -> dict[str, dict[str, Any]]:
    return {plan.cluster(r): r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "spark-operator"}


def kueue_frameworks(plan, cluster: str) -> list[str]:
    (kueue,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                if r["inputs"]["name"] == "kueue" and plan.cluster(r) == cluster]
    return yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])["integrations"]["frameworks"]


def manual_application() -> dict[str, Any]:
    """The SparkApplication of docs/gpus.md's "Spark RAPIDS on the GPU cluster (method B)"."""
    section = GPUS_DOC.read_text().split("\n## Spark RAPIDS on the GPU cluster (method B)\n", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL) if "kind: SparkApplication" in b]
    return yaml.safe_load(block)


def test_the_operator_runs_only_on_the_cluster_that_names_it():
    plan = render_small(rapids_site())
    assert set(operator_releases(plan)) == {"site-t-compute", "site-t-gpu-train"}


def test_the_operator_watches_exactly_the_team_namespaces():
    values = operator_releases(render_small(rapids_site()))["site-t-gpu-train"]["values"]
    assert values["spark"]["jobNamespaces"] == ["team-fdc", "team-yield"]


def test_kueue_gangs_spark_applications_on_that_cluster_not_a_second_scheduler():
    plan = render_small(rapids_site())
    values = operator_releases(plan)["site-t-gpu-train"]["values"]
    assert values["controller"]["batchScheduler"] == {"enable": False}
    assert "sparkoperator.k8s.io/sparkapplication" in kueue_frameworks(plan, "site-t-gpu-train")
    assert not any(r["inputs"]["name"] == "yunikorn" and plan.cluster(r) != "site-t-compute"
                   for r in plan.of_type("kubernetes:helm.sh/v3:Release"))


def test_kueue_turns_on_its_alpha_spark_application_gate_on_that_cluster_only():
    plan = render_small(rapids_site())
    gates = {plan.cluster(r): r["inputs"]["values"].get("controllerManager", {}).get("featureGates")
             for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "kueue"}
    assert gates == {"site-t-gpu": None, "site-t-gpu-train": [{"name": "SparkApplicationIntegration", "enabled": True}]}


def test_kueue_admits_no_spark_applications_where_spark_rapids_does_not_run():
    assert "sparkoperator.k8s.io/sparkapplication" not in kueue_frameworks(render_small(rapids_site()), "site-t-gpu")


def test_the_airflow_submitter_may_create_spark_applications_in_team_namespaces_only():
    plan = render_small(rapids_site())
    (role,) = [r for r in plan.objects("ClusterRole", "site-t-gpu-train") if r["metadata"]["name"] == SUBMITTER_ROLE]
    assert role["rules"] == SUBMITTER_RULES
    bindings = [b for b in plan.objects("RoleBinding", "site-t-gpu-train") if b["roleRef"]["name"] == SUBMITTER_ROLE]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-fdc", "team-yield"]
    assert all(b["subjects"] == [{"kind": "ServiceAccount", "name": "airflow-submitter", "namespace": "fab-access"}] for b in bindings)
    assert not [b for b in plan.objects("ClusterRoleBinding") if b["roleRef"]["name"] == SUBMITTER_ROLE]


def test_the_submitter_may_create_no_spark_application_on_the_other_gpu_cluster():
    plan = render_small(rapids_site())
    assert [r for r in plan.objects("ClusterRole", "site-t-gpu-train") if r["metadata"]["name"] == SUBMITTER_ROLE]
    assert not [r for r in plan.objects("ClusterRole", "site-t-gpu") if r["metadata"]["name"] == SUBMITTER_ROLE]


def test_the_exported_application_carries_the_rapids_plugin_and_the_catalog_in_its_spark_conf():
    # Not in a sparkConfigMap: Spark 3.5 drivers started by the operator never read its spark-defaults.conf.
    plan = render_small(rapids_site(concurrent_gpu_tasks=3))
    spec = yaml.safe_load(plan.outputs["spark_rapids"]["gpu-train"])["spec"]
    assert "sparkConfigMap" not in spec
    conf = spec["sparkConf"]
    assert conf["spark.plugins"] == "com.nvidia.spark.SQLPlugin"
    assert conf["spark.rapids.sql.concurrentGpuTasks"] == "3"
    assert conf["spark.sql.catalog.fab.uri"] == "http://polaris-rest.polaris.svc:8181/api/catalog"


def test_task_slots_share_the_executors_gpus():
    conf = rapids_conf(SparkRapidsConfig(executor_gpus=2, executor_cores=16))
    assert (conf["spark.executor.resource.gpu.amount"], conf["spark.task.resource.gpu.amount"]) == ("2", "0.125")


def test_drivers_and_executors_run_on_training_nodes_at_training_priority_with_the_teams_credentials():
    spec = spark_rapids_application(SparkRapidsConfig(), CATALOG)["spec"]
    for role in ("driver", "executor"):
        assert spec[role]["nodeSelector"] == {"fab.internal/gpu-pool": "training"}
        assert spec[role]["tolerations"] == [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
        assert spec[role]["priorityClassName"] == "fab-training"
        assert spec[role]["envFrom"] == [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}}]


def test_the_application_is_queued_on_the_teams_local_queue_with_a_fixed_size():
    app = spark_rapids_application(SparkRapidsConfig(executor_gpus=2), CATALOG)
    assert app["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training", "kueue.x-k8s.io/priority-class": "training-normal"}
    assert app["spec"]["dynamicAllocation"] == {"enabled": False}
    assert app["spec"]["executor"]["gpu"] == {"name": "nvidia.com/gpu", "quantity": 2}


def test_the_template_with_a_jobs_fields_is_a_valid_spark_application(crd_dir):
    app = spark_rapids_application(SparkRapidsConfig(), CATALOG)
    app["metadata"] |= {"name": "fdc-backfill", "namespace": "team-fdc"}
    app["spec"] |= {"type": "Python", "mainApplicationFile": "s3a://site-t-warehouse/jobs/backfill.py"}
    assert CrdSchemas(crd_dir).errors(app) == []


def test_the_manuals_spark_application_is_valid_and_the_programs_own(crd_dir):
    app = manual_application()
    assert CrdSchemas(crd_dir).errors(app) == []
    template = spark_rapids_application(SparkRapidsConfig(), app["spec"]["sparkConf"]["spark.sql.catalog.fab.uri"])
    assert {k: app["spec"][k] for k in template["spec"]} == template["spec"]
    assert app["metadata"]["labels"] == template["metadata"]["labels"]


def test_the_stack_exports_the_application_template():
    plan = render_small(rapids_site())
    template = yaml.safe_load(plan.outputs["spark_rapids"]["gpu-train"])
    assert template == spark_rapids_application(SparkRapidsConfig(), CATALOG)


def test_fails_when_an_executor_needs_more_gpus_than_any_training_node_has():
    site = rapids_site(executor_gpus=8)
    site["gpu"]["gpu-train"]["nodes"]["gpu-train-trn-1"]["gpus"] = 4
    assert config_errors(site) == [(
        "fab-platform:site.gpu.gpu-train.spark_rapids.executor_gpus: 8 is more GPUs than any training node of gpu.gpu-train has (4): "
        "Spark RAPIDS runs on training nodes; use at most that many, or add training nodes"
    )]


def test_fails_when_spark_rapids_comes_before_phase_5():
    site = small_site()
    site["phase"], site["gpu"]["gpu"]["spark_rapids"] = 4, {}
    assert config_errors(site) == [(
        "fab-platform:site.gpu.gpu.spark_rapids: runs Spark RAPIDS on gpu: Spark RAPIDS on a GPU cluster comes in phase 05 "
        "(scale-out) and the site is at phase 4; do without it until phase 04 is done and phase is 5 (docs/roadmap.md), or "
        "list spark-rapids in early_features"
    )]
