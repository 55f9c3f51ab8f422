"""Rules on InfiniBand (DESIGN section 2): training nodes keep it for NCCL only, at NCCL's own service level; where
inference loads weights over IPoIB, the network sits in a partition of its own and really reaches the object store.

IPoIB traffic is invisible to Cilium: the partition, not a network policy, keeps other ports off it.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import defaultdict
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    UNKNOWN,
    field,
    gpu_providers,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    pod_spec,
    provider_name,
    undecided,
)
from rules._policy import resource_rule, stack_rule

POOL_LABEL = "fab.internal/gpu-pool"
"""The node label of the GPU pools (inference, training), which NFD sets."""
MANAGED_LABEL = "fab.internal/kueue-managed"
"""The label of the namespaces whose jobs Kueue admits: the training (team) namespaces."""
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NCCL_CONFIG = "nccl"
"""The ConfigMap of every training namespace that holds NCCL's settings, loaded by jobs with envFrom."""
NV_IPAM_POOLS = {"IPPool", "CIDRPool"}
DEFAULT_PARTITION = 0x7FFF
"""The default partition (0xffff as a full member): every port of the fabric is in it."""
_CHILD_INTERFACE = re.compile(r"^(?P<parent>[^.]+)\.(?P<pkey>[0-9a-fA-F]{4})$")
"""An IPoIB child interface as the kernel names it: `<parent>.<P_Key in four hex digits>` (ib0.8a01)."""


def _where(obj: dict[str, Any], cluster: str) -> str:
    namespace = namespace_of(obj)
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{name_of(obj)} on {cluster or 'an unknown cluster'}"


def _only_inference(term: Any) -> bool:
    """Whether a node selector term admits inference-pool nodes only (fab.internal/gpu-pool In, values inference)."""
    for expression in (term or {}).get("matchExpressions") or []:
        values = expression.get("values") or []
        if expression.get("key") == POOL_LABEL and expression.get("operator") == "In" and values and set(values) <= {"inference"}:
            return True
    return False


@resource_rule("fab-training-ib-nccl-only",
               "InfiniBand on training nodes carries NCCL only: IPoIB address pools (nv-ipam) select inference nodes only.",
               place=420,
               docs="InfiniBand on training nodes carries NCCL only: every nv-ipam address pool (`IPPool`, `CIDRPool`) selects "
                    "`fab.internal/gpu-pool In [inference]` nodes only")
