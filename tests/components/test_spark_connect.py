"""Spark Connect on compute (components/engines/_spark_connect.py): one server per team for its members' notebooks, its
pool and queue, the team's own credentials, who reaches it, and the URL a member's notebook gets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from helpers import config_errors, render_small
from jupyter_hook import run_teams_hook
from schemas import builtin_errors
from small_site import small_site

from components.engines import ENGINES
from components.engines import _spark_connect as spark_connect
from components.engines.jupyterhub import TEAMS_HOOK_KEY, teams_hook

GPUS_DOC = Path(__file__).parents[2] / "docs" / "gpus.md"
COMPUTE = "site-t-compute"
TEAMS = ("fdc", "yield")


def two_teams():
    return render_small(small_site(teams=TEAMS))


def without_connect() -> dict[str, Any]:
    site = small_site()
    site["compute"]["spark"]["connect"] = False
    return site


def servers(plan) -> dict[str, dict[str, Any]]:
    """Namespace -> the Spark Connect Deployment there."""
    return {d["metadata"]["namespace"]: d for d in plan.objects("Deployment", COMPUTE) if d["metadata"]["name"] == "spark-connect"}


def server(plan, team: str = "yield") -> dict[str, Any]:
    return servers(plan)[f"spark-team-{team}"]


def hub_values(plan) -> dict[str, Any]:
    (hub,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "jupyterhub"]
    return hub["values"]


def test_each_team_has_its_own_server():
    assert sorted(servers(two_teams())) == ["spark-team-fdc", "spark-team-yield"]


def test_the_server_runs_in_the_interactive_pool_and_queue(small_plan):
    pod = server(small_plan)["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"fab.internal/compute-pool": "interactive"}
    assert pod["spec"]["priorityClassName"] == "compute-interactive"
    assert pod["metadata"]["annotations"] == {"yunikorn.apache.org/queue": "root.interactive"}


def test_its_namespace_is_interactive_and_labelled_as_the_teams(small_plan):
    (ns,) = [n for n in small_plan.objects("Namespace", COMPUTE) if n["metadata"]["name"] == "spark-team-yield"]
    labels = ns["metadata"]["labels"]
    assert (labels["fab.internal/engine"], labels["fab.internal/team"], labels["fab.internal/compute-pool"]) == (
        "training", "yield", "interactive")
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_yunikorn_and_the_operator_take_each_teams_namespace_beside_sparks():
    plan = two_teams()
    values = {r["inputs"]["name"]: r["inputs"]["values"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
              if plan.cluster(r) == COMPUTE}
    assert values["yunikorn"]["yunikornDefaults"]["admissionController.filtering.processNamespaces"] == (
        "^(spark|spark-team-fdc|spark-team-yield)$")
    assert values["spark-operator"]["spark"]["jobNamespaces"] == ["spark", "spark-team-fdc", "spark-team-yield"]


def test_the_server_and_its_executors_read_the_teams_own_credentials():
    plan = two_teams()
    secrets = {(s["metadata"]["namespace"], s["metadata"]["name"]): s["metadata"]["labels"] for s in plan.objects("Secret", COMPUTE)
               if s["metadata"]["namespace"].startswith("spark-team-")}
    assert secrets == {(f"spark-team-{team}", name): {"fab.internal/engine": "training", "fab.internal/team": team}
                       for team in TEAMS for name in ("s3-training", "polaris-training")}
    expected = [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}}]
    assert server(plan)["spec"]["template"]["spec"]["containers"][0]["envFrom"] == expected
    assert spark_connect.executor_template()["spec"]["containers"][0]["envFrom"] == expected


def test_the_server_holds_no_engine_credentials(small_plan):
    """The old server read the Spark engine's keys (write on raw and warehouse, catalog writer): a UDF handed them to any
    notebook user."""
    held = {s["metadata"]["name"] for s in small_plan.objects("Secret", COMPUTE) if s["metadata"]["namespace"] == "spark-team-yield"}
    assert held
    assert not held & {"s3-spark", "polaris-spark"}


def executor_template(plan, team: str = "yield") -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ConfigMap `spark-connect-executor` of `team`'s namespace, the Pod template the server mounts from it)."""
    (config_map,) = [c for c in plan.objects("ConfigMap", COMPUTE)
                     if (c["metadata"]["namespace"], c["metadata"]["name"]) == (f"spark-team-{team}", "spark-connect-executor")]
    return config_map, yaml.safe_load(config_map["data"]["executor.yaml"])


