"""CrossClusterNetwork behaviour, read from renders of small sites under Pulumi mocks."""

from __future__ import annotations

import pytest

from components.config import parse_site
from components.network import lb_service_labels
from fabctl.render import HELM_RELEASE_TYPE, K8S_PROVIDER_TYPE
from helpers import render_small
from small_site import small_site

CCNP = "CiliumClusterwideNetworkPolicy"


def policy(plan, cluster: str, name: str) -> dict:
    matches = [p for p in plan.objects(CCNP, cluster) if p["metadata"]["name"] == name]
    assert len(matches) == 1, f"{cluster} has {len(matches)} policies named {name}"
    return matches[0]


def cilium_releases(plan) -> list[dict]:
    return [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["chart"] == "cilium"]


def cilium_values(plan, cluster: str) -> dict:
    (release,) = [r for r in cilium_releases(plan) if plan.cluster(r) == cluster]
    return release["inputs"]["values"]


def test_every_cluster_has_one_kubernetes_provider_named_after_it(small_plan):
    providers = {r["name"]: r["inputs"]["context"] for r in small_plan.of_type(K8S_PROVIDER_TYPE)}
    assert providers == {"site-t-storage": "site-t-storage", "site-t-compute": "site-t-compute", "site-t-gpu": "site-t-gpu"}


def test_a_provider_uses_the_kubeconfig_context_the_config_names():
    raw = small_site()
    raw["clusters"]["gpu"]["kubeconfig_context"] = "admin@gpu-t"
    providers = {r["name"]: r["inputs"]["context"] for r in render_small(raw).of_type(K8S_PROVIDER_TYPE)}
    assert providers["site-t-gpu"] == "admin@gpu-t"


def test_minio_and_keycloak_providers_take_endpoints_from_config_and_no_credentials(small_plan):
    (minio,) = small_plan.of_type("pulumi:providers:minio")
    (keycloak,) = small_plan.of_type("pulumi:providers:keycloak")
    assert (minio["name"], minio["inputs"]["minioServer"], minio["inputs"]["minioSsl"]) == (
        "site-t-minio", "s3-admin.site-t.fab.internal:9000", "true"
    )
    assert (keycloak["name"], keycloak["inputs"]["url"], keycloak["inputs"]["clientId"]) == (
        "site-t-keycloak", "https://keycloak.site-t.fab.internal", "fab-platform-pulumi"
    )
    assert not {"minioUser", "minioPassword"} & set(minio["inputs"])
    assert not {"clientSecret", "password"} & set(keycloak["inputs"])


def test_every_cluster_gets_its_bgp_instance_with_its_asn_and_peers(small_plan):
    instances = {}
    for cluster in ("site-t-storage", "site-t-compute", "site-t-gpu"):
        (config,) = small_plan.objects("CiliumBGPClusterConfig", cluster)
        (instance,) = config["spec"]["bgpInstances"]
        instances[cluster] = (instance["localASN"], {p["name"]: (p["peerAddress"], p["peerASN"]) for p in instance["peers"]})
    assert instances == {
        "site-t-storage": (65301, {"tor": ("10.30.1.1", 65300)}),
        "site-t-compute": (65302, {"tor": ("10.30.2.1", 65300), "edge": ("10.30.2.254", 65399)}),
        "site-t-gpu": (65303, {"tor": ("10.30.3.1", 65300)}),
    }


@pytest.mark.parametrize("cluster", ["site-t-gpu", "site-t-gpu-train"])
def test_gpu_clusters_peer_and_advertise_privately_only(full_plan, cluster):
    (config,) = full_plan.objects("CiliumBGPClusterConfig", cluster)
    refs = {p["peerConfigRef"]["name"] for p in config["spec"]["bgpInstances"][0]["peers"]}
    assert refs == {"fab-private"}
    assert [o["metadata"]["name"] for o in full_plan.objects("CiliumBGPPeerConfig", cluster)] == ["fab-private"]
    assert [o["metadata"]["name"] for o in full_plan.objects("CiliumBGPAdvertisement", cluster)] == ["fab-private"]


