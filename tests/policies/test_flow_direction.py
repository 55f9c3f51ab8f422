"""fab-flow-direction alone: allow rules admit only the design's flows, by source, destination role and port."""

from __future__ import annotations

from typing import Any

from policy_fixtures import check, k8s, options, provider
from pulumi_policy import PolicyResource
from rules.network import DESIGN_FLOWS, flow_direction


def component(type_: str, name: str) -> PolicyResource:
    return PolicyResource(type_, {}, f"urn:pulumi:s::p::{type_}::{name}", name, options(), None, None, [], {})


COMPONENTS = {
    "site-a-storage": component("fab:storage:StorageCluster", "storage"),
    "site-a-compute": component("fab:compute:ComputeCluster", "compute"),
    "site-a-gpu": component("fab:gpu:GpuCluster", "gpu-gpu"),
}


def on(cluster: str, obj: dict[str, Any], type_: str | None = None) -> PolicyResource:
    """An object of `cluster`, registered under the component that gives the cluster its role."""
    api = obj["apiVersion"]
    type_ = type_ or f"kubernetes:{api}:{obj['kind']}"
    return PolicyResource(type_, obj, f"urn:pulumi:s::p::{type_}::{cluster}-{obj['metadata']['name']}", obj["metadata"]["name"],
                          options(), provider(cluster), COMPONENTS[cluster], [], {})


# What gives each cluster its role: a Helm release of StorageCluster on storage, anything of ComputeCluster and GpuCluster.
ROLES = [
    on("site-a-storage", {"apiVersion": "v3", "kind": "Release", "metadata": {"name": "polaris"}}, "kubernetes:helm.sh/v3:Release"),
    on("site-a-compute", k8s("Namespace", "spark")),
    on("site-a-gpu", k8s("Namespace", "gpu-operator")),
]


def rule(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return k8s("CiliumClusterwideNetworkPolicy", name, api="cilium.io/v2", labels={"fab.internal/rule": "flow"},
               spec={"endpointSelector": {}, **spec})


def from_clusters(port: str, *clusters: str) -> dict[str, Any]:
    return {"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": c}} for c in clusters],
            "toPorts": [{"ports": [{"port": port, "protocol": "TCP"}]}]}


def test_the_design_flows_pass():
    s3 = rule("fab-flow-s3", {"ingress": [from_clusters("9000", "site-a-compute", "site-a-gpu")]})
    inference = rule("fab-flow-inference", {"ingress": [from_clusters("10443", "site-a-compute")]})
    assert check(flow_direction, [*ROLES, on("site-a-storage", s3), on("site-a-gpu", inference)]) == []


def test_fails_when_an_approved_port_is_opened_between_the_wrong_clusters():
    inference = rule("fab-flow-inference", {"ingress": [from_clusters("10443", "site-a-storage")]})
    assert check(flow_direction, [*ROLES, on("site-a-gpu", inference)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-inference on site-a-gpu (gpu) admits site-a-storage (storage) on port 10443, "
        "which is not a flow of the design's table (into gpu: 2379 from ranges, remote-node; 8000 from compute; 10001 from compute; 10443 from compute)"
    ]


def test_fails_when_a_flow_runs_in_the_wrong_direction():
    backwards = rule("fab-flow-s3", {"ingress": [from_clusters("9000", "site-a-storage")]})
    assert check(flow_direction, [*ROLES, on("site-a-compute", backwards)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-s3 on site-a-compute (compute) admits site-a-storage (storage) on port 9000, "
        "which is not a flow of the design's table (into compute: 2379 from ranges, remote-node; 9090 from gpu, storage; "
        "10443 from ranges, world)"
    ]


def test_fails_when_a_rule_admits_another_cluster_on_every_port():
    open_rule = rule("fab-flow-all", {"ingress": [{"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-a-compute"}}]}]})
    assert check(flow_direction, [*ROLES, on("site-a-storage", open_rule)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-all on site-a-storage (storage) admits site-a-compute (compute) on every port; "
        "name the flow's port"
    ]


def test_fails_when_a_selector_names_no_cluster():
    any_cluster = rule("fab-flow-s3", {"ingress": [{"fromEndpoints": [{"matchLabels": {"app": "spark"}}],
                                                     "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]}]})
    assert check(flow_direction, [*ROLES, on("site-a-storage", any_cluster)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-s3 on site-a-storage (storage) admits pods of every cluster (a selector without "
        "io.cilium.k8s.policy.cluster) on port 9000, which is not a flow of the design's table (into storage: 2379 from ranges, "
        "remote-node; 8181 from compute, gpu, ranges; 9000 from compute, gpu, ranges, world)"
    ]


def test_fails_when_a_selector_names_a_cluster_of_no_role_in_the_stack():
    stranger = rule("fab-flow-s3", {"ingress": [from_clusters("9000", "site-z-compute")]})
    assert check(flow_direction, [*ROLES, on("site-a-storage", stranger)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-s3 on site-a-storage (storage) admits site-z-compute, which is not a cluster "
        "of this stack on port 9000, which is not a flow of the design's table (into storage: 2379 from ranges, remote-node; "
        "8181 from compute, gpu, ranges; 9000 from compute, gpu, ranges, world)"
    ]


def test_fails_when_the_world_reaches_a_gpu_cluster():
    exposed = rule("fab-flow-inference", {"ingress": [{"fromEntities": ["world"], "toPorts": [{"ports": [{"port": "10443"}]}]}]})
    assert check(flow_direction, [*ROLES, on("site-a-gpu", exposed)]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-inference on site-a-gpu (gpu) admits the world entity on port 10443, which is "
        "not a flow of the design's table (into gpu: 2379 from ranges, remote-node; 8000 from compute; 10001 from compute; 10443 from compute)"
    ]


def test_fails_when_a_namespaced_policy_opens_a_flow():
    namespaced = k8s("CiliumNetworkPolicy", "open", "trino", api="cilium.io/v2",
                     spec={"endpointSelector": {}, "ingress": [from_clusters("8080", "site-a-gpu")]})
    assert check(flow_direction, [*ROLES, on("site-a-compute", namespaced)]) == [
        "CiliumNetworkPolicy open on site-a-compute (compute) admits site-a-gpu (gpu) on port 8080, which is not a flow of the "
        "design's table (into compute: 2379 from ranges, remote-node; 9090 from gpu, storage; 10443 from ranges, world)"
    ]


API_EGRESS = {"egress": [{"toEntities": ["kube-apiserver"]},
                         {"toCIDR": ["10.10.3.10/32"], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]}]}


def test_the_manager_reaches_worker_api_servers():
    assert check(flow_direction, [*ROLES, on("site-a-compute", rule("fab-flow-multikueue", API_EGRESS))]) == []


def test_fails_when_a_gpu_cluster_reaches_other_api_servers():
    assert check(flow_direction, [*ROLES, on("site-a-gpu", rule("fab-flow-multikueue", API_EGRESS))]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-multikueue on site-a-gpu (gpu) lets its pods reach addresses outside the "
        "cluster on port 6443, which is not a flow of the design's table (to API servers: 6443 from compute)"
    ]


def test_the_flow_table_is_a_setting():
    postgres = rule("fab-flow-postgres", {"ingress": [from_clusters("5432", "site-a-compute")]})
    table = [*DESIGN_FLOWS, {"from": ["compute"], "to": "storage", "port": 5432}]
    assert check(flow_direction, [*ROLES, on("site-a-storage", postgres)], {"flows": table}) == []