def test_executors_run_in_the_batch_pool_and_queue_by_default(small_plan):
    """The design delegates notebooks' heavy queries to batch: the old template put them beside the dashboards."""
    _, template = executor_template(small_plan)
    assert template["metadata"] == {"labels": {"fab.internal/spark-connect": "executor"},
                                    "annotations": {"yunikorn.apache.org/queue": "root.batch"}}
    assert template["spec"]["nodeSelector"] == {"fab.internal/compute-pool": "batch"}
    assert template["spec"]["priorityClassName"] == "compute-batch"
    assert template["spec"]["tolerations"] == [
        {"key": "fab.internal/compute-pool", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]


def test_the_executors_template_is_labelled_with_their_pool(small_plan):
    config_map, _ = executor_template(small_plan)
    assert config_map["metadata"]["labels"] == {"fab.internal/compute-pool": "batch"}


def test_executors_pool_interactive_puts_them_beside_the_server():
    site = small_site()
    site["compute"]["spark"]["connect_executors_pool"] = "interactive"
    plan = render_small(site)
    config_map, template = executor_template(plan)
    assert config_map["metadata"]["labels"] == {"fab.internal/compute-pool": "interactive"}
    assert template["metadata"]["annotations"] == {"yunikorn.apache.org/queue": "root.interactive"}
    assert (template["spec"]["nodeSelector"], template["spec"]["priorityClassName"]) == (
        {"fab.internal/compute-pool": "interactive"}, "compute-interactive")
    assert template["spec"]["tolerations"] == [
        {"key": "fab.internal/compute-pool", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}]
    assert server(plan)["spec"]["template"]["spec"]["nodeSelector"] == {"fab.internal/compute-pool": "interactive"}


def test_fails_when_executors_pool_is_no_pool():
    site = small_site()
    site["compute"]["spark"]["connect_executors_pool"] = "gpu"
    assert config_errors(site) == [
        "fab-platform:site.compute.spark.connect_executors_pool: Input should be 'batch' or 'interactive' (got 'gpu')"]


def test_no_spark_setting_overrides_the_templates_node_selector(small_plan):
    """Spark adds `spark.kubernetes.node.selector.*` and `spark.kubernetes.executor.node.selector.*` (3.3+) to the template's
    node selector, over its keys: the server's settings and spark-defaults set none, so the template decides."""
    (defaults,) = [c for c in small_plan.objects("ConfigMap", COMPUTE)
                   if (c["metadata"]["namespace"], c["metadata"]["name"]) == ("spark-team-yield", "spark-defaults")]
    args = server(small_plan)["spec"]["template"]["spec"]["containers"][0]["args"]
    keys = [a.split("=", 1)[0] for a in args[1::2]] + [line.split(" ", 1)[0] for line in
                                                      defaults["data"]["spark-defaults.conf"].splitlines()]
    assert "spark.kubernetes.executor.podTemplateFile" in keys
    assert [k for k in keys if k.startswith(("spark.kubernetes.node.selector.", "spark.kubernetes.executor.node.selector."))] == []


def test_executors_start_in_the_teams_namespace(small_plan):
    args = server(small_plan)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "spark.kubernetes.namespace=spark-team-yield" in args


def test_executors_scale_from_none_to_the_configured_most():
    site = small_site()
    site["compute"]["spark"]["connect_max_executors"] = 3
    args = server(render_small(site))["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"spark.dynamicAllocation.minExecutors=0", "spark.dynamicAllocation.maxExecutors=3"} <= set(args)


def test_every_pod_but_the_teams_notebook_servers_and_its_executors_is_denied(small_plan):
    (policy,) = [p for p in small_plan.objects("CiliumNetworkPolicy", COMPUTE)
                 if (p["metadata"]["namespace"], p["metadata"]["name"]) == ("spark-team-yield", "spark-connect")]
    ns = "k8s:io.kubernetes.pod.namespace"
    assert policy["spec"]["ingressDeny"] == [
        {"fromEndpoints": [{"matchExpressions": [{"key": ns, "operator": "Exists"},
                                                 {"key": ns, "operator": "NotIn", "values": ["jupyterhub", "spark-team-yield"]}]}]},
        {"fromEndpoints": [{"matchLabels": {ns: "jupyterhub"},
                            "matchExpressions": [{"key": "k8s:component", "operator": "NotIn", "values": ["singleuser-server"]}]}]},
        {"fromEndpoints": [{"matchLabels": {ns: "jupyterhub"},
                            "matchExpressions": [{"key": "k8s:fab.internal/member-of-yield", "operator": "NotIn", "values": ["member"]}]}]},
        {"fromEndpoints": [{"matchLabels": {ns: "spark-team-yield"},
                            "matchExpressions": [{"key": "k8s:fab.internal/spark-connect", "operator": "NotIn", "values": ["executor"]}]}]},
    ]
    assert "ingress" not in policy["spec"]


def test_the_hub_marks_a_server_with_its_users_teams_and_names_the_first_teams_server(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(list(TEAMS), ray=False, connect=True), ["team-yield", "team-fdc", "platform-users"])
    assert pod.metadata.labels == {"component": "singleuser-server", "fab.internal/member-of-fdc": "member",
                                   "fab.internal/member-of-yield": "member"}
    assert pod.spec.containers[0].env == [{"name": "SPARK_REMOTE", "value": "sc://spark-connect.spark-team-fdc.svc.cluster.local:15002"}]


def test_a_server_of_no_team_is_marked_as_none_and_names_no_server(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(list(TEAMS), ray=False, connect=True), ["platform-users", "yield"])
    assert pod.metadata.labels == {"component": "singleuser-server"}
    assert pod.spec.containers[0].env is None


def test_without_connect_a_server_is_still_marked_but_names_no_server(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(["yield"], ray=False, connect=False), ["team-yield"])
    assert pod.metadata.labels["fab.internal/member-of-yield"] == "member"
    assert pod.spec.containers[0].env is None


def test_the_hub_runs_the_teams_hook(small_plan):
    assert hub_values(small_plan)["hub"]["extraConfig"] == {TEAMS_HOOK_KEY: teams_hook(["yield"], ray=True, connect=True)}


def test_notebooks_get_no_spark_remote_for_everyone(small_plan):
    # Nothing is mounted at a configuration folder (the old SPARK_CONF_DIR=/etc/spark), and no server-wide SPARK_REMOTE:
    # the hook names the user's team's server.
    assert "extraEnv" not in hub_values(small_plan)["singleuser"]


def test_the_service_serves_the_url_members_get(small_plan):
    (service,) = [s for s in small_plan.objects("Service", COMPUTE) if s["metadata"]["name"] == "spark-connect"]
    assert (service["metadata"]["namespace"], service["spec"]["ports"][0]["port"]) == ("spark-team-yield", 15002)
    assert spark_connect.url("yield") == (
        f"sc://{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local:15002")


def test_switched_off_there_is_no_server_and_no_url():
    plan = render_small(without_connect())
    assert servers(plan) == {}
    assert not [n for n in plan.objects("Namespace", COMPUTE) if n["metadata"]["name"].startswith("spark-team-")]
    assert hub_values(plan)["hub"]["extraConfig"] == {TEAMS_HOOK_KEY: teams_hook(["yield"], ray=True, connect=False)}


def test_the_namespaces_it_names_are_the_engines():
    assert spark_connect.JUPYTER_NAMESPACE == ENGINES["jupyterhub"].namespace
    assert "spark" in ENGINES


def test_the_manual_connects_to_the_programs_url():
    section = GPUS_DOC.read_text().split("\n## Spark Connect\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert spark_connect.url("yield") in block


def test_the_executor_template_is_a_valid_pod():
    assert builtin_errors(spark_connect.executor_template()) == []


def test_the_server_runs_as_its_own_service_account_bound_in_its_namespace_only(small_plan):
    assert server(small_plan)["spec"]["template"]["spec"]["serviceAccountName"] == "spark-connect"
    (binding,) = [b for b in small_plan.objects("RoleBinding", COMPUTE) if b["metadata"]["name"] == "spark-connect"]
    assert (binding["metadata"]["namespace"], binding["roleRef"]) == (
        "spark-team-yield", {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark-connect"})
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "spark-connect", "namespace": "spark-team-yield"}]
