"""Rules on the compute cluster: batch vs interactive isolation by node pool and priority, and StarRocks' stateless
compute nodes with a local NVMe cache (DESIGN section 2, compute row).

A compute workload is an engine's: a Helm release of an engine chart or an engine's custom resource (each with its
class, batch or interactive, from the design: Spark and Airflow are batch; Trino, StarRocks, Superset and JupyterHub
interactive, and Argo CD, whose UI and rollouts people wait on), a pod template or CloudNativePG cluster in a
namespace labelled with a pool (the engines' own namespaces), or a Pod template held in a ConfigMap labelled with a pool
(the pods a driver starts from it at run time, such as Spark Connect's executors: their class is the ConfigMap's label,
whatever its namespace's). The pack reads where each chart and custom resource sets its
pods' node selector, tolerations and PriorityClass from `CHARTS` and `KINDS`, which it derives from the engines'
declarations (components/engines, each `Engine`'s `charts` and `kinds`): those paths are the charts' and CRDs' own keys. A
chart on a compute cluster that no engine declares, and that is not one of the platform's own (`PLATFORM_CHARTS`), fails
closed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from pulumi_policy import ReportViolation, StackValidationArgs

from components.engines import ENGINES, POOL_LABEL  # POOL_LABEL: the compute pools' node label and taint key
from components.placement import Pods
from rules._k8s import (
    HELM_RELEASE,
    UNKNOWN,
    chart_name,
    field,
    label,
    name_of,
    namespace_of,
    objects,
    plain,
    pod_spec,
    provider_name,
    top_component,
    undecided,
)
from rules._policy import stack_rule

COMPUTE_COMPONENT = "fab:compute:ComputeCluster"
DEFAULT_PRIORITY = 0
"""The priority of a pod that names no PriorityClass (with no global default class, which the platform never sets)."""
CNPG_GROUP = "postgresql.cnpg.io/"


CHARTS: dict[str, tuple[str, tuple[Pods, ...]]] = {
    c.chart.chart: (engine.pool.name, c.pods) for engine in ENGINES.values() for c in engine.charts}
"""Engine charts: their class (their engine's pool) and where their pods are placed (the values each chart reads), as each
engine declares them (components/engines, `Engine.charts`)."""
KINDS: dict[str, tuple[str, tuple[Pods, ...]]] = {
    kind: (engine.pool.name, pods) for engine in ENGINES.values() for kind, pods in engine.kinds.items()}
"""Engine custom resources: their class and where their pods are placed (the CRDs' fields), as each engine declares them
(`Engine.kinds`)."""
PLATFORM_CHARTS: dict[str, str] = {
    "cilium": "the network's agent on every node (fab-host-network-allow-listed, fab-privileged-allow-listed)",
    "cloudnative-pg": "the operator of the engines' databases, whose clusters the pack places by their namespace's pool",
    "gateway-helm": "the compute ingress's controller, Envoy Gateway (components/gateway.py)",
    "kube-prometheus-stack": "the cluster's monitoring, on every node (fab-host-network-allow-listed)",
    "kuberay-operator": "Ray's operator, whose clusters run in team namespaces (components/ray.py)",
    "kubeflow-trainer": "the controller of the training runtimes, beside Kueue (components/runtimes.py)",
    "kueue": "Kueue as the MultiKueue manager (components/kueue.py)",
}
"""Charts on a compute cluster that no engine declares: the platform's own controllers and agents, installed by its
components, which run no engine's work and so belong to neither engine pool. Any other chart there is refused: the pack
could not tell which pool its pods belong in."""
POD_TEMPLATE = Pods("", ("nodeSelector",), ("tolerations",), ("priorityClassName",))
CNPG_CLUSTER = Pods("database", ("spec.affinity.nodeSelector",), ("spec.affinity.tolerations",), ("spec.priorityClassName",))


@dataclass(frozen=True)
class Workload:
    """A compute workload: what it is (for messages), its cluster, class and the values its pods are placed from."""

    what: str
    cluster: str
    pool: str
    pods: tuple[Pods, ...]
    values: Any
    urn: str
    subject: str
    """Who the class belongs to, in messages: the chart or kind, or the namespace."""

    def groups(self) -> Iterator[Pods]:
        """Its groups of pods (those of a component it does not have left out)."""
        return (p for p in self.pods if p.only_with is None or _at(self.values, p.only_with) is not None)


def compute_providers(resources: list[Any]) -> set[str]:
    """Providers of compute clusters: the cluster a ComputeCluster component manages."""
    return {provider_name(r) for r in resources
            if getattr(top_component(r), "resource_type", "") == COMPUTE_COMPONENT and provider_name(r)}


def _pool_namespaces(resources: list[Any], compute: set[str]) -> dict[tuple[str, str], Any]:
    """(cluster, namespace) -> the pool its label assigns it to (UNKNOWN if its labels are unknown)."""
    return {(provider_name(r), name_of(obj)): label(obj, POOL_LABEL)
            for r, obj in objects(resources) if obj["kind"] == "Namespace" and provider_name(r) in compute
            and label(obj, POOL_LABEL) is not None}


def _template_pod(text: Any) -> Any:
    """The spec of the Pod a ConfigMap value holds as YAML (UNKNOWN if the value is unknown), or None if it holds none."""
    if text is UNKNOWN:
        return UNKNOWN
    try:
        pod = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return None
    return pod.get("spec") if isinstance(pod, dict) and pod.get("kind") == "Pod" else None


def templates(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(key, Pod spec) of every value of a ConfigMap (UNKNOWN for the whole data if it is unknown)."""
    data = field(obj, "data")
    if data is UNKNOWN:
        yield "data", UNKNOWN
        return
    for key, text in sorted((data or {}).items()):
        yield key, _template_pod(text)


def workloads(resources: list[Any]) -> Iterator[Workload]:
    """Every compute workload of the stack, with its class."""
    compute = compute_providers(resources)
    namespaces = _pool_namespaces(resources, compute)
    for resource in resources:
        cluster = provider_name(resource)
        if cluster not in compute:
            continue
        if resource.resource_type == HELM_RELEASE:
            props = plain(resource.props)
            chart = chart_name(props.get("chart"))
            if chart in CHARTS:
                pool, pods = CHARTS[chart]
                yield Workload(f"Helm release {resource.name} (chart {chart})", cluster, pool, pods,
                               props.get("values"), resource.urn, chart)
    for resource, obj in objects(resources):
        cluster = provider_name(resource)
        if cluster not in compute:
            continue
        where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}"
        if obj["kind"] in KINDS:
            pool, pods = KINDS[obj["kind"]]
            yield Workload(where, cluster, pool, pods, obj, resource.urn, obj["kind"])
            continue
        if obj["kind"] == "ConfigMap" and (pool := label(obj, POOL_LABEL)) is not None:
            for key, spec in templates(obj):
                yield Workload(f"{where} (pod template {key})", cluster, pool, (POD_TEMPLATE,), spec, resource.urn,
                               f"the template (its ConfigMap labelled {POOL_LABEL}={pool})")
            continue
        pool = namespaces.get((cluster, namespace_of(obj)))
        if pool is None:
            continue
        subject = f"namespace {namespace_of(obj)}"
        if pod_spec(obj) is not None:
            yield Workload(where, cluster, pool, (POD_TEMPLATE,), pod_spec(obj), resource.urn, subject)
        elif obj["kind"] == "Cluster" and obj["apiVersion"].startswith(CNPG_GROUP):
            yield Workload(where, cluster, pool, (CNPG_CLUSTER,), obj, resource.urn, subject)


def undeclared_charts(resources: list[Any]) -> Iterator[tuple[Any, Any]]:
    """(release, chart) of every Helm release on a compute cluster whose chart no engine declares and that is not a
    platform chart."""
    compute = compute_providers(resources)
    for resource in resources:
        if resource.resource_type == HELM_RELEASE and provider_name(resource) in compute:
            chart = chart_name(plain(resource.props).get("chart"))
            if chart is UNKNOWN or (chart not in CHARTS and chart not in PLATFORM_CHARTS):
                yield resource, chart


def _at(values: Any, path: str) -> Any:
    return field(values, *path.split("."))


def deciding(values: Any, paths: tuple[str, ...]) -> tuple[str, Any]:
    """(path, value) of the first path that is set (not empty), as the chart reads them; the last path if none is."""
    for path in paths:
        value = _at(values, path)
        if value is UNKNOWN or value:
            return path, value
    return paths[-1], _at(values, paths[-1])


def _of(pods: Pods) -> str:
    return f"its {pods.group} pods" if pods.group else "its pods"


def _unknown(workload: Workload, pods: Pods, path: str, value: Any) -> str | None:
    return undecided(f"{workload.what} on {workload.cluster}: {_of(pods)}", value, f".{path}")


def tolerates(tolerations: Any, pool: str) -> bool:
    """Whether the tolerations cover the pool's taint `POOL_LABEL=<pool>:NoSchedule`."""
    for t in tolerations if isinstance(tolerations, list) else []:
        if not isinstance(t, dict) or t.get("effect") not in (None, "", "NoSchedule"):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", POOL_LABEL):
            return True
        if t.get("operator") in (None, "Equal") and t.get("key") == POOL_LABEL and t.get("value") == pool:
            return True
    return False


@stack_rule("fab-compute-pool-placement",
            "Every compute workload selects (nodeSelector) and tolerates the node pool of its class: batch for Spark and "
            "Airflow, interactive for Trino, StarRocks, Superset, JupyterHub and Argo CD; a pod template in a ConfigMap "
            "(Spark Connect's executors) that of the ConfigMap's pool label.",
            place=500,
            docs="every compute workload selects (`nodeSelector`) and tolerates the node pool of its class: batch for Spark and "
                 "Airflow, interactive for Trino, StarRocks, Superset, JupyterHub and Argo CD (engine charts' and CRDs' own "
                 "keys; pod templates and Postgres clusters by their namespace's `fab.internal/compute-pool` label, Pod "
                 "templates held in a ConfigMap, such as Spark Connect's executors', by the ConfigMap's)")
def compute_pool_placement(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a chart name, node selector or tolerations that can't be known in preview fail closed."""
    for resource, chart in undeclared_charts(args.resources):
        where = f"Helm release {resource.name} on {provider_name(resource)}"
        report(undecided(where, chart, ".chart") or (
            f"{where}: no engine declares chart {chart}, so where its pods run is not known; allowed: a chart an engine "
            f"declares (its EngineChart in the engine's `charts`, components/engines) or a platform chart "
            f"({', '.join(sorted(PLATFORM_CHARTS))})"), resource.urn)
    for w in workloads(args.resources):
        for pods in w.groups():
            path, selector = deciding(w.values, pods.node_selector)
            if problem := _unknown(w, pods, path, selector):
                report(problem, w.urn)
                continue
            got = selector.get(POOL_LABEL) if isinstance(selector, dict) else None
            if got != w.pool:
                report(f"{w.what} on {w.cluster}: {_of(pods)} select {POOL_LABEL}={got} ({path}); {w.subject} is {w.pool} "
                       f"work, allowed: nodeSelector {POOL_LABEL}={w.pool}", w.urn)
            path, tolerations = deciding(w.values, pods.tolerations)
            if problem := _unknown(w, pods, path, tolerations):
                report(problem, w.urn)
            elif not tolerates(tolerations, w.pool):
                report(f"{w.what} on {w.cluster}: {_of(pods)} do not tolerate the {w.pool} pool's taint ({path}: "
                       f"{_tolerations(tolerations)}); {w.subject} is {w.pool} work, allowed: a toleration of "
                       f"{POOL_LABEL}={w.pool}:NoSchedule", w.urn)


def _tolerations(tolerations: Any) -> str:
    """Tolerations as taints are written (`key=value:effect`, `key:effect` for Exists), for messages."""
    shown = []
    for t in tolerations if isinstance(tolerations, list) else []:
        t = t if isinstance(t, dict) else {}
        key = t.get("key") or "*"
        shown.append(f"{key}{'' if t.get('operator') == 'Exists' else '=' + str(t.get('value') or '')}:{t.get('effect') or '*'}")
    return f"[{', '.join(shown)}]"


def priority_classes(resources: list[Any], clusters: set[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(cluster, name) -> the PriorityClass object, on the given clusters."""
    return {(provider_name(r), name_of(obj)): obj for r, obj in objects(resources)
            if obj["kind"] == "PriorityClass" and provider_name(r) in clusters}


@stack_rule("fab-compute-priority-class",
            "Every compute workload that can name a PriorityClass uses one of its class's (labelled "
            f"{POOL_LABEL}=batch or interactive) on its cluster.",
            place=510,
            docs="every compute workload that can name a PriorityClass runs at one of its class's (labelled "
                 "`fab.internal/compute-pool`) on its cluster")
def compute_priority_class(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a PriorityClass name, or the labels of the class it names, that can't be known fail closed."""
    found = list(workloads(args.resources))
    classes = priority_classes(args.resources, {w.cluster for w in found})
    for w in found:
        ours = sorted(name for (cluster, name), obj in classes.items() if cluster == w.cluster and label(obj, POOL_LABEL) == w.pool)
        for pods in (p for p in w.groups() if p.priority):
            path, name = deciding(w.values, pods.priority)
            if problem := _unknown(w, pods, path, name):
                report(problem, w.urn)
                continue
            chosen = classes.get((w.cluster, name)) if isinstance(name, str) else None
            if chosen is not None and (problem := undecided(f"PriorityClass {name} on {w.cluster}", label(chosen, POOL_LABEL), ".labels")):
                report(problem, w.urn)
            elif chosen is None or label(chosen, POOL_LABEL) != w.pool:
                if not name:
                    named = "no PriorityClass"
                elif chosen is None:
                    named = f"PriorityClass {name}, which is not defined on {w.cluster}"
                else:
                    named = f"PriorityClass {name} (labelled {POOL_LABEL}={label(chosen, POOL_LABEL)})"
                report(f"{w.what} on {w.cluster}: {_of(pods)} run at {named} ({path}); {w.subject} is {w.pool} work, "
                       f"allowed: {', '.join(ours) or f'a PriorityClass labelled {POOL_LABEL}={w.pool}'}", w.urn)


@stack_rule("fab-compute-batch-below-interactive",
            "On a compute cluster, every batch PriorityClass has a lower value than every interactive one and than 0, the "
            "priority of interactive pods that can name none (StarRocks FE and CN).",
            place=520,
            docs="on a compute cluster every batch PriorityClass is below every interactive one and below 0, the priority of "
                 "interactive pods that can name none (StarRocks FE and CN)")
def compute_batch_below_interactive(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a compute PriorityClass whose labels or value can't be known fails closed."""
    classes = priority_classes(args.resources, compute_providers(args.resources))
    urns = {(provider_name(r), name_of(obj)): r.urn for r, obj in objects(args.resources) if obj["kind"] == "PriorityClass"}
    for (cluster, name), obj in sorted(classes.items()):
        if problem := undecided(f"PriorityClass {name} on {cluster}", {"labels": label(obj, POOL_LABEL), "value": obj.get("value")}):
            report(problem, urns[(cluster, name)])
            return
    for (cluster, name), obj in sorted(classes.items()):
        if label(obj, POOL_LABEL) != "batch":
            continue
        above = {f"PriorityClass {n}": o.get("value") for (c, n), o in sorted(classes.items())
                 if c == cluster and label(o, POOL_LABEL) == "interactive"}
        above["pods that name no PriorityClass"] = DEFAULT_PRIORITY
        value = obj.get("value")
        if not all(_number(value) < _number(v) for v in above.values()):
            report(f"PriorityClass {name} (batch) on {cluster} has value {_shown(value)}; allowed: below every interactive "
                   f"priority ({', '.join(f'{k}: {_shown(v)}' for k, v in above.items())})", urns[(cluster, name)])


def _number(value: Any) -> float:
    """A PriorityClass value (numbers reach the pack as floats); a missing one is not a number and compares as infinite."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("inf")


def _shown(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


RUN_MODE = re.compile(r"^\s*run_mode\s*=\s*(\S+)\s*$", re.MULTILINE)


def starrocks_clusters(resources: list[Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    compute = compute_providers(resources)
    for resource, obj in objects(resources):
        if obj["kind"] == "StarRocksCluster" and provider_name(resource) in compute:
            yield resource, obj


@stack_rule("fab-starrocks-shared-data",
            "StarRocks on a compute cluster runs shared-data (run_mode = shared_data in its FE config): its compute nodes "
            "keep no state.",
            place=530,
            docs="StarRocks on a compute cluster runs shared-data: its FE config sets `run_mode = shared_data`")
def starrocks_shared_data(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: an FE config reference or FE config text that can't be known fails closed."""
    config_maps = {(provider_name(r), namespace_of(obj), name_of(obj)): obj for r, obj in objects(args.resources)
                   if obj["kind"] == "ConfigMap"}
    for resource, obj in starrocks_clusters(args.resources):
        cluster, ns = provider_name(resource), namespace_of(obj)
        where = f"StarRocksCluster {ns}/{name_of(obj)} on {cluster}"
        info = field(obj, "spec", "starRocksFeSpec", "configMapInfo")
        if problem := undecided(where, info, ".spec.starRocksFeSpec.configMapInfo"):
            report(problem, resource.urn)
            continue
        name, key = (info or {}).get("configMapName"), (info or {}).get("resolveKey")
        conf = config_maps.get((cluster, ns, name)) if name else None
        text = field(conf, "data", key) if conf is not None and key else None
        if problem := undecided(f"{where}: ConfigMap {ns}/{name}", text, f".data.{key}"):
            report(problem, resource.urn)
            continue
        modes = RUN_MODE.findall(text) if isinstance(text, str) else []
        if not name or conf is None:
            report(f"{where} runs shared_nothing: its FE config (starRocksFeSpec.configMapInfo) names "
                   f"{f'ConfigMap {ns}/{name}, which is not in the stack' if name else 'no ConfigMap'}; allowed: an FE "
                   "config with run_mode = shared_data", resource.urn)
        elif (modes[-1] if modes else "shared_nothing") != "shared_data":
            report(f"{where} runs {modes[-1] if modes else 'shared_nothing'}: ConfigMap {ns}/{name} key {key} sets "
                   f"{f'run_mode = {modes[-1]}' if modes else 'no run_mode'}; allowed: run_mode = shared_data", resource.urn)


@stack_rule("fab-starrocks-cn-cache",
            "StarRocks compute nodes on a compute cluster have a cache volume, on a StorageClass defined on the same cluster.",
            place=540,
            docs="StarRocks compute nodes have a cache volume on a StorageClass the stack defines on the same cluster")
def starrocks_cn_cache(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: CN storage volumes, or StorageClass names, that can't be known fail closed."""
    defined: dict[str, list[str]] = {}
    for r, obj in objects(args.resources):
        if obj["kind"] == "StorageClass":
            defined.setdefault(provider_name(r), []).append(name_of(obj))
    for resource, obj in starrocks_clusters(args.resources):
        cluster = provider_name(resource)
        where = f"StarRocksCluster {namespace_of(obj)}/{name_of(obj)} on {cluster}"
        cn = field(obj, "spec", "starRocksCnSpec")
        if cn is None:
            continue
        volumes = field(cn, "storageVolumes")
        if problem := undecided(where, volumes, ".spec.starRocksCnSpec.storageVolumes"):
            report(problem, resource.urn)
            continue
        classes = sorted(defined.get(cluster, []))
        allowed = f"a StorageClass defined on {cluster} ({', '.join(classes) or 'none is'})"
        if not volumes:
            report(f"{where}: its CN have no cache volume (starRocksCnSpec.storageVolumes is empty); allowed: a volume on {allowed}",
                   resource.urn)
        for volume in volumes or []:
            storage_class = volume.get("storageClassName") if isinstance(volume, dict) else None
            if storage_class not in classes:
                report(f"{where}: CN volume {volume.get('name') if isinstance(volume, dict) else volume} uses "
                       f"{f'StorageClass {storage_class}' if storage_class else 'the default StorageClass'}, which the stack "
                       f"does not define on {cluster}; allowed: {allowed}", resource.urn)
