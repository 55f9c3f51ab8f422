"""CrossClusterNetwork behaviour, read from real renders of the stack files under Pulumi mocks."""

from __future__ import annotations

import pytest

from components.config import parse_site
from components.network import lb_service_labels
from fabctl.render import HELM_RELEASE_TYPE, K8S_PROVIDER_TYPE
from helpers import render_site, site_raw

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


def test_site_a_has_one_kubernetes_provider_per_cluster(plan_a):
    providers = {r["name"]: r["inputs"]["context"] for r in plan_a.of_type(K8S_PROVIDER_TYPE)}
    assert providers == {
        "site-a-storage": "site-a-storage",
        "site-a-compute": "site-a-compute",
        "site-a-gpu": "site-a-gpu",
        "site-a-gpu-train": "site-a-gpu-train",
    }


def test_minio_and_keycloak_providers_take_endpoints_from_config_and_no_credentials(plan_a):
    (minio,) = plan_a.of_type("pulumi:providers:minio")
    (keycloak,) = plan_a.of_type("pulumi:providers:keycloak")
    assert (minio["name"], minio["inputs"]["minioServer"], minio["inputs"]["minioSsl"]) == (
        "site-a-minio", "s3-admin.storage.site-a.fab.internal:9000", "true"
    )
    assert (keycloak["name"], keycloak["inputs"]["url"], keycloak["inputs"]["clientId"]) == (
        "site-a-keycloak", "https://keycloak.site-a.fab.internal", "fab-platform-pulumi"
    )
    assert not {"minioUser", "minioPassword"} & set(minio["inputs"])
    assert not {"clientSecret", "password"} & set(keycloak["inputs"])


def test_every_cluster_gets_its_bgp_instance_with_its_asn_and_peers(plan_a):
    site = parse_site(site_raw("site-a"))
    for key, cluster in site.clusters.items():
        (config,) = plan_a.objects("CiliumBGPClusterConfig", f"site-a-{key}")
        (instance,) = config["spec"]["bgpInstances"]
        assert instance["localASN"] == cluster.bgp_asn
        assert {p["name"]: (p["peerAddress"], p["peerASN"]) for p in instance["peers"]} == {
            name: (str(p.address), p.asn) for name, p in cluster.bgp_peers.items()
        }


def test_gpu_clusters_peer_and_advertise_privately_only(plan_a):
    for cluster in ("site-a-gpu", "site-a-gpu-train"):
        (config,) = plan_a.objects("CiliumBGPClusterConfig", cluster)
        refs = {p["peerConfigRef"]["name"] for p in config["spec"]["bgpInstances"][0]["peers"]}
        assert refs == {"fab-private"}
        assert [o["metadata"]["name"] for o in plan_a.objects("CiliumBGPPeerConfig", cluster)] == ["fab-private"]
        assert [o["metadata"]["name"] for o in plan_a.objects("CiliumBGPAdvertisement", cluster)] == ["fab-private"]


def test_private_peers_get_pod_cidrs_and_internal_pools_only(plan_a):
    (advert,) = [a for a in plan_a.objects("CiliumBGPAdvertisement", "site-a-compute") if a["metadata"]["name"] == "fab-private"]
    assert advert["spec"]["advertisements"] == [
        {"advertisementType": "PodCIDR"},
        {
            "advertisementType": "Service",
            "service": {"addresses": ["LoadBalancerIP"]},
            "selector": {"matchExpressions": [{"key": "lb.fab.internal/pool", "operator": "In", "values": ["internal"]}]},
        },
    ]


def test_public_peers_get_external_pools_only(plan_a):
    (advert,) = [a for a in plan_a.objects("CiliumBGPAdvertisement", "site-a-compute") if a["metadata"]["name"] == "fab-public"]
    assert advert["spec"]["advertisements"] == [
        {
            "advertisementType": "Service",
            "service": {"addresses": ["LoadBalancerIP"]},
            "selector": {"matchExpressions": [{"key": "lb.fab.internal/pool", "operator": "In", "values": ["external"]}]},
        }
    ]


def test_peer_configs_select_their_advertisement_class(plan_a):
    selected = {
        pc["metadata"]["name"]: pc["spec"]["families"][0]["advertisements"]["matchLabels"]
        for pc in plan_a.objects("CiliumBGPPeerConfig", "site-a-storage")
    }
    assert selected == {
        "fab-private": {"bgp.fab.internal/advertise": "private"},
        "fab-public": {"bgp.fab.internal/advertise": "public"},
    }