def test_private_peers_get_pod_cidrs_and_internal_pools_only(small_plan):
    (advert,) = [a for a in small_plan.objects("CiliumBGPAdvertisement", "site-t-compute") if a["metadata"]["name"] == "fab-private"]
    assert advert["spec"]["advertisements"] == [
        {"advertisementType": "PodCIDR"},
        {
            "advertisementType": "Service",
            "service": {"addresses": ["LoadBalancerIP"]},
            "selector": {"matchExpressions": [{"key": "lb.fab.internal/pool", "operator": "In", "values": ["internal"]}]},
        },
    ]


def test_public_peers_get_external_pools_only(small_plan):
    (advert,) = [a for a in small_plan.objects("CiliumBGPAdvertisement", "site-t-compute") if a["metadata"]["name"] == "fab-public"]
    assert advert["spec"]["advertisements"] == [
        {
            "advertisementType": "Service",
            "service": {"addresses": ["LoadBalancerIP"]},
            "selector": {"matchExpressions": [{"key": "lb.fab.internal/pool", "operator": "In", "values": ["external"]}]},
        }
    ]


def test_peer_configs_select_their_advertisement_class(small_plan):
    selected = {
        pc["metadata"]["name"]: pc["spec"]["families"][0]["advertisements"]["matchLabels"]
        for pc in small_plan.objects("CiliumBGPPeerConfig", "site-t-compute")
    }
    assert selected == {
        "fab-private": {"bgp.fab.internal/advertise": "private"},
        "fab-public": {"bgp.fab.internal/advertise": "public"},
    }


def test_every_pool_is_picked_by_its_service_label(small_plan):
    pools = {p["metadata"]["name"]: p["spec"] for p in small_plan.objects("CiliumLoadBalancerIPPool", "site-t-compute")}
    assert pools == {
        "external": {"blocks": [{"cidr": "203.0.113.16/28"}], "serviceSelector": {"matchLabels": {"lb.fab.internal/pool": "external"}}},
        "internal": {"blocks": [{"cidr": "10.30.102.0/27"}], "serviceSelector": {"matchLabels": {"lb.fab.internal/pool": "internal"}}},
    }


def test_every_cluster_has_the_default_deny_rule(plan):
    clusters = {r["name"] for r in plan.of_type(K8S_PROVIDER_TYPE)}
    with_rule = {c for c, obj, _ in plan.manifests() if obj["kind"] == CCNP and obj["metadata"]["name"] == "fab-default-deny-remote"}
    assert clusters
    assert with_rule == clusters


def test_default_deny_admits_only_the_local_cluster_and_node_infrastructure(small_plan):
    rule = policy(small_plan, "site-t-gpu", "fab-default-deny-remote")
    assert rule["spec"]["endpointSelector"] == {}
    assert rule["spec"]["ingress"] == [
        {"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-gpu"}}]},
        {"fromEntities": ["host", "health", "kube-apiserver", "ingress"]},
    ]


def test_one_rule_per_flow_in_each_enforcing_cluster(plan):
    """A world flow has two, on its sources: the allow and the deny for every other pod (`fab-deny-<flow>`)."""
    flow_rules = sorted(
        (c, obj["metadata"]["name"])
        for c, obj, _ in plan.manifests()
        if obj["kind"] == CCNP and obj["metadata"]["labels"]["fab.internal/rule"] == "flow"
    )
    network = plan.outputs["network"]
    expected = sorted(
        (network["clusters"][key]["cluster_name"], policy_name)
        for name, flow in network["flows"].items()
        for key in (flow.get("from", []) if flow.get("target") in ("kube-apiserver", "world") else flow["to"])
        for policy_name in ((f"fab-flow-{name}", f"fab-deny-{name}") if flow.get("target") == "world" else (f"fab-flow-{name}",))
    )
    assert flow_rules, "no flow rule"
    assert flow_rules == expected


