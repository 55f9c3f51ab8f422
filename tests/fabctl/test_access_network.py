"""`fabctl access`, network area (fabctl/access/network.py): Cilium's policy semantics over small hand-written policies
(default allow and deny, deny wins, entities, ClusterMesh, ports, label choice, Kubernetes NetworkPolicy, vendors),
then a team's and a vendor's reach on both stacks."""

from __future__ import annotations

from access_fixtures import namespace, plan_of
from fabctl.access import network
from fabctl.access.model import Principal
from fabctl.render import HELM_RELEASE_TYPE

COMPUTE, GPU = "site-t-compute", "site-t-gpu"
TEAM = Principal("team", "a", pod_namespaces={COMPUTE: ("team-a",)})
NAMESPACES = [(COMPUTE, namespace("team-a", **{"fab.internal/team": "a"})), (COMPUTE, namespace("team-b", **{"fab.internal/team": "b"})),
              (COMPUTE, namespace("apps")), (GPU, namespace("apps")), (GPU, namespace("team-a"))]


def ccnp(name, **spec):
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy", "metadata": {"name": name}, "spec": spec}


def cnp(ns, name, **spec):
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": {"namespace": ns, "name": name}, "spec": spec}


def service(ns, name, selector, ports, **extra):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": ns, "name": name, **extra.pop("meta", {})},
            "spec": {"selector": selector, "ports": [{"port": p, "targetPort": t, "protocol": "TCP"} for p, t in ports], **extra}}


def in_ns(ns, **labels):
    return {"matchLabels": {"k8s:io.kubernetes.pod.namespace": ns, **labels}}


def placed(objects):
    """Objects on compute unless given as (cluster, object)."""
    return NAMESPACES + [o if isinstance(o, tuple) else (COMPUTE, o) for o in objects]


def reach(objects, principal=TEAM):
    """(cluster, scope) -> ports of every destination inside the clusters the seat reaches."""
    plan = plan_of(placed(objects))
    return {(a.target, a.scope): a.allowed for a in network.accesses(plan, principal) if a.target != network.WORLD}


def access_to(objects, cluster, scope, principal=TEAM):
    plan = plan_of(placed(objects))
    return [a for a in network.accesses(plan, principal) if (a.target, a.scope) == (cluster, scope)]


def test_a_pod_no_policy_selects_reaches_every_port_of_its_clusters_namespaces():
    assert reach([])[(COMPUTE, "team-b/*")] == "any"


def test_an_ingress_policy_puts_its_endpoints_in_default_deny():
    policy = cnp("team-b", "own", endpointSelector={}, ingress=[{"fromEndpoints": [{}]}])
    assert (COMPUTE, "team-b/*") not in reach([policy])


def test_a_namespaced_policys_empty_peer_selector_means_its_own_namespace():
    policy = cnp("team-b", "own", endpointSelector={}, ingress=[{"fromEndpoints": [{}]}])
    assert reach([policy], Principal("team", "b", pod_namespaces={COMPUTE: ("team-b",)}))[(COMPUTE, "team-b/*")] == "any"


def test_a_deny_rule_wins_over_an_allow_rule():
    allow = ccnp("allow", endpointSelector=in_ns("apps"), ingress=[{"fromEntities": ["cluster"]}])
    deny = ccnp("deny", endpointSelector=in_ns("apps"), ingressDeny=[{"fromEndpoints": [in_ns("team-a")]}])
    assert (COMPUTE, "apps/*") in reach([allow])
    assert (COMPUTE, "apps/*") not in reach([allow, deny])


def test_the_cluster_entity_admits_the_local_clusters_pods_and_not_a_remote_clusters():
    policy = ccnp("local", endpointSelector={}, ingress=[{"fromEntities": ["cluster"]}])
    both = Principal("team", "a", pod_namespaces={COMPUTE: ("team-a",), GPU: ("team-a",)})
    found = {a.via.split(":")[0] for a in access_to([(GPU, policy)], GPU, "apps/*", both)}
    assert found == {f"from {GPU} team-a"}


def test_a_peer_selector_without_a_cluster_label_matches_its_own_cluster_only():
    policy = ccnp("apps", endpointSelector={}, ingress=[{"fromEndpoints": [in_ns("team-a")]}])
    assert (GPU, "apps/*") not in reach([(GPU, policy)])


def test_a_peer_selector_without_a_cluster_label_matches_every_cluster_where_cilium_keeps_its_default():
    policy = ccnp("apps", endpointSelector={}, ingress=[{"fromEndpoints": [in_ns("team-a")]}])
    cilium = {"urn": "urn:cilium", "type": HELM_RELEASE_TYPE, "name": "cilium", "custom": True, "provider": f"urn:provider:{GPU}",
              "inputs": {"chart": "cilium", "values": {"clustermesh": {"useAPIServer": True}}}}
    plan = plan_of(placed([(GPU, policy)]), resources=[cilium])
    assert (GPU, "apps/*") in {(a.target, a.scope) for a in network.accesses(plan, TEAM)}