def test_every_pool_is_picked_by_its_service_label(plan_a):
    pools = {p["metadata"]["name"]: p["spec"] for p in plan_a.objects("CiliumLoadBalancerIPPool", "site-a-storage")}
    assert pools == {
        "external": {"blocks": [{"cidr": "198.51.100.0/28"}], "serviceSelector": {"matchLabels": {"lb.fab.internal/pool": "external"}}},
        "internal": {"blocks": [{"cidr": "10.10.101.0/26"}], "serviceSelector": {"matchLabels": {"lb.fab.internal/pool": "internal"}}},
    }


def test_every_cluster_has_the_default_deny_rule(plan):
    clusters = {r["name"] for r in plan.of_type(K8S_PROVIDER_TYPE)}
    with_rule = {c for c, obj, _ in plan.manifests() if obj["kind"] == CCNP and obj["metadata"]["name"] == "fab-default-deny-remote"}
    assert with_rule == clusters


def test_default_deny_admits_only_the_local_cluster_and_node_infrastructure(plan_b):
    rule = policy(plan_b, "site-b-gpu", "fab-default-deny-remote")
    assert rule["spec"]["endpointSelector"] == {}
    assert rule["spec"]["ingress"] == [
        {"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-b-gpu"}}]},
        {"fromEntities": ["host", "health", "kube-apiserver", "ingress"]},
    ]


def test_one_rule_per_flow_in_each_enforcing_cluster(plan):
    flow_rules = sorted(
        (c, obj["metadata"]["name"])
        for c, obj, _ in plan.manifests()
        if obj["kind"] == CCNP and obj["metadata"]["labels"]["fab.internal/rule"] == "flow"
    )
    network = plan.outputs["network"]
    expected = sorted(
        (network["clusters"][key]["cluster_name"], f"fab-flow-{name}")
        for name, flow in network["flows"].items()
        for key in (flow.get("from", []) if flow.get("target") == "kube-apiserver" else flow["to"])
    )
    assert flow_rules, "no flow rule"
    assert flow_rules == expected


def test_a_flow_admits_exactly_its_source_clusters_on_its_port(plan_a):
    rule = policy(plan_a, "site-a-storage", "fab-flow-s3")
    assert rule["spec"]["endpointSelector"] == {"matchLabels": {"k8s:io.kubernetes.pod.namespace": "aistor"}}
    assert rule["spec"]["ingress"] == [
        {
            "fromEndpoints": [
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-a-compute"}},
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-a-gpu"}},
                {"matchLabels": {"io.cilium.k8s.policy.cluster": "site-a-gpu-train"}},
            ],
            "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}],
        }
    ]


def test_the_inference_flow_allows_the_envoy_container_port(plan_a):
    rule = policy(plan_a, "site-a-gpu", "fab-flow-inference")
    assert rule["spec"]["endpointSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "envoy", "k8s:io.kubernetes.pod.namespace": "envoy-gateway-system"}
    }
    assert rule["spec"]["ingress"][0]["toPorts"] == [{"ports": [{"port": "10443", "protocol": "TCP"}]}]


