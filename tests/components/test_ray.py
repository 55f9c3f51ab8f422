"""Ray on the GPU clusters (issue 20, item 2): KubeRay where Kueue runs Ray objects, each team's Ray template and token,
and Jupyter on compute reaching its team's Ray heads through declared flows, with the team's token."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from admission import Decision, Request, admit
from helpers import config_errors, render_small
from jupyter_hook import run_teams_hook
from schemas import CrdSchemas, schema_errors
from small_site import small_site

from components import versions
from components.config import parse_site
from components.engines.jupyterhub import ENGINE as JUPYTERHUB
from components.engines.jupyterhub import TEAMS_HOOK_KEY, teams_hook
from components.kueue import LOCAL_QUEUE, QUEUE_LABEL
from components.ray import (
    JUPYTER_NAMESPACE,
    RAY_CLIENT_PORT,
    RAY_HEAD_LABELS,
    TEMPLATE_CONFIG_MAP,
    TOKEN_AUTH_POLICY,
    TOKEN_SECRET,
    example_ray_job,
    ray_cluster_template,
)
from fabctl.render import HELM_RELEASE_TYPE


@pytest.fixture(scope="module")
def crds(crd_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir)


def kuberay_values(plan) -> dict[str, dict]:
    """Cluster -> the values of its KubeRay release."""
    releases = [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == versions.KUBERAY.chart]
    return {plan.cluster(r): r["inputs"]["values"] for r in releases}


def test_kuberay_runs_on_every_gpu_cluster_watching_the_team_namespaces():
    plan = render_small(small_site(gpu_clusters=2, teams=("fdc", "yield")))
    values = kuberay_values(plan)
    assert {cluster: v.get("watchNamespace") for cluster, v in values.items()} == {
        "site-t-gpu": ["team-fdc", "team-yield"], "site-t-gpu-train": ["team-fdc", "team-yield"],
    }


def test_the_operator_is_restricted_with_namespaced_rbac_on_the_system_nodes():
    (values,) = kuberay_values(render_small(small_site())).values()
    assert values["singleNamespaceInstall"] is True
    assert values["podSecurityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert values["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    # No toleration of the GPU pools' taints: the operator lands on the untainted system nodes.
    assert "tolerations" not in values and "nodeSelector" not in values


def test_the_multikueue_manager_holds_the_crds_with_an_operator_that_watches_only_its_own_namespace():
    values = kuberay_values(render_small(small_site(multikueue=True)))
    assert values["site-t-compute"]["singleNamespaceInstall"] is True
    assert "watchNamespace" not in values["site-t-compute"]


def test_kueue_admits_ray_jobs_and_ray_clusters_on_every_kueue_cluster():
    plan = render_small(small_site(multikueue=True))
    releases = [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"].endswith(f"/{versions.KUEUE.chart}")]
    frameworks = {plan.cluster(r): yaml.safe_load(r["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
                  ["integrations"]["frameworks"] for r in releases}
    assert sorted(frameworks) == ["site-t-compute", "site-t-gpu"]
    assert all({"ray.io/rayjob", "ray.io/raycluster"} <= set(f) for f in frameworks.values())


def test_ray_is_off_when_switched_off():
    site = small_site()
    site.setdefault("training", {})["ray"] = False
    plan = render_small(site)
    assert kuberay_values(plan) == {}
    assert not [name for name in parse_site(site).flow_table() if name.startswith("ray-")]


def test_ray_is_off_before_phase_3():
    site = small_site()
    site["phase"] = 2
    site.pop("training", None)
    assert parse_site(site).ray_enabled() is False


def test_fails_when_ray_is_switched_on_before_phase_3():
    site = small_site()
    site["phase"] = 2
    site["training"] = {"ray": True}
    assert config_errors(site) == [(
        "fab-platform:site.training.ray: true runs KubeRay on the GPU clusters: Ray on the GPU clusters (KubeRay, RayJobs "
        "through Kueue, Jupyter to Ray) comes in phase 03 (training pipeline) and the site is at phase 2; do without it "
        "until phase 02 is done and phase is 3 (docs/roadmap.md), or list ray in early_features"
    )]


def test_every_team_namespace_of_a_gpu_cluster_holds_the_template_and_the_token():
    plan = render_small(small_site(gpu_clusters=2, teams=("fdc", "yield")))
    held = {(c, o["metadata"]["namespace"], o["kind"]) for c, o, _ in plan.manifests()
            if o["metadata"].get("name") in (TEMPLATE_CONFIG_MAP, TOKEN_SECRET)}
    assert held == {(cluster, ns, kind) for cluster in ("site-t-gpu", "site-t-gpu-train") for ns in ("team-fdc", "team-yield")
                    for kind in ("ConfigMap", "Secret")}


def test_the_template_is_a_valid_ray_cluster(crds):
    assert schema_errors(ray_cluster_template("internal"), crds) == []


def test_the_example_ray_job_is_valid(crds):
    assert schema_errors(example_ray_job(), crds) == []


def test_the_rendered_template_is_queued_by_the_team_queue_with_token_authentication():
    plan = render_small(small_site())
    (config_map,) = [o for _, o, _ in plan.manifests() if o["metadata"].get("name") == TEMPLATE_CONFIG_MAP]
    cluster = yaml.safe_load(config_map["data"]["raycluster.yaml"])
    assert cluster["metadata"]["labels"][QUEUE_LABEL] == LOCAL_QUEUE
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": TOKEN_SECRET}


def test_ray_pods_run_in_the_training_pool_at_training_priority_with_the_team_credentials():
    spec = ray_cluster_template("internal")["spec"]
    for pod in (spec["headGroupSpec"]["template"]["spec"], spec["workerGroupSpecs"][0]["template"]["spec"]):
        assert pod["priorityClassName"] == "fab-training"
        assert pod["nodeSelector"] == {"fab.internal/gpu-pool": "training"}
        assert pod["tolerations"] == [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
        assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}},
                                                   {"configMapRef": {"name": "nccl"}}]


def test_the_head_takes_its_client_address_from_the_internal_pool_keeping_the_client_s_address():
    head = ray_cluster_template("internal")["spec"]["headGroupSpec"]
    assert head["serviceType"] == "LoadBalancer"
    assert head["headService"] == {"metadata": {"labels": {"lb.fab.internal/pool": "internal"}},
                                   "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"}}


def test_a_ray_job_s_head_has_no_client_address():
    assert "headService" not in example_ray_job()["spec"]["rayClusterSpec"]["headGroupSpec"]


def test_one_flow_per_team_admits_jupyter_servers_to_that_team_s_ray_heads_on_the_client_port():
    flows = parse_site(small_site(gpu_clusters=2, teams=("fdc", "yield"))).flow_table()
    ray = {name: flow for name, flow in flows.items() if name.startswith("ray-")}
    assert sorted(ray) == ["ray-fdc", "ray-yield"]
    flow = ray["ray-yield"]
    assert (flow.sources, flow.to, flow.port, flow.target) == (["compute"], ["gpu", "gpu-train"], RAY_CLIENT_PORT, "pods")
    assert (flow.from_namespace, flow.from_labels) == (
        JUPYTER_NAMESPACE, {"component": "singleuser-server", "fab.internal/member-of-yield": "member"})
    assert (flow.to_namespace, flow.to_labels) == ("team-yield", RAY_HEAD_LABELS)


def test_the_ray_flow_policy_admits_nothing_but_jupyter_servers_on_the_client_port():
    plan = render_small(small_site())
    (policy,) = [o for c, o, _ in plan.manifests() if o["kind"] == "CiliumClusterwideNetworkPolicy"
                 and o["metadata"]["name"] == "fab-flow-ray-yield"]
    assert policy["spec"]["endpointSelector"] == {"matchLabels": {"ray.io/node-type": "head", "k8s:io.kubernetes.pod.namespace": "team-yield"}}
    assert policy["spec"]["ingress"] == [{
        "fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-compute",
                                           "k8s:io.kubernetes.pod.namespace": "jupyterhub", "component": "singleuser-server",
                                           "fab.internal/member-of-yield": "member"}}],
        "toPorts": [{"ports": [{"port": "10001", "protocol": "TCP"}]}],
    }]


def test_there_is_no_ray_flow_without_jupyterhub():
    site = small_site()
    site["compute"]["jupyterhub"] = {"enabled": False}
    assert not [name for name in parse_site(site).flow_table() if name.startswith("ray-")]


def test_the_flow_names_jupyterhub_s_namespace():
    assert JUPYTER_NAMESPACE == JUPYTERHUB.namespace


def test_each_team_s_token_is_a_secret_in_jupyterhub_s_namespace():
    plan = render_small(small_site(teams=("fdc", "yield")))
    secrets = sorted(o["metadata"]["name"] for c, o, _ in plan.manifests()
                     if o["kind"] == "Secret" and c == "site-t-compute" and o["metadata"]["namespace"] == JUPYTER_NAMESPACE
                     and o["metadata"]["name"].startswith("ray-token-"))
    assert secrets == ["ray-token-fdc", "ray-token-yield"]


def test_a_server_mounts_the_tokens_of_its_user_s_teams_only(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(["fdc", "yield"], ray=True, connect=False), ["team-yield", "platform-users"])
    assert pod.spec.volumes == [{"name": "ray-token-yield", "secret": {"secret_name": "ray-token-yield", "default_mode": 0o440}}]
    assert pod.spec.containers[0].volume_mounts == [{"name": "ray-token-yield", "mount_path": "/etc/ray/yield", "read_only": True}]


def test_a_server_of_no_team_mounts_no_token(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(["fdc", "yield"], ray=True, connect=False), ["platform-users"])
    assert (pod.spec.volumes, pod.spec.containers[0].volume_mounts) == (None, None)


def test_without_ray_a_server_mounts_no_token(monkeypatch):
    pod = run_teams_hook(monkeypatch, teams_hook(["yield"], ray=False, connect=False), ["team-yield"])
    assert pod.spec.volumes is None


def test_the_teams_hook_is_given_to_jupyterhub():
    plan = render_small(small_site())
    (release,) = [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == "jupyterhub"]
    assert release["inputs"]["values"]["hub"]["extraConfig"] == {TEAMS_HOOK_KEY: teams_hook(["yield"], ray=True, connect=True)}


def test_the_manual_shows_the_ray_job_a_team_submits():
    manual = (Path(__file__).parents[2] / "docs" / "gpus.md").read_text()
    assert yaml.safe_dump(example_ray_job(), sort_keys=False).rstrip("\n") in manual


def test_every_cluster_kuberay_runs_on_makes_token_auth_mandatory_before_the_operator():
    plan = render_small(small_site(multikueue=True))
    bindings = {plan.cluster(r): r for r in plan.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
                if r["inputs"]["metadata"]["name"] == TOKEN_AUTH_POLICY}
    assert sorted(bindings) == sorted(kuberay_values(plan)) == ["site-t-compute", "site-t-gpu"]
    assert all(b["inputs"]["spec"] == {"policyName": TOKEN_AUTH_POLICY, "validationActions": ["Deny"]} for b in bindings.values())
    releases = [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == versions.KUBERAY.chart]
    assert all(bindings[plan.cluster(r)]["urn"] in plan.waits_for(r) for r in releases)


def test_fails_when_a_team_s_ray_cluster_leaves_out_token_auth():
    (policy,) = [o for c, o, _ in render_small(small_site()).manifests()
                 if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == TOKEN_AUTH_POLICY]
    (binding,) = [o for c, o, _ in render_small(small_site()).manifests()
                  if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == TOKEN_AUTH_POLICY]
    template = ray_cluster_template("pool")
    template["spec"].pop("authOptions")
    request = Request(operation="CREATE", group="ray.io", version="v1", resource="rayclusters", kind="RayCluster",
                      name="interactive", namespace="team-yield", username="oidc:alice", object=template)
    assert admit(policy, binding, request) == Decision(allowed=False, message=(
        "Ray clusters run with token authentication: set authOptions.mode: token with secretName: ray-token (the team's token; "
        "README, Ray) in spec"))
    assert admit(policy, binding, replace(request, object=ray_cluster_template("pool"))).allowed
