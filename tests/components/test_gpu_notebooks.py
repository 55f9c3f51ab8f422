"""GPU notebooks (issue 20, item 3): the config section compute.jupyterhub.gpu_notebooks and its rules, the notebooks hub on
the GPU cluster, the teams' namespaces and quotas, the route through the compute ingress and the flow that admits it."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import config_errors, render_small
from small_site import NOTEBOOKS_VIP, add_gpu_cluster, add_gpu_notebooks, small_site

from components.config import parse_site
from components.notebooks import TEAM_PROFILES_CONFIG, hub_values, team_profiles

KEY = "fab-platform:site"
PATH = f"{KEY}.compute.jupyterhub.gpu_notebooks"


def with_notebooks(quotas: dict[str, int] | None = None, **sharing: Any) -> dict[str, Any]:
    site = small_site()
    add_gpu_notebooks(site, quotas, **sharing)
    return site


@pytest.fixture(scope="module")
def plan():
    return render_small(with_notebooks({"yield": 4, "fdc": 2}))


def objects(plan, kind: str, cluster: str) -> list[dict[str, Any]]:
    found = plan.objects(kind, f"site-t-{cluster}")
    assert found, f"no {kind} on {cluster}"
    return found


def named(plan, kind: str, cluster: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    (obj,) = [o for o in objects(plan, kind, cluster) if o["metadata"]["name"] == name
              and (namespace is None or o["metadata"].get("namespace") == namespace)]
    return obj


# Config -----------------------------------------------------------------------------------------------------------------

def test_a_site_with_gpu_notebooks_passes():
    assert parse_site(with_notebooks()).compute.jupyterhub.gpu_notebooks.team_quotas == {"yield": 4}


def test_the_flow_table_gains_the_notebooks_flow():
    flow = parse_site(with_notebooks()).flow_table()["gpu-notebooks"]
    assert (flow.sources, flow.to, flow.port, flow.pod_port, flow.to_namespace, flow.from_namespace) == (
        ["compute"], ["gpu"], 80, 8000, "gpu-notebooks", "envoy-gateway-system")


def test_no_notebooks_flow_without_gpu_notebooks():
    assert "gpu-notebooks" not in parse_site(small_site()).flow_table()


def test_fails_when_the_cluster_is_not_a_gpu_section():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["cluster"] = "compute"
    assert config_errors(site) == [
        (f"{KEY}.gpu.gpu.nodes.gpu-nb-1.pool: 'notebooks', but compute.jupyterhub.gpu_notebooks runs them on 'compute', so no "
        "notebook would use gpu-nb-1's GPUs: set gpu_notebooks.cluster to 'gpu', or give the node pool inference or training"),
        f"{PATH}.cluster: 'compute' is a compute cluster; GPU notebooks run on a gpu cluster: gpu",
    ]


def test_fails_when_the_cluster_is_a_training_only_cluster():
    site = with_notebooks()
    add_gpu_cluster(site, "gpu-train")
    site["gpu"]["gpu"]["nodes"]["gpu-nb-1"]["pool"] = "training"
    site["compute"]["jupyterhub"]["gpu_notebooks"]["cluster"] = "gpu-train"
    assert config_errors(site) == [
        f"{PATH}.cluster: 'gpu-train' is a gpu-train cluster, which trains only; GPU notebooks run on a gpu cluster: gpu",
    ]


def test_fails_when_the_cluster_has_no_notebooks_nodes():
    site = with_notebooks()
    site["gpu"]["gpu"]["nodes"]["gpu-nb-1"]["pool"] = "training"
    assert config_errors(site) == [
        (f"{PATH}.cluster: 'gpu' has no notebooks-pool node: give the nodes whose GPUs notebooks share pool: notebooks in "
        "gpu.gpu.nodes"),
    ]


def test_fails_when_notebooks_nodes_have_no_hub():
    site = with_notebooks()
    del site["compute"]["jupyterhub"]["gpu_notebooks"]
    assert config_errors(site) == [
        (f"{KEY}.gpu.gpu.nodes.gpu-nb-1.pool: 'notebooks', but compute.jupyterhub.gpu_notebooks is not set, so no notebook "
        "would use gpu-nb-1's GPUs: set gpu_notebooks.cluster to 'gpu', or give the node pool inference or training"),
    ]


def test_fails_when_the_vip_is_outside_the_pool():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["vip"] = "10.30.102.11"
    assert config_errors(site) == [
        f"{PATH}.vip: 10.30.102.11 is not in pool 'internal' (10.30.103.0/27); pick a free address of it",
    ]


def test_fails_when_the_vip_is_the_gateways():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["vip"] = site["inference"]["gateway"]["vip"]
    assert config_errors(site) == [
        f"{PATH}.vip: 10.30.103.10 is already used by inference.gateway.vip; every endpoint needs its own address",
    ]


def test_fails_when_the_pool_is_not_an_internal_pool_of_the_cluster():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["pool"] = "external"
    assert config_errors(site) == [
        f"{PATH}.pool: 'external' is not an internal pool of clusters.gpu; pick one of internal",
    ]


def test_fails_when_a_quota_names_no_team():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["team_quotas"]["nobody"] = 1
    assert config_errors(site) == [f"{PATH}.team_quotas.nobody: 'nobody' is not a team; teams: yield"]


def test_fails_when_a_quota_exceeds_the_pool():
    assert config_errors(with_notebooks({"yield": 33})) == [
        (f"{PATH}.team_quotas.yield: 33 notebooks is more than the notebooks pool of gpu holds (32: its GPUs times 4 per "
        "GPU); give at most 32"),
    ]


def test_fails_when_the_image_is_not_pinned():
    site = with_notebooks()
    site["compute"]["jupyterhub"]["gpu_notebooks"]["image"] = "quay.io/jupyter/pytorch-notebook:latest"
    assert config_errors(site) == [
        (f"{PATH}.image: must be an image with its registry, pinned by a tag other than latest or by a digest, such as "
        "quay.io/jupyter/pytorch-notebook:<tag> (got 'quay.io/jupyter/pytorch-notebook:latest')"),
    ]


def test_fails_when_gpu_notebooks_come_before_phase_4():
    site = with_notebooks()
    site["phase"] = 3
    assert config_errors(site) == [
        (f"{PATH}: runs GPU notebooks on gpu: GPU notebooks (a JupyterHub on a GPU cluster, its notebooks on shared GPUs) "
        "comes in phase 04 (operations) and the site is at phase 3; do without it until phase 03 is done and phase is 4 "
        "(docs/roadmap.md), or list gpu-notebooks in early_features")
    ]


# The hub's values --------------------------------------------------------------------------------------------------------

def test_each_team_group_gets_one_profile_in_its_namespace():
    config = parse_site(with_notebooks({"yield": 4, "fdc": 2})).compute.jupyterhub.gpu_notebooks
    profiles = team_profiles(config, "nvidia.com/gpu.shared")
    assert {group: [p["kubespawner_override"]["namespace"] for p in found] for group, found in profiles.items()} == {
        "team-fdc": ["notebooks-fdc"], "team-yield": ["notebooks-yield"]}


def test_a_profile_asks_for_one_share_of_a_gpu_and_never_a_whole_one():
    config = parse_site(with_notebooks()).compute.jupyterhub.gpu_notebooks
    (profile,) = team_profiles(config, "nvidia.com/mig-1g.10gb")["team-yield"]
    override = profile["kubespawner_override"]
    assert (override["extra_resource_limits"], override["extra_resource_guarantees"]) == (
        {"nvidia.com/mig-1g.10gb": "1"}, {"nvidia.com/mig-1g.10gb": "1"})


def test_the_hub_lets_in_only_the_teams_with_a_quota():
    config = parse_site(with_notebooks({"yield": 4, "fdc": 2})).compute.jupyterhub.gpu_notebooks
    values = hub_values(config, "nvidia.com/gpu.shared", "https://kc/realms/fab", "https://gpu-notebooks.x/hub/oauth_callback")
    assert values["hub"]["config"]["GenericOAuthenticator"]["allowed_groups"] == ["team-fdc", "team-yield"]


def test_the_profiles_a_user_sees_are_those_of_their_groups():
    c = type("Config", (), {"KubeSpawner": type("KubeSpawner", (), {})()})()
    profiles = {"team-yield": [{"slug": "yield"}], "team-fdc": [{"slug": "fdc"}]}
    z2jh = type("z2jh", (), {"get_config": staticmethod(lambda key, default=None: profiles)})
    import sys
    sys.modules["z2jh"] = z2jh  # the hub's own module, which extraConfig imports
    try:
        exec(TEAM_PROFILES_CONFIG, {"c": c})  # noqa: S102 - the hub runs extraConfig this way
    finally:
        del sys.modules["z2jh"]
    user = type("User", (), {"groups": [type("Group", (), {"name": "team-fdc"})(), type("Group", (), {"name": "other"})()]})()
    assert c.KubeSpawner.profile_list(type("Spawner", (), {"user": user})()) == [{"slug": "fdc"}]


# What the program registers ----------------------------------------------------------------------------------------------

def test_each_team_quota_caps_its_shares_and_holds_no_whole_gpu(plan):
    quota = named(plan, "ResourceQuota", "gpu", "notebooks", "notebooks-fdc")
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu.shared": "2", "requests.nvidia.com/gpu": "0", "requests.cpu": "8", "requests.memory": "64Gi",
        "limits.cpu": "8", "limits.memory": "64Gi"}


def test_the_hub_may_start_servers_in_the_team_namespaces_only(plan):
    bindings = [b for b in objects(plan, "RoleBinding", "gpu") if b["metadata"]["name"] == "gpu-notebooks-hub"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["notebooks-fdc", "notebooks-yield"]
    assert {(s["name"], s["namespace"]) for b in bindings for s in b["subjects"]} == {("hub", "gpu-notebooks")}


def test_the_hub_proxy_keeps_the_callers_address_at_its_vip(plan):
    service = named(plan, "Service", "gpu", "proxy-vip", "gpu-notebooks")
    assert (service["spec"]["type"], service["spec"]["externalTrafficPolicy"], service["metadata"]["annotations"]) == (
        "LoadBalancer", "Local", {"lbipam.cilium.io/ips": NOTEBOOKS_VIP})


def test_the_compute_ingress_reaches_the_hub_only_at_its_vip(plan):
    (endpoints,) = objects(plan, "EndpointSlice", "compute")
    assert ([e["addresses"] for e in endpoints["endpoints"]], endpoints["metadata"]["labels"]["kubernetes.io/service-name"]) == (
        [[NOTEBOOKS_VIP]], "gpu-notebooks")
    assert "selector" not in named(plan, "Service", "compute", "gpu-notebooks", "gpu-notebooks")["spec"]


def test_the_route_is_on_the_compute_ingress_listener_of_its_host(plan):
    route = named(plan, "HTTPRoute", "compute", "gpu-notebooks", "gpu-notebooks")
    assert (route["spec"]["hostnames"], route["spec"]["parentRefs"][0]["sectionName"]) == (
        ["gpu-notebooks.site-t.fab.internal"], "gpu-notebooks")


def test_the_notebooks_flow_admits_computes_envoy_to_the_hub_proxy_only(plan):
    policy = named(plan, "CiliumClusterwideNetworkPolicy", "gpu", "fab-flow-gpu-notebooks")
    assert policy["spec"]["endpointSelector"]["matchLabels"] == {
        "k8s:io.kubernetes.pod.namespace": "gpu-notebooks", "app.kubernetes.io/name": "jupyterhub",
        "app.kubernetes.io/component": "proxy"}
    assert [e["toPorts"] for e in policy["spec"]["ingress"]] == [[{"ports": [{"port": "8000", "protocol": "TCP"}]}]]


def test_notebook_servers_meet_the_restricted_pod_security_of_their_namespace():
    config = parse_site(with_notebooks()).compute.jupyterhub.gpu_notebooks
    values = hub_values(config, "nvidia.com/gpu.shared", "https://kc/realms/fab", "https://gpu-notebooks.x/hub/oauth_callback")
    assert (values["hub"]["config"]["KubeSpawner"]["container_security_context"], values["singleuser"]["cloudMetadata"]) == (
        {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
         "seccompProfile": {"type": "RuntimeDefault"}},
        {"blockWithIptables": False})
