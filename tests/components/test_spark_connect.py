"""Spark Connect on compute (components/engines/_spark_connect.py): the server for notebooks, its pool and queue, its
credentials, who reaches it, and the URL notebooks get."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers import render_small
from schemas import builtin_errors
from small_site import small_site

from components.engines import ENGINES
from components.engines import _spark_connect as spark_connect

README = Path(__file__).parents[2] / "README.md"
COMPUTE = "site-t-compute"


def without_connect() -> dict[str, Any]:
    site = small_site()
    site["compute"]["spark"]["connect"] = False
    return site


def server(plan) -> dict[str, Any]:
    (deployment,) = [d for d in plan.objects("Deployment", COMPUTE) if d["metadata"]["name"] == "spark-connect"]
    return deployment


def notebook_env(plan) -> dict[str, Any]:
    (hub,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "jupyterhub"]
    return hub["values"]["singleuser"].get("extraEnv", {})


def test_the_server_runs_in_the_interactive_pool_and_queue(small_plan):
    pod = server(small_plan)["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"fab.internal/compute-pool": "interactive"}
    assert pod["spec"]["priorityClassName"] == "compute-interactive"
    assert pod["metadata"]["annotations"] == {"yunikorn.apache.org/queue": "root.interactive"}


def test_its_namespace_is_interactive_and_labelled_as_the_spark_engines(small_plan):
    (ns,) = [n for n in small_plan.objects("Namespace", COMPUTE) if n["metadata"]["name"] == "spark-connect"]
    labels = ns["metadata"]["labels"]
    assert (labels["fab.internal/engine"], labels["fab.internal/compute-pool"]) == ("spark", "interactive")
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_yunikorn_and_the_operator_take_its_namespace_beside_sparks(small_plan):
    values = {r["inputs"]["name"]: r["inputs"]["values"] for r in small_plan.of_type("kubernetes:helm.sh/v3:Release")
              if small_plan.cluster(r) == COMPUTE}
    assert values["yunikorn"]["yunikornDefaults"]["admissionController.filtering.processNamespaces"] == "^(spark|spark-connect)$"
    assert values["spark-operator"]["spark"]["jobNamespaces"] == ["spark", "spark-connect"]


def test_the_server_and_its_executors_read_the_spark_engines_credentials(small_plan):
    secrets = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in small_plan.objects("Secret", COMPUTE)}
    assert {("spark-connect", "s3-spark"), ("spark-connect", "polaris-spark")} <= secrets
    expected = [{"secretRef": {"name": "s3-spark"}}, {"secretRef": {"name": "polaris-spark"}}]
    assert server(small_plan)["spec"]["template"]["spec"]["containers"][0]["envFrom"] == expected
    assert spark_connect.executor_template()["spec"]["containers"][0]["envFrom"] == expected


def test_executors_run_in_the_interactive_pool_and_queue_marked_as_the_servers():
    template = spark_connect.executor_template()
    assert template["metadata"] == {"labels": {"fab.internal/spark-connect": "executor"},
                                    "annotations": {"yunikorn.apache.org/queue": "root.interactive"}}
    assert template["spec"]["priorityClassName"] == "compute-interactive"
    assert template["spec"]["tolerations"] == [
        {"key": "fab.internal/compute-pool", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}]


def test_executors_scale_from_none_to_the_configured_most():
    site = small_site()
    site["compute"]["spark"]["connect_max_executors"] = 3
    args = server(render_small(site))["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"spark.dynamicAllocation.minExecutors=0", "spark.dynamicAllocation.maxExecutors=3"} <= set(args)


def test_every_other_pod_of_the_cluster_is_denied(small_plan):
    (policy,) = [p for p in small_plan.objects("CiliumNetworkPolicy", COMPUTE) if p["metadata"]["name"] == "spark-connect"]
    ns = "k8s:io.kubernetes.pod.namespace"
    assert policy["spec"]["ingressDeny"] == [
        {"fromEndpoints": [{"matchExpressions": [{"key": ns, "operator": "Exists"},
                                                 {"key": ns, "operator": "NotIn", "values": ["jupyterhub", "spark-connect"]}]}]},
        {"fromEndpoints": [{"matchLabels": {ns: "jupyterhub"},
                            "matchExpressions": [{"key": "k8s:component", "operator": "NotIn", "values": ["singleuser-server"]}]}]},
        {"fromEndpoints": [{"matchLabels": {ns: "spark-connect"},
                            "matchExpressions": [{"key": "k8s:fab.internal/spark-connect", "operator": "NotIn", "values": ["executor"]}]}]},
    ]
    assert "ingress" not in policy["spec"]


def test_notebooks_connect_through_spark_remote(small_plan):
    assert notebook_env(small_plan)["SPARK_REMOTE"] == "sc://spark-connect.spark-connect.svc.cluster.local:15002"


def test_notebooks_point_spark_at_no_configuration_folder(small_plan):
    # Nothing is mounted at one (the old SPARK_CONF_DIR=/etc/spark): the catalog is reached through Spark Connect.
    assert notebook_env(small_plan) == {"SPARK_REMOTE": "sc://spark-connect.spark-connect.svc.cluster.local:15002"}


def test_the_service_serves_the_url_notebooks_get(small_plan):
    (service,) = [s for s in small_plan.objects("Service", COMPUTE) if s["metadata"]["name"] == "spark-connect"]
    assert (service["metadata"]["namespace"], service["spec"]["ports"][0]["port"]) == ("spark-connect", 15002)
    assert spark_connect.URL == f"sc://{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local:15002"


def test_switched_off_there_is_no_server_and_no_url():
    plan = render_small(without_connect())
    assert not [d for d in plan.objects("Deployment", COMPUTE) if d["metadata"]["name"] == "spark-connect"]
    assert not [n for n in plan.objects("Namespace", COMPUTE) if n["metadata"]["name"] == "spark-connect"]
    assert "SPARK_REMOTE" not in notebook_env(plan)


def test_the_namespaces_it_names_are_the_engines():
    assert spark_connect.JUPYTER_NAMESPACE == ENGINES["jupyterhub"].namespace
    assert "spark" in ENGINES


def test_the_readme_connects_to_the_programs_url():
    section = README.read_text().split("### Spark Connect", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert spark_connect.URL in block


def test_the_executor_template_is_a_valid_pod():
    assert builtin_errors(spark_connect.executor_template()) == []


def test_the_server_runs_as_its_own_service_account_bound_in_its_namespace_only(small_plan):
    assert server(small_plan)["spec"]["template"]["spec"]["serviceAccountName"] == "spark-connect"
    (binding,) = [b for b in small_plan.objects("RoleBinding", COMPUTE) if b["metadata"]["name"] == "spark-connect"]
    assert (binding["metadata"]["namespace"], binding["roleRef"]) == (
        "spark-connect", {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark-connect"})
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "spark-connect", "namespace": "spark-connect"}]