def test_a_peer_selector_naming_a_remote_cluster_admits_its_pods():
    policy = ccnp("apps", endpointSelector={}, ingress=[{"fromEndpoints": [in_ns("team-a", **{"io.cilium.k8s.policy.cluster": COMPUTE})]}])
    assert reach([(GPU, policy)])[(GPU, "apps/*")] == "any"


def test_to_ports_admit_the_named_port_of_a_service_only():
    svc = service("apps", "s3", {"app": "s3"}, [(9000, 9000), (9001, 9001)])
    policy = ccnp("s3", endpointSelector=in_ns("apps"), ingress=[{"fromEntities": ["cluster"], "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}]}])
    assert reach([svc, policy])[(COMPUTE, "apps/s3")] == "TCP/9000"


def test_a_service_port_is_checked_at_its_target_port():
    svc = service("apps", "web", {"app": "web"}, [(443, 10443)])
    policy = ccnp("web", endpointSelector=in_ns("apps"), ingress=[{"fromEntities": ["cluster"], "toPorts": [{"ports": [{"port": "10443"}]}]}])
    assert reach([svc, policy])[(COMPUTE, "apps/web")] == "TCP/443"


def test_an_egress_policy_limits_a_pod_to_what_it_allows():
    egress = ccnp("team-a", endpointSelector=in_ns("team-a"), egress=[{"toEndpoints": [in_ns("apps")]},
                                                                     {"toCIDRSet": [{"cidr": "172.16.0.0/16"}], "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}])
    plan = plan_of(placed([egress]))
    found = {(a.target, a.scope, a.allowed) for a in network.accesses(plan, TEAM)}
    assert (COMPUTE, "apps/*", "any") in found
    assert not any(scope == "team-b/*" for _, scope, _ in found)
    assert {f for f in found if f[0] == network.WORLD} == {(network.WORLD, "172.16.0.0/16", "TCP/443")}


def test_a_policy_that_turns_default_deny_off_does_not_restrict_what_others_allow():
    deny = ccnp("erp", endpointSelector={}, enableDefaultDeny={"egress": False, "ingress": False},
                egressDeny=[{"toCIDRSet": [{"cidr": "172.16.40.0/29"}]}])
    plan = plan_of(placed([deny]))
    outside = [a for a in network.accesses(plan, TEAM) if a.target == network.WORLD]
    assert [(a.scope, a.allowed) for a in outside] == [(network.WORLD, "any")]
    assert "denies 172.16.40.0/29" in outside[0].via
    assert reach([deny])[(COMPUTE, "team-b/*")] == "any"


def test_a_pod_reaches_what_a_selector_on_labels_it_may_set_admits_and_says_so():
    policy = ccnp("trusted", endpointSelector=in_ns("apps"), ingress=[{"fromEndpoints": [{"matchLabels": {"app": "trusted"}}]}])
    (access,) = access_to([policy], COMPUTE, "apps/*")
    assert access.via.startswith(f"from {COMPUTE} team-a with pod labels app=trusted:")


def test_a_selector_on_the_namespace_cannot_be_met_by_pod_labels():
    policy = ccnp("trusted", endpointSelector=in_ns("apps"), ingress=[{"fromEndpoints": [in_ns("jupyterhub", component="singleuser-server")]}])
    assert access_to([policy], COMPUTE, "apps/*") == []


def test_l7_rules_are_named_in_the_access():
    svc = service("apps", "web", {"app": "web"}, [(80, 8080)])
    policy = ccnp("web", endpointSelector=in_ns("apps"), ingress=[{"fromEntities": ["cluster"], "toPorts": [
        {"ports": [{"port": "8080", "protocol": "TCP"}], "rules": {"http": [{"method": "GET"}]}}]}])
    (access,) = access_to([svc, policy], COMPUTE, "apps/web")
    assert "L7 rules (http) filter requests in Cilium's proxy" in access.via


def test_a_kubernetes_network_policy_admits_the_namespaces_its_selector_names():
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"namespace": "apps", "name": "teams"},
              "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [
                  {"from": [{"namespaceSelector": {"matchLabels": {"fab.internal/team": "b"}}}], "ports": [{"port": 8080}]}]}}
    assert (COMPUTE, "apps/*") not in reach([policy])
    assert reach([policy], Principal("team", "b", pod_namespaces={COMPUTE: ("team-b",)}))[(COMPUTE, "apps/*")] == "TCP/8080"


def test_a_global_service_reaches_its_backends_on_another_cluster_through_their_policies():
    annotations = {"annotations": {"service.cilium.io/global": "true"}}
    local = {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "apps", "name": "gw", **annotations},
             "spec": {"ports": [{"port": 443, "protocol": "TCP"}]}}
    remote = service("apps", "gw", {"app": "gw"}, [(443, 10443)], meta=annotations)
    policy = ccnp("gw", endpointSelector=in_ns("apps"), ingress=[{"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": COMPUTE}}],
                                                                  "toPorts": [{"ports": [{"port": "10443", "protocol": "TCP"}]}]}])
    (access,) = access_to([local, (GPU, remote), (GPU, policy)], COMPUTE, "apps/gw")
    assert (access.allowed, access.via.endswith(f"(global Service: backends on {GPU})")) == ("TCP/443", True)