def training_ib_nccl_only(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pool whose node selector is unknown fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    if obj is None or obj["kind"] not in NV_IPAM_POOLS or not obj["apiVersion"].startswith("nv-ipam.nvidia.com/"):
        return
    where = _where(obj, provider_name(args))
    selector = field(obj, "spec", "nodeSelector")
    if problem := undecided(where, selector, ".spec.nodeSelector"):
        report(problem)
        return
    terms = (selector or {}).get("nodeSelectorTerms") or []
    rule = f"InfiniBand on training nodes carries NCCL only, so IPoIB addresses go to nodes with {POOL_LABEL} In [inference] only"
    if not terms:
        report(f"{where} has no nodeSelector, so it hands IPoIB addresses to every node, training nodes too; {rule}")
    for i, term in enumerate(terms):
        if not _only_inference(term):
            report(f"{where} hands IPoIB addresses to nodes outside the inference pool (nodeSelectorTerms[{i}] does not limit "
                   f"{POOL_LABEL} to inference); {rule}")


def _training_namespaces(resources: list[Any]) -> dict[str, set[str]]:
    """Cluster -> the namespaces whose jobs Kueue admits (labelled fab.internal/kueue-managed=true)."""
    out: dict[str, set[str]] = defaultdict(set)
    for resource, obj in objects(resources):
        if obj["kind"] == "Namespace" and label(obj, MANAGED_LABEL) == "true":
            out[provider_name(resource)].add(name_of(obj))
    return out


@stack_rule("fab-ipoib-not-in-training-namespaces",
            "No IPoIB network is attached to a namespace whose jobs Kueue admits: training storage stays on the Ethernet bond.",
            place=430,
            docs="no IPoIB network is attached to a namespace whose jobs Kueue admits (`fab.internal/kueue-managed=true`)")
def ipoib_not_in_training_namespaces(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: an IPoIBNetwork whose target namespace is unknown fails closed."""
    training = _training_namespaces(args.resources)
    for resource, obj in objects(args.resources):
        if obj["kind"] != "IPoIBNetwork":
            continue
        cluster = provider_name(resource)
        where = _where(obj, cluster)
        target = field(obj, "spec", "networkNamespace")
        if problem := undecided(where, target, ".spec.networkNamespace"):
            report(problem, resource.urn)
        elif target in training[cluster]:
            report(f"{where} is attached to namespace {target}, whose jobs Kueue admits ({MANAGED_LABEL}=true); InfiniBand "
                   "carries NCCL only for training, whose storage traffic stays on the Ethernet bond", resource.urn)


def _partition_problem(master: Any) -> str | None:
    """Why an IPoIB network's host interface is not a partition's child interface, or None when it is one."""
    if not isinstance(master, str) or not master:
        return "no master interface, so the host's default-route interface"
    match = _CHILD_INTERFACE.fullmatch(master)
    if match is None:
        return f"{master}, an interface of the default partition"
    pkey = int(match["pkey"], 16) & 0x7FFF
    if pkey in (0, DEFAULT_PARTITION):
        return f"{master}, the {'default' if pkey else 'invalid'} partition {match['pkey']}"
    return None


@resource_rule("fab-ipoib-partition-key",
               "IPoIB networks sit on the child interface of a partition of their own, never on the default partition.",
               place=440,
               docs="every IPoIB network sits on the child interface of a partition of its own (`<interface>.<P_Key>`), never on "
                    "the default partition")
def ipoib_partition_key(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: an IPoIBNetwork whose master interface is unknown fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    if obj is None or obj["kind"] != "IPoIBNetwork":
        return
    where = _where(obj, provider_name(args))
    master = field(obj, "spec", "master")
    if problem := undecided(where, master, ".spec.master"):
        report(problem)
    elif problem := _partition_problem(master):
        report(f"{where} sits on {problem}, which every port of the fabric reaches; IPoIB is invisible to Cilium, so it sits "
               "on the child interface of its own partition (<interface>.<P_Key>, P_Key 0x8001-0xfffe, such as ib0.8a01)")


@stack_rule("fab-training-nccl-service-level",
            "Every training namespace on a GPU cluster holds the ConfigMap nccl with NCCL_IB_SL, an InfiniBand service level 0-15.",
            place=460,
            docs="every Kueue-managed namespace on a GPU cluster holds the ConfigMap `nccl` with `NCCL_IB_SL`, a service level "
                 "0-15")
def training_nccl_service_level(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a ConfigMap nccl whose data is unknown fails closed."""
    gpu = gpu_providers(args.resources)
    configs: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}
    for resource, obj in objects(args.resources):
        if obj["kind"] == "ConfigMap" and name_of(obj) == NCCL_CONFIG:
            configs[provider_name(resource), namespace_of(obj)] = (resource, obj)
    for cluster, namespaces in sorted(_training_namespaces(args.resources).items()):
        if cluster not in gpu:
            continue  # a MultiKueue manager: its jobs run on the workers
        for namespace in sorted(namespaces):
            if (cluster, namespace) not in configs:
                report(f"Namespace {namespace} on {cluster} admits training jobs ({MANAGED_LABEL}=true) but holds no ConfigMap "
                       f"{NCCL_CONFIG}; training jobs load NCCL_IB_SL, NCCL's InfiniBand service level, from it")
                continue
            resource, obj = configs[cluster, namespace]
            where = _where(obj, cluster)
            level = field(obj, "data", "NCCL_IB_SL")
            if problem := undecided(where, level, ".data.NCCL_IB_SL"):
                report(problem, resource.urn)
            elif level is None:
                report(f"{where} has no NCCL_IB_SL; NCCL's traffic needs its InfiniBand service level (0-15), apart from "
                       "storage's", resource.urn)
            elif not (isinstance(level, str) and re.fullmatch(r"[0-9]|1[0-5]", level)):
                report(f"{where} sets NCCL_IB_SL to {level!r}; an InfiniBand service level is 0-15", resource.urn)


def _attached_networks(value: Any) -> list[str]:
    """The network names a pod's Multus annotation names: `a@ib0, ns/b` or a JSON list of {"name": ...}."""
    if not isinstance(value, str):
        return []
    text = value.strip()
    if text.startswith("["):
        try:
            return [str(item.get("name", "")) for item in json.loads(text) if isinstance(item, dict)]
        except ValueError:
            return []
    return [part.strip().split("@", 1)[0].rsplit("/", 1)[-1] for part in text.split(",") if part.strip()]


def _pool_name(network: dict[str, Any]) -> str | None:
    try:
        ipam = json.loads(field(network, "spec", "ipam") or "{}")
    except (TypeError, ValueError):
        return None
    return ipam.get("poolName") if isinstance(ipam, dict) and ipam.get("type") == "nv-ipam" else None


def _excluded(pool: dict[str, Any], address: ipaddress.IPv4Address) -> bool:
    for exclusion in field(pool, "spec", "exclusions") or []:
        try:
            if ipaddress.IPv4Address(exclusion["startIP"]) <= address <= ipaddress.IPv4Address(exclusion["endIP"]):
                return True
        except (KeyError, TypeError, ValueError):
            continue
    return False


def _aliases(pod: Any) -> list[tuple[str, ipaddress.IPv4Address]]:
    out = []
    for alias in (pod or {}).get("hostAliases") or []:
        try:
            address = ipaddress.IPv4Address(alias.get("ip"))
        except (AttributeError, ValueError):
            continue
        out.extend((host, address) for host in alias.get("hostnames") or [])
    return out


def _pod_annotations(obj: dict[str, Any]) -> Any:
    """The annotations of a workload's pods (UNKNOWN where a level of them is unknown)."""
    path = {"Pod": ("metadata",), "CronJob": ("spec", "jobTemplate", "spec", "template", "metadata")}.get(
        obj["kind"], ("spec", "template", "metadata"))
    return field(obj, *path, "annotations")


@stack_rule("fab-ipoib-weights-route",
            "Pods on an IPoIB network resolve a host to an address of it that nv-ipam never hands out: the object store's.",
            place=450,
            docs="pods that attach an IPoIB network resolve a host (the S3 host name) to an address of its subnet that its pool "
                 "never hands out (the object store's IPoIB address)")
def ipoib_weights_route(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a pod on a GPU cluster whose network annotation or host aliases are unknown, or an IPoIB network
    or pool whose IPAM, subnet or exclusions are unknown, fails closed."""
    gpu = gpu_providers(args.resources)
    networks: dict[tuple[str, str], dict[str, Any]] = {}
    pools: dict[tuple[str, str], dict[str, Any]] = {}
    for resource, obj in objects(args.resources):
        if obj["kind"] == "IPoIBNetwork":
            networks[provider_name(resource), name_of(obj)] = obj
        elif obj["kind"] == "IPPool":
            pools[provider_name(resource), name_of(obj)] = obj
    for resource, obj in objects(args.resources):
        cluster, pod = provider_name(resource), pod_spec(obj)
        if cluster not in gpu or pod is None:
            continue
        where = _where(obj, cluster)
        annotations = _pod_annotations(obj)
        if problem := undecided(where, {"annotations": annotations, "hostAliases": pod if pod is UNKNOWN else pod.get("hostAliases")}):
            report(problem, resource.urn)
            continue
        for name in _attached_networks((annotations or {}).get(NETWORKS_ANNOTATION)):
            if (cluster, name) not in networks:
                continue
            network_obj = networks[cluster, name]
            pool = pools.get((cluster, _pool_name(network_obj) or "")) if field(network_obj, "spec", "ipam") is not UNKNOWN else None
            deciding = {"ipam": field(network_obj, "spec", "ipam"), "pool": field(pool, "spec") if pool else None}
            if problem := undecided(f"{where}, on the IPoIB network {name}", deciding):
                report(problem, resource.urn)
                continue
            try:
                network = ipaddress.IPv4Network(field(pool, "spec", "subnet"))
            except (TypeError, ValueError):
                report(f"{where} attaches the IPoIB network {name}, whose addresses come from no nv-ipam IPPool of {cluster} "
                       "with a subnet, so nothing shows that its pods reach the object store over it", resource.urn)
                continue
            inside = [(host, address) for host, address in _aliases(pod) if address in network]
            if not inside:
                report(f"{where} attaches the IPoIB network {name} ({network}) but resolves no host to an address of it, so "
                       "its weight sync still goes over the Ethernet S3 endpoint; map the S3 host name to the object store's "
                       "IPoIB address (hostAliases)", resource.urn)
            for host, address in inside:
                if not _excluded(pool, address):
                    report(f"{where} resolves {host} to {address}, which IPPool {name_of(pool)} may hand to a pod; exclude the "
                           "object store's IPoIB address from the pool (spec.exclusions)", resource.urn)