def test_a_world_flow_admits_the_world_entity(plan_a):
    rule = policy(plan_a, "site-a-storage", "fab-flow-s3-external")
    assert rule["spec"]["ingress"] == [{"fromEntities": ["world"], "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]}]


def test_the_api_server_flow_limits_the_manager_pods_egress(plan_a):
    rule = policy(plan_a, "site-a-compute", "fab-flow-multikueue")
    assert rule["spec"]["endpointSelector"] == {
        "matchLabels": {"control-plane": "controller-manager", "k8s:io.kubernetes.pod.namespace": "kueue-system"}
    }
    assert rule["spec"]["egress"][2] == {
        "toCIDR": ["10.10.3.10/32", "10.10.4.10/32"],
        "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}],
    }


def test_clustermesh_apiserver_admits_the_other_clusters_nodes_only(plan_b):
    rule = policy(plan_b, "site-b-compute", "fab-clustermesh-apiserver")
    assert rule["spec"]["ingress"][0]["fromCIDRSet"] == [{"cidr": "10.20.3.0/24"}, {"cidr": "10.20.1.0/24"}]
    assert all(i["toPorts"] == [{"ports": [{"port": "2379", "protocol": "TCP"}]}] for i in rule["spec"]["ingress"])


def test_cilium_runs_native_routing_with_its_cluster_identity(plan_b):
    values = cilium_values(plan_b, "site-b-gpu")
    assert values["cluster"] == {"name": "site-b-gpu", "id": 3}
    assert (values["routingMode"], values["kubeProxyReplacement"], values["bgpControlPlane"]) == ("native", True, {"enabled": True})
    assert values["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == ["10.82.0.0/16"]
    assert (values["k8sServiceHost"], values["k8sServicePort"]) == ("10.20.3.10", 6443)


def test_clustermesh_connects_every_other_cluster_by_its_vip(plan_b):
    mesh = cilium_values(plan_b, "site-b-gpu")["clustermesh"]
    assert mesh["config"] == {
        "enabled": True,
        "clusters": [
            {"name": "site-b-compute", "port": 2379, "ips": ["10.20.102.2"]},
            {"name": "site-b-storage", "port": 2379, "ips": ["10.20.101.2"]},
        ],
    }
    assert mesh["apiserver"]["service"] == {"type": "ClusterIP", "externalTrafficPolicy": None}


def test_the_shared_clustermesh_ca_key_is_a_secret(plan_b):
    for release in cilium_releases(plan_b):
        assert "values.tls.ca.key" in release["secret_inputs"]
        assert release["inputs"]["values"]["tls"]["ca"]["key"] == "[secret]"


def test_cilium_objects_wait_for_the_cilium_release(plan_b):
    releases = {plan_b.cluster(r): r["urn"] for r in cilium_releases(plan_b)}
    for cluster, obj, resource in plan_b.manifests():
        if obj["apiVersion"] == "cilium.io/v2":
            assert releases[cluster] in resource["dependencies"]


def test_unmanaged_cilium_keeps_its_objects_without_a_release():
    raw = site_raw("site-b")
    raw["clusters"]["gpu"]["cilium"] = {"managed": False}
    plan = render_site("site-b", raw)
    assert sorted(plan.cluster(r) for r in cilium_releases(plan)) == ["site-b-compute", "site-b-storage"]
    gpu_objects = [r for cluster, obj, r in plan.manifests() if cluster == "site-b-gpu" and obj["apiVersion"] == "cilium.io/v2"]
    assert len(gpu_objects) == 7
    assert all(resource["dependencies"] == [] for resource in gpu_objects)


def test_adding_a_gpu_cluster_keeps_every_existing_resource():
    before = render_site("site-b", site_raw("site-b"))
    raw = site_raw("site-b")
    raw["clusters"]["gpu-2"] = {
        **raw["clusters"]["gpu"],
        "cluster_id": 4,
        "pod_cidr": "10.83.0.0/16",
        "node_cidr": "10.20.4.0/24",
        "api_server": "10.20.4.10",
        "bgp_asn": 65204,
        "bgp_peers": {"tor-1": {"address": "10.20.4.1", "asn": 65200}},
        "lb_pools": {"internal": {"cidrs": ["10.20.104.0/27"]}},
        "clustermesh_vip": "10.20.104.2",
    }
    raw["gpu"]["gpu-2"] = {"nodes": {"gpu-b2-trn-01": {"gpu_type": "h100", "gpus": 8, "pool": "training"}}, "system_nodes": ["gpu-b2-sys-01"]}
    after = render_site("site-b", raw)
    assert {(r["urn"], r["type"]) for r in before.resources} <= {(r["urn"], r["type"]) for r in after.resources}
    added = {r["name"] for r in after.resources} - {r["name"] for r in before.resources}
    assert "site-b-gpu-2" in added and "network-gpu-2-cilium" in added


def test_outputs_carry_pools_peers_and_flows_per_cluster(plan_b):
    gpu = plan_b.outputs["network"]["clusters"]["gpu"]
    assert gpu == {
        "cluster_name": "site-b-gpu",
        "pools": {"internal": {"cidrs": ["10.20.103.0/27"], "visibility": "internal"}},
        "peers": {
            "tor-1": {"address": "10.20.3.1", "asn": 65200, "kind": "private"},
            "tor-2": {"address": "10.20.3.2", "asn": 65200, "kind": "private"},
        },
        "flows_in": ["inference", "multikueue"],
        "flows_out": ["polaris", "s3"],
        "host_network_namespaces": ["gpu-operator", "nvidia-network-operator"],
    }


def test_lb_service_labels_pick_the_pool():
    assert lb_service_labels("gpu", parse_site(site_raw("site-b")).clusters["gpu"], "internal") == {"lb.fab.internal/pool": "internal"}


def test_fails_when_a_component_asks_for_a_pool_the_cluster_lacks():
    with pytest.raises(ValueError, match="^cluster 'gpu' has no LB pool 'external'; pools: internal$"):
        lb_service_labels("gpu", parse_site(site_raw("site-b")).clusters["gpu"], "external")


def test_the_clustermesh_api_server_gets_its_vip_from_a_service_that_waits_for_the_pool(plan_b):
    (service,) = [o for o in plan_b.objects("Service", "site-b-gpu") if o["metadata"]["name"] == "clustermesh-apiserver-vip"]
    assert (service["spec"]["type"], service["metadata"]["annotations"], service["metadata"]["labels"]) == (
        "LoadBalancer", {"lbipam.cilium.io/ips": "10.20.103.2"}, {"lb.fab.internal/pool": "internal"}
    )