def test_a_global_service_without_backends_is_not_reached():
    local = {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "apps", "name": "gw", "annotations": {"service.cilium.io/global": "true"}},
             "spec": {"ports": [{"port": 443, "protocol": "TCP"}]}}
    assert access_to([local], COMPUTE, "apps/gw") == []


def test_a_vendor_reaches_a_public_load_balancer_whose_pods_admit_its_range():
    advertisement = {"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement", "metadata": {"name": "public", "labels": {"bgp.fab.internal/advertise": "public"}},
                     "spec": {"advertisements": [{"advertisementType": "Service", "selector": {"matchLabels": {"lb.fab.internal/pool": "external"}}}]}}
    svc = service("apps", "s3", {"app": "s3"}, [(9000, 9000)], type="LoadBalancer", meta={"labels": {"lb.fab.internal/pool": "external"}})
    internal = service("apps", "s3-internal", {"app": "s3"}, [(9000, 9000)], type="LoadBalancer", meta={"labels": {"lb.fab.internal/pool": "internal"}})
    policy = ccnp("vendor", endpointSelector=in_ns("apps"), ingress=[{"fromCIDRSet": [{"cidr": "192.0.2.0/24"}]}])
    plan = plan_of([(COMPUTE, o) for o in [namespace("apps"), advertisement, svc, internal, policy]])
    vendor = lambda cidr: [(a.scope, a.allowed) for a in network.accesses(plan, Principal("vendor", "v", source_cidrs=(cidr,)))]
    assert vendor("192.0.2.16/28") == [("apps/s3", "TCP/9000")]
    assert vendor("198.51.100.0/28") == []


# --- the stacks ---------------------------------------------------------------------------------------------------------

def _team(plan) -> tuple[str, Principal]:
    """The stack's first team, as a seat whose pods run in its namespaces on every cluster that has one."""
    namespaces: dict[str, dict[str, list[str]]] = {}
    for cluster, obj, _ in plan.manifests():
        team = (obj["metadata"].get("labels") or {}).get("fab.internal/team") if obj["kind"] == "Namespace" else None
        if team and obj["metadata"]["name"] == f"team-{team}":
            namespaces.setdefault(team, {}).setdefault(cluster, []).append(obj["metadata"]["name"])
    assert len(namespaces) >= 2
    team = sorted(namespaces)[0]
    return team, Principal("team", team, pod_namespaces={c: tuple(n) for c, n in namespaces[team].items()})


def test_a_teams_pods_reach_the_inference_gateway_on_gpu(plan):
    _, seat = _team(plan)
    gpu = f"{plan.stack}-gpu"
    found = {a.allowed for a in network.accesses(plan, seat) if (a.target, a.scope) == (gpu, "envoy-gateway-system/inference-gateway")}
    assert found == {"TCP/443"}


def test_a_teams_pod_on_compute_reaches_the_inference_gateway_through_its_global_service(plan_a):
    compute, gpu = "site-a-compute", "site-a-gpu"
    seat = Principal("team", "yield", pod_namespaces={compute: ("team-yield",)})
    found = [a for a in network.accesses(plan_a, seat) if (a.target, a.scope) == (compute, "envoy-gateway-system/inference-gateway")]
    assert [(a.allowed, f"global Service: backends on {gpu}" in a.via) for a in found] == [("TCP/443", True)]


def test_a_teams_pod_on_compute_does_not_reach_another_teams_namespace_on_gpu(plan_a):
    seat = Principal("team", "yield", pod_namespaces={"site-a-compute": ("team-yield",)})
    found = {(a.target, a.scope) for a in network.accesses(plan_a, seat)}
    assert ("site-a-gpu", "envoy-gateway-system/inference-gateway") in found
    assert ("site-a-gpu", "team-fdc/*") not in found


def test_a_vendors_range_reaches_the_compute_ingress(plan):
    vendors = [o for _, o, _ in plan.manifests() if o["kind"] == "SecurityPolicy" and (o["metadata"].get("namespace") == "vendor-catalog")]
    cidrs = [c for o in vendors for r in o["spec"]["authorization"]["rules"] for c in r["principal"].get("clientCIDRs", [])]
    assert cidrs
    found = {(a.target, a.scope, a.allowed) for a in network.accesses(plan, Principal("vendor", "v", source_cidrs=(cidrs[0],)))}
    assert (f"{plan.stack}-compute", "envoy-gateway-system/<Gateway envoy-gateway-system/compute>", "TCP/443") in found