def test_a_flow_admits_exactly_its_source_clusters_on_its_port(full_plan):
    rule = policy(full_plan, "site-t-storage", "fab-flow-s3")
    assert rule["spec"]["endpointSelector"] == {"matchLabels": {"k8s:io.kubernetes.pod.namespace": "aistor"}}
    assert rule["spec"]["ingress"] == [
        {
            "fromEndpoints": [
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-compute"}},
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-gpu"}},
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-gpu-train"}},
            ],
            "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}],
        }
    ]


def test_the_inference_flow_allows_the_envoy_container_port(small_plan):
    rule = policy(small_plan, "site-t-gpu", "fab-flow-inference")
    assert rule["spec"]["endpointSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "envoy", "k8s:io.kubernetes.pod.namespace": "envoy-gateway-system"}
    }
    assert rule["spec"]["ingress"][0]["toPorts"] == [{"ports": [{"port": "10443", "protocol": "TCP"}]}]


def test_a_world_flow_admits_the_world_entity(full_plan):
    rule = policy(full_plan, "site-t-storage", "fab-flow-s3-external")
    assert rule["spec"]["ingress"] == [{"fromEntities": ["world"], "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]}]


def test_the_api_server_flow_limits_the_manager_pods_egress(full_plan):
    rule = policy(full_plan, "site-t-compute", "fab-flow-multikueue")
    assert rule["spec"]["endpointSelector"] == {
        "matchLabels": {"control-plane": "controller-manager", "k8s:io.kubernetes.pod.namespace": "kueue-system"}
    }
    assert rule["spec"]["egress"][2] == {
        "toCIDR": ["10.30.3.10/32", "10.30.4.10/32"],
        "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}],
    }


def test_clustermesh_apiserver_admits_the_other_clusters_nodes_only(small_plan):
    rule = policy(small_plan, "site-t-compute", "fab-clustermesh-apiserver")
    assert rule["spec"]["ingress"][0]["fromCIDRSet"] == [{"cidr": "10.30.3.0/24"}, {"cidr": "10.30.1.0/24"}]
    assert all(i["toPorts"] == [{"ports": [{"port": "2379", "protocol": "TCP"}]}] for i in rule["spec"]["ingress"])


def test_cilium_runs_native_routing_with_its_cluster_identity(small_plan):
    values = cilium_values(small_plan, "site-t-gpu")
    assert values["cluster"] == {"name": "site-t-gpu", "id": 3}
    assert (values["routingMode"], values["kubeProxyReplacement"], values["bgpControlPlane"]) == ("native", True, {"enabled": True})
    assert values["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == ["10.92.0.0/16"]
    assert (values["k8sServiceHost"], values["k8sServicePort"]) == ("10.30.3.10", 6443)


def test_clustermesh_connects_every_other_cluster_by_its_vip(small_plan):
    mesh = cilium_values(small_plan, "site-t-gpu")["clustermesh"]
    assert mesh["config"] == {
        "enabled": True,
        "clusters": [
            {"name": "site-t-compute", "port": 2379, "ips": ["10.30.102.2"]},
            {"name": "site-t-storage", "port": 2379, "ips": ["10.30.101.2"]},
        ],
    }
    assert mesh["apiserver"]["service"] == {"type": "ClusterIP", "externalTrafficPolicy": None}


def test_the_shared_clustermesh_ca_key_is_a_secret(small_plan):
    releases = cilium_releases(small_plan)
    assert sorted(small_plan.cluster(r) for r in releases) == ["site-t-compute", "site-t-gpu", "site-t-storage"]
    for release in releases:
        assert "values.tls.ca.key" in release["secret_inputs"]
        assert release["inputs"]["values"]["tls"]["ca"]["key"] == "[secret]"


def test_cilium_objects_wait_for_the_cilium_release(small_plan):
    releases = {small_plan.cluster(r): r["urn"] for r in cilium_releases(small_plan)}
    cilium_objects = [(cluster, resource) for cluster, obj, resource in small_plan.manifests() if obj["apiVersion"] == "cilium.io/v2"]
    assert cilium_objects
    assert [resource["name"] for cluster, resource in cilium_objects if releases[cluster] not in resource["dependencies"]] == []


def cilium_objects_on(plan, cluster: str) -> dict[str, dict]:
    return {r["name"]: r for c, obj, r in plan.manifests() if c == cluster and obj["apiVersion"] == "cilium.io/v2"}


def test_unmanaged_cilium_keeps_its_objects_without_a_release(small_plan):
    raw = small_site()
    raw["clusters"]["gpu"]["cilium"] = {"managed": False}
    plan = render_small(raw)
    assert sorted(plan.cluster(r) for r in cilium_releases(plan)) == ["site-t-compute", "site-t-storage"]
    managed, unmanaged = cilium_objects_on(small_plan, "site-t-gpu"), cilium_objects_on(plan, "site-t-gpu")
    assert managed
    assert sorted(unmanaged) == sorted(managed)
    # nothing waits for a release that is not there; a fence waits for its namespace only
    waits = {name: [d for d in r["dependencies"] if "core/v1:Namespace::" not in d] for name, r in unmanaged.items()}
    assert {name: deps for name, deps in waits.items() if deps} == {}


def test_outputs_carry_pools_peers_and_flows_per_cluster(full_plan):
    gpu = full_plan.outputs["network"]["clusters"]["gpu-train"]
    assert gpu == {
        "cluster_name": "site-t-gpu-train",
        "pools": {"internal": {"cidrs": ["10.30.104.0/27"], "visibility": "internal"}},
        "peers": {"tor": {"address": "10.30.4.1", "asn": 65300, "kind": "private"}},
        "flows_in": ["multikueue", "ray-fdc", "ray-yield"],
        "flows_out": ["polaris", "s3"],
        "host_network_namespaces": ["gpu-operator", "nvidia-network-operator"],
    }


def test_lb_service_labels_pick_the_pool():
    assert lb_service_labels("gpu", parse_site(small_site()).clusters["gpu"], "internal") == {"lb.fab.internal/pool": "internal"}


def test_fails_when_a_component_asks_for_a_pool_the_cluster_lacks():
    with pytest.raises(ValueError, match="^cluster 'gpu' has no LB pool 'external'; pools: internal$"):
        lb_service_labels("gpu", parse_site(small_site()).clusters["gpu"], "external")


def test_the_clustermesh_api_server_gets_its_vip_from_a_service_that_waits_for_the_pool(small_plan):
    (service,) = [o for o in small_plan.objects("Service", "site-t-gpu") if o["metadata"]["name"] == "clustermesh-apiserver-vip"]
    assert (service["spec"]["type"], service["metadata"]["annotations"], service["metadata"]["labels"]) == (
        "LoadBalancer", {"lbipam.cilium.io/ips": "10.30.103.2"}, {"lb.fab.internal/pool": "internal"}
    )
    (record,) = [r for r in small_plan.resources if r["name"] == "network-gpu-clustermesh-apiserver"]
    (pool,) = [r for r in small_plan.resources if r["name"] == "network-gpu-pool-internal"]
    assert pool["urn"] in record["dependencies"]


def test_cilium_encrypts_pod_traffic_with_wireguard_by_default(small_plan):
    assert {cilium_values(small_plan, c)["encryption"]["enabled"] for c in ("site-t-storage", "site-t-compute", "site-t-gpu")} == {True}
    assert cilium_values(small_plan, "site-t-gpu")["encryption"] == {"enabled": True, "type": "wireguard"}


def test_a_site_that_turns_encryption_off_installs_cilium_without_it():
    raw = small_site()
    for cluster in raw["clusters"].values():
        cluster["cilium"] = {"encryption": "off"}
    assert cilium_values(render_small(raw), "site-t-gpu")["encryption"] == {"enabled": False, "type": "wireguard"}


def test_the_hubble_ui_reaches_hubble_relay(small_plan):
    from cilium_engine import admitted, pod

    relay = pod("site-t-gpu", "kube-system", {"k8s-app": "hubble-relay"})
    assert admitted(small_plan, relay, pod("site-t-gpu", "kube-system", {"k8s-app": "hubble-ui"}), 4245).admitted


def test_no_pod_reaches_the_hubble_ui(small_plan):
    from cilium_engine import admitted, pod

    ui = pod("site-t-compute", "kube-system", {"k8s-app": "hubble-ui"})
    verdict = admitted(small_plan, ui, pod("site-t-compute", "kube-system", {"k8s-app": "hubble-relay"}), 8081)
    assert (verdict.admitted, verdict.why) == (False, "denied by fab-hubble-ui")



ISOLATION = "fab-team-isolation"
TEAM_NS_LABEL = "k8s:io.cilium.k8s.namespace.labels.fab.internal/team"


def _team_pod(plan, cluster: str, team: str, labels: dict | None = None):
    from cilium_engine import in_plan

    return in_plan(plan, cluster, f"team-{team}", labels or {"app": "mine"})


def test_every_cluster_isolates_each_team_by_its_namespace_label(full_plan):
    clusters = {r["name"] for r in full_plan.of_type(K8S_PROVIDER_TYPE)}
    for cluster in sorted(clusters):
        selectors = [spec["endpointSelector"] for spec in policy(full_plan, cluster, ISOLATION)["specs"]]
        assert (cluster, selectors) == (cluster, [{"matchLabels": {TEAM_NS_LABEL: "fdc"}}, {"matchLabels": {TEAM_NS_LABEL: "yield"}}])


def test_team_isolation_only_denies(full_plan):
    """Deny rules without a default deny of their own: nothing the other rules admit to a team's pods is taken away but
    other tenants' pods."""
    specs = policy(full_plan, "site-t-gpu", ISOLATION)["specs"]
    assert {(("ingress" in spec), spec["enableDefaultDeny"]["ingress"], len(spec["ingressDeny"])) for spec in specs} == {(False, False, 1)}


def test_a_teams_pod_cannot_reach_another_teams_pod_on_its_cluster(full_plan):
    from cilium_engine import admitted

    verdict = admitted(full_plan, _team_pod(full_plan, "site-t-gpu", "fdc"), _team_pod(full_plan, "site-t-gpu", "yield"), 29500)
    assert (verdict.admitted, verdict.why) == (False, "denied by fab-team-isolation")


def test_a_teams_pods_reach_each_other_on_any_port(full_plan):
    """NCCL, torch rendezvous and Ray between a team's own pods."""
    from cilium_engine import admitted

    for port in (29500, 6379, 8265, 45678):
        assert admitted(full_plan, _team_pod(full_plan, "site-t-gpu", "yield"), _team_pod(full_plan, "site-t-gpu", "yield"), port).admitted


def test_the_platforms_pods_still_reach_a_teams_pods(full_plan):
    """Prometheus scrapes, KubeRay's operator calls a Ray head's dashboard: their namespaces belong to no team."""
    from cilium_engine import admitted, in_plan

    head = _team_pod(full_plan, "site-t-gpu", "yield", {"ray.io/node-type": "head"})
    for namespace, labels, port in (("monitoring", {"app.kubernetes.io/name": "prometheus"}, 8080),
                                    ("kuberay-system", {"app.kubernetes.io/name": "kuberay-operator"}, 8265)):
        verdict = admitted(full_plan, head, in_plan(full_plan, "site-t-gpu", namespace, labels), port)
        assert (namespace, verdict.admitted) == (namespace, True)


def test_compute_notebooks_still_open_ray_sessions_on_a_teams_head_across_clusters(small_plan):
    """The isolation's selectors name no cluster: other clusters' pods reach a team by its flows, as before."""
    from cilium_engine import admitted, in_plan

    head = _team_pod(small_plan, "site-t-gpu", "yield", {"ray.io/node-type": "head"})
    from components.config import names

    server = in_plan(small_plan, "site-t-compute", "jupyterhub",
                     {"component": "singleuser-server", names.team_member_label("yield"): names.TEAM_MEMBER})
    verdict = admitted(small_plan, head, server, 10001)
    assert (verdict.admitted, verdict.why) == (True, "allowed by fab-flow-ray-yield")


def _tenants():
    from components.training import tenant_labels
    from components.config import RemoteTeam

    return tenant_labels(["yield", "fdc"], {"remote-site-b-yield": RemoteTeam("site-b", "yield", {}),
                                            "remote-site-c-yield": RemoteTeam("site-c", "yield", {})})


def test_tenants_are_the_teams_and_the_linked_peers_teams():
    assert _tenants() == {
        "fdc": {"fab.internal/team": "fdc"}, "yield": {"fab.internal/team": "yield"},
        "remote-site-b-yield": {"fab.internal/remote-site": "site-b", "fab.internal/remote-team": "yield"},
        "remote-site-c-yield": {"fab.internal/remote-site": "site-c", "fab.internal/remote-team": "yield"},
    }


def _tenant_pod(namespace: str, labels: dict[str, str], pod_labels: dict | None = None):
    from cilium_engine import pod

    return pod("site-t-gpu", namespace, pod_labels or {"app": "mine"}, labels)


def test_a_peers_team_and_the_sites_team_of_the_same_name_are_kept_apart():
    from cilium_engine import decide

    from components.network_policies import tenant_isolation_policy

    tenants = _tenants()
    policies = [tenant_isolation_policy(tenants)]
    ours, theirs, other_peer = (_tenant_pod(ns, tenants[key]) for ns, key in
                                (("team-yield", "yield"), ("remote-site-b-yield", "remote-site-b-yield"),
                                 ("remote-site-c-yield", "remote-site-c-yield")))
    verdicts = {(a.namespace, b.namespace): decide(policies, a, b, 8080).admitted
                for a in (ours, theirs, other_peer) for b in (ours, theirs, other_peer)}
    assert verdicts == {(a.namespace, b.namespace): a.namespace == b.namespace
                        for a in (ours, theirs, other_peer) for b in (ours, theirs, other_peer)}


def test_a_pod_the_platform_labels_with_another_team_is_refused_in_a_shared_namespace():
    """A notebook server carries its team's label (KubeSpawner's, set by the hub) where teams share a namespace."""
    from cilium_engine import decide

    from components.network_policies import tenant_isolation_policy

    tenants = _tenants()
    server = _tenant_pod("shared", {}, {"component": "singleuser-server", "fab.internal/team": "fdc"})
    verdict = decide([tenant_isolation_policy(tenants)], _tenant_pod("team-yield", tenants["yield"]), server, 8080)
    assert (verdict.admitted, verdict.why) == (False, "denied by fab-team-isolation")


def test_fails_when_a_tenant_has_no_namespace_labels():
    from components.network_policies import tenant_isolation_policy

    with pytest.raises(ValueError) as error:
        tenant_isolation_policy({"yield": {}})
    assert str(error.value) == "tenant 'yield' has no namespace labels: its rule would select every pod of the cluster"


def test_no_pod_reaches_the_clustermesh_etcd_port(small_plan):
    """The local agents run on the host network; a pod, a team's or the platform's, has nothing to ask of the etcd."""
    from cilium_engine import admitted, pod

    apiserver = pod("site-t-gpu", "kube-system", {"k8s-app": "clustermesh-apiserver"})
    for source in (_team_pod(small_plan, "site-t-gpu", "yield"), pod("site-t-gpu", "kube-system", {"k8s-app": "hubble-relay"})):
        verdict = admitted(small_plan, apiserver, source, 2379)
        assert (verdict.admitted, verdict.why) == (False, "denied by fab-clustermesh-apiserver")


def test_the_other_clusters_nodes_still_reach_the_clustermesh_etcd_port(small_plan):
    from cilium_engine import admitted, outside, pod

    apiserver = pod("site-t-compute", "kube-system", {"k8s-app": "clustermesh-apiserver"})
    assert admitted(small_plan, apiserver, outside("10.30.3.7"), 2379).admitted
