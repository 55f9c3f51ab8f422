"""Rules on GPU clusters: GPUs stay there, nothing there is exposed, training is queued (InfiniBand: rules/infiniband.py;
priorities: rules/priorities.py)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    containers,
    gpu_providers,
    is_private,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    pod_fields,
    pod_spec,
    provider_name,
    skip_unknown,
    undecided,
)
from rules._policy import resource_rule, stack_rule
from rules.gpu_routes import GPU_RESOURCE

GPU = "nvidia.com/gpu"
TRAINING_KINDS = {"Job", "JobSet", "RayJob", "RayCluster", "PyTorchJob", "MPIJob", "TrainJob"}


def requested_gpus(obj: dict[str, Any]) -> list[str]:
    """The GPU resources a pod template's containers request or limit: whole GPUs, time-slices or MIG slices."""
    pod = pod_spec(obj)
    if pod is None:
        return []
    found: set[str] = set()
    for container in containers(pod):
        resources = container.get("resources") or {}
        for name in [*(resources.get("requests") or {}), *(resources.get("limits") or {})]:
            if GPU_RESOURCE.match(str(name)):
                found.add(str(name))
    return sorted(found)


@stack_rule("fab-no-gpu-outside-gpu-clusters",
            "No workload on a storage or compute cluster requests a GPU (nvidia.com/gpu, a time-slice or a MIG slice).",
            place=10,
            docs="no workload on a storage or compute cluster requests a GPU: `nvidia.com/gpu`, a time-slice "
                 "`nvidia.com/gpu.shared` or a MIG slice `nvidia.com/mig-<profile>`")
def no_gpu_outside_gpu_clusters(args: StackValidationArgs, report: ReportViolation) -> None:
    """The pod-template route; the other routes (Spark applications, Helm values, Spark configuration) are the rules
    of rules/gpu_routes.py.

    Unknown values: a pod template outside GPU clusters with an unknown part fails closed."""
    gpu = gpu_providers(args.resources)
    for resource, obj in objects(args.resources):
        if provider_name(resource) in gpu or pod_spec(obj) is None:
            continue
        where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}"
        if problem := undecided(where, pod_fields(pod_spec(obj), (), ("resources",)), ".pod"):
            report(problem, resource.urn)
        elif found := requested_gpus(obj):
            report(f"{where} requests {', '.join(found)} on {provider_name(resource) or 'an unknown cluster'}, which is not a "
                   "GPU cluster", resource.urn)


LB_KINDS = {"CiliumLoadBalancerIPPool", "Service", "EnvoyProxy", "CiliumBGPClusterConfig"}


@stack_rule("fab-gpu-lb-private-only",
            "LoadBalancer Services and LB pools on GPU clusters use RFC1918 addresses; GPU clusters peer only with private peers.",
            place=50,
            docs="LoadBalancer Services and LB pools on GPU clusters use RFC1918 addresses; GPU clusters peer only with private "
                 "peers")
def gpu_lb_private_only(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pool, LoadBalancer, gateway proxy or BGP configuration on a GPU cluster with an unknown part fails closed."""
    gpu = gpu_providers(args.resources)
    for resource, obj in objects(args.resources):
        if provider_name(resource) not in gpu or obj["kind"] not in LB_KINDS:
            continue
        kind, spec = obj["kind"], obj.get("spec") or {}
        where = f"{kind} {name_of(obj)} on {provider_name(resource)}"
        if problem := undecided(where, {"metadata": obj.get("metadata"), "spec": spec}):
            report(problem, resource.urn)
            continue
        if kind == "CiliumLoadBalancerIPPool":
            for block in spec.get("blocks") or []:
                if "cidr" in block and not is_private(block["cidr"]):
                    report(f"{where} has the public block {block['cidr']}; GPU clusters use RFC1918 addresses only", resource.urn)
        addresses = []
        if kind == "Service" and spec.get("type") == "LoadBalancer":
            addresses = ((obj.get("metadata") or {}).get("annotations") or {}).get("lbipam.cilium.io/ips", "").split(",")
        if kind == "EnvoyProxy":
            service = ((spec.get("provider") or {}).get("kubernetes") or {}).get("envoyService") or {}
            addresses = (service.get("annotations") or {}).get("lbipam.cilium.io/ips", "").split(",")
        for address in filter(None, (a.strip() for a in addresses)):
            if not is_private(address):
                report(f"{where} asks for the public address {address}; GPU clusters use RFC1918 addresses only", resource.urn)
        if kind == "CiliumBGPClusterConfig":
            for instance in spec.get("bgpInstances") or []:
                for peer in instance.get("peers") or []:
                    if (peer.get("peerConfigRef") or {}).get("name") == "fab-public" or not is_private(peer.get("peerAddress", "")):
                        report(f"{where} peers with {peer.get('name')} ({peer.get('peerAddress')}) as a public peer; GPU clusters peer "
                               "only with private ToRs", resource.urn)


@resource_rule("fab-training-kueue-managed", "Training Jobs on GPU clusters carry a LocalQueue label.", EnforcementLevel.ADVISORY,
               place=410,
               docs="training Jobs in team namespaces carry a LocalQueue label")
def training_kueue_managed(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Advisory; an unknown namespace or label counts as absent."""
    obj = skip_unknown(k8s_object(args.resource_type, args.props))
    if obj is None or obj["kind"] not in TRAINING_KINDS or not namespace_of(obj).startswith("team-"):
        return
    if not label(obj, "kueue.x-k8s.io/queue-name"):
        report(f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)} has no kueue.x-k8s.io/queue-name label; training is admitted by Kueue")
