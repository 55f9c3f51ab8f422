"""Rules on Kueue: MultiKueue (never its own worker, quotas its workers' sum, only kinds it can dispatch), topology-aware
training flavors, preemptible training, and serving that Kueue never manages or queues."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import UNKNOWN, field, label, name_of, namespace_of, objects, pod_spec, provider_name, undecided
from rules._kueue import (
    QUEUE_LABEL,
    describe,
    format_like,
    kueue_installs,
    labels_of,
    namespace_labels,
    number,
    quantity,
    selects,
    serving,
)
from rules._policy import stack_rule

MULTIKUEUE_FRAMEWORKS = [
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "trainer.kubeflow.org/trainjob",
    "ray.io/raycluster",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "workload.codeflare.dev/appwrapper",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
]
"""The integrations MultiKueue 0.19 dispatches to workers: those with a MultiKueue adapter in Kueue 0.19.2's source, and
Deployments, whose pods it dispatches (Kueue's "Run Deployment in Multi-Cluster"). Not SparkApplications: Kueue
integrates them, but MultiKueue rejects their workloads."""


def _site_prefix(manager: str, keys: set[str], clusters: set[str]) -> str | None:
    """The `<site>-` before every cluster key in the manager's provider name `<site>-<key>`: the one (shortest) under
    which every worker key names a cluster of the stack."""
    cuts = [i + 1 for i, c in enumerate(manager) if c == "-"]
    for cut in cuts:
        if all(manager[:cut] + key in clusters for key in keys):
            return manager[:cut]
    return None


def _nominal_quotas(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """(flavor, resource) -> nominalQuota of a ClusterQueue."""
    out = {}
    for group in field(obj, "spec", "resourceGroups") or []:
        for flavor in (group or {}).get("flavors") or []:
            for resource in (flavor or {}).get("resources") or []:
                out[flavor.get("name"), resource.get("name")] = number(resource.get("nominalQuota"))
    return out


@stack_rule("fab-multikueue-not-own-worker", "A MultiKueue manager is never its own worker.",
            place=310,
            docs="a MultiKueue manager is never its own worker")
def multikueue_not_own_worker(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a MultiKueueCluster whose name or cluster source is unknown fails closed."""
    for resource, obj in objects(args.resources):
        if obj["kind"] != "MultiKueueCluster":
            continue
        if problem := undecided(f"MultiKueueCluster on {provider_name(resource)}", {"metadata": obj.get("metadata"), "spec": obj.get("spec")}):
            report(problem, resource.urn)
        elif provider_name(resource).endswith(f"-{name_of(obj)}"):
            report(f"MultiKueueCluster {name_of(obj)} on {provider_name(resource)} points at its own manager; a manager is "
                   "never its own worker", resource.urn)


@stack_rule("fab-multikueue-quota-sum",
            "A MultiKueue manager's ClusterQueue quotas equal the sum of its workers' queues of the same name, per flavor and resource.",
            place=320,
            docs="a MultiKueue manager's ClusterQueue quotas equal the sum of its workers' queues of the same name, per flavor "
                 "and resource (`nominalQuota`, compared as quantities)")
def multikueue_quota_sum(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a manager or worker ClusterQueue whose quotas are unknown, or a MultiKueueCluster whose name is,
    fails closed."""
    workers: dict[str, set[str]] = defaultdict(set)  # manager cluster -> worker cluster keys
    queues: dict[str, dict[str, tuple[Any, dict]]] = defaultdict(dict)  # cluster -> queue name -> (resource, obj)
    for resource, obj in objects(args.resources):
        if obj["kind"] == "MultiKueueCluster":
            workers[provider_name(resource)].add(name_of(obj) if field(obj, "metadata", "name") is not UNKNOWN else UNKNOWN)
        if obj["kind"] == "ClusterQueue":
            queues[provider_name(resource)][name_of(obj)] = (resource, obj)
    clusters = {provider_name(r) for r in args.resources if provider_name(r)}
    for manager, keys in sorted(workers.items()):
        if UNKNOWN in keys:
            report(undecided(f"a MultiKueueCluster on {manager}", UNKNOWN, ".metadata.name") or "")
            continue
        prefix = _site_prefix(manager, keys, clusters)
        if prefix is None:
            report(f"the MultiKueueClusters on {manager} ({', '.join(sorted(keys))}) do not all name a cluster of this stack, so "
                   "its quotas can't be compared with its workers'")
            continue
        worker_clusters = sorted(prefix + key for key in keys)
        for name, (resource, obj) in sorted(queues[manager].items()):
            parts = [obj, *(queues[w][name][1] for w in worker_clusters if name in queues[w])]
            if problem := undecided(f"ClusterQueue {name} on {manager} or its workers",
                                    [field(part, "spec", "resourceGroups") for part in parts]):
                report(problem, resource.urn)
                continue
            expected: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
            for part in parts[1:]:
                for key, amount in _nominal_quotas(part).items():
                    expected[key] += quantity(amount)
            actual = _nominal_quotas(obj)
            for flavor, resource_name in sorted({*expected, *actual}):
                have = actual.get((flavor, resource_name))
                want = expected.get((flavor, resource_name), Decimal(0))
                if (quantity(have) if have is not None else Decimal(0)) != want:
                    report(f"manager ClusterQueue {name} on {manager} has the nominalQuota {have if have is not None else 0} of "
                           f"{resource_name} in flavor {flavor}, but its workers ({', '.join(sorted(keys))}) add up to "
                           f"{format_like(want, have if have is not None else 0)}; a manager's quota is the sum of its workers'",
                           resource.urn)


@stack_rule("fab-multikueue-supported-frameworks",
            "On a MultiKueue manager, Kueue integrates only the job kinds MultiKueue can dispatch to workers.",
            place=330,
            docs="on a MultiKueue manager, Kueue's `integrations.frameworks` are only kinds MultiKueue 0.19 dispatches "
                 "(batch/job, JobSet, Kubeflow jobs, TrainJob, KubeRay, AppWrapper, pod, Deployment, StatefulSet, "
                 "LeaderWorkerSet; not SparkApplication)")
def multikueue_supported_frameworks(args: StackValidationArgs, report: ReportViolation) -> None:
    """A manager is a cluster with a MultiKueueConfig. Unknown values: a manager's Kueue configuration that can't be
    known fails closed."""
    managers = {provider_name(r) for r, obj in objects(args.resources) if obj["kind"] == "MultiKueueConfig"}
    for cluster, kueue in sorted(kueue_installs(args.resources).items()):
        if cluster not in managers:
            continue
        if problem := undecided(f"Kueue configuration on {cluster}", kueue.config, ".managerConfig"):
            report(problem, kueue.release.urn)
            continue
        unsupported = [f for f in kueue.frameworks if f not in MULTIKUEUE_FRAMEWORKS]
        if unsupported:
            report(f"Kueue on the MultiKueue manager {cluster} integrates {', '.join(unsupported)}, which MultiKueue cannot "
                   f"dispatch to workers (its workloads would be rejected); allowed: {', '.join(MULTIKUEUE_FRAMEWORKS)}",
                   kueue.release.urn)


@stack_rule("fab-training-flavor-topology",
            "Every training ResourceFlavor names a Topology the plan creates on its cluster (topology levels are always "
            "configured), so that Kueue places training topology-aware.",
            place=340,
            docs="every ResourceFlavor (Kueue manages training only) names a Topology the plan creates on its cluster, the "
                 "MultiKueue manager included")
def training_flavor_topology(args: StackValidationArgs, report: ReportViolation) -> None:
    """Kueue manages training only, so every ResourceFlavor is a training flavor. Unknown values: a flavor whose spec or a
    Topology whose name can't be known fails closed."""
    topologies: dict[str, set[str]] = defaultdict(set)
    for resource, obj in objects(args.resources):
        if obj["kind"] == "Topology":
            if problem := undecided(f"Topology on {provider_name(resource)}", field(obj, "metadata", "name"), ".metadata.name"):
                report(problem, resource.urn)
            topologies[provider_name(resource)].add(name_of(obj))
    for resource, obj in objects(args.resources):
        if obj["kind"] != "ResourceFlavor":
            continue
        cluster = provider_name(resource)
        where = f"ResourceFlavor {name_of(obj)} on {cluster}"
        if problem := undecided(where, field(obj, "spec", "topologyName") if obj.get("spec") is not UNKNOWN else UNKNOWN, ".spec.topologyName"):
            report(problem, resource.urn)
            continue
        there = f"Topologies there: {', '.join(sorted(topologies[cluster]))}" if topologies[cluster] else "the plan creates no Topology there"
        topology = field(obj, "spec", "topologyName")
        if not topology:
            report(f"{where} names no topologyName; a training flavor carries its cluster's Topology so that Kueue places "
                   f"jobs topology-aware ({there})", resource.urn)
        elif topology not in topologies[cluster]:
            report(f"{where} names the Topology {topology!r}, which the plan does not create on {cluster}; {there}", resource.urn)


PREEMPTION = {
    "withinClusterQueue": (["LowerPriority", "LowerOrNewerEqualPriority"], "more urgent work of the team never preempts its training"),
    "reclaimWithinCohort": (["Any", "LowerPriority", "LowerOrNewerEqualPriority"],
                            "the quota it lends is never reclaimed from the training that borrowed it"),
}
"""The ClusterQueue preemption settings that make its training preemptible: allowed values, and what Never would mean."""


@stack_rule("fab-training-preemptible",
            "Every ClusterQueue lets Kueue preempt its training, for more urgent work in the queue and to reclaim lent quota.",
            place=380,
            docs="every ClusterQueue lets Kueue preempt its training: `withinClusterQueue` and `reclaimWithinCohort` are not "
                 "`Never`")
def training_preemptible(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a ClusterQueue whose preemption settings can't be known fails closed."""
    for resource, obj in objects(args.resources):
        if obj["kind"] != "ClusterQueue":
            continue
        where = f"ClusterQueue {name_of(obj)} on {provider_name(resource)}"
        preemption = field(obj, "spec", "preemption")
        if problem := undecided(where, preemption, ".spec.preemption"):
            report(problem, resource.urn)
            continue
        for setting, (allowed, meaning) in PREEMPTION.items():
            value = (preemption or {}).get(setting)
            if value not in allowed:
                given = f"sets preemption.{setting} to {value}" if value else f"leaves preemption.{setting} unset (Never)"
                report(f"{where} {given}, so {meaning}; allowed: {', '.join(allowed)} (training is preemptible)", resource.urn)


@stack_rule("fab-serving-not-kueue-managed",
            "No vLLM workload is in a namespace that Kueue's managedJobsNamespaceSelector selects on its cluster.",
            place=390,
            docs="no vLLM workload is in a namespace Kueue's `managedJobsNamespaceSelector` selects (Kueue's default selector "
                 "when the configuration sets none)")
def serving_not_kueue_managed(args: StackValidationArgs, report: ReportViolation) -> None:
    """Kueue never manages Deployments or pods outside the selected namespaces, whatever their labels. Unknown values: a
    workload whose labels, namespace labels or Kueue configuration can't be known fails closed."""
    kueues, namespaces = kueue_installs(args.resources), namespace_labels(args.resources)
    for resource, obj, verdict in serving(args.resources):
        cluster = provider_name(resource)
        kueue = kueues.get(cluster)
        if kueue is None:
            continue
        labels = labels_of(cluster, namespace_of(obj), namespaces)
        deciding = {"serving": verdict, "kueue": kueue.config, "namespace": labels}
        if problem := undecided(f"{describe(obj)} on {cluster}", deciding):
            report(problem, resource.urn)
        elif selects(kueue.namespace_selector, labels):
            report(f"{describe(obj, 'vLLM')} on {cluster} is in namespace {namespace_of(obj)}, which Kueue's "
                   f"{kueue.describe_selector()} selects; Kueue never manages serving: select only training namespaces",
                   resource.urn)


@stack_rule("fab-serving-no-queue-label", "No serving workload, nor its pod template, carries a kueue.x-k8s.io/queue-name label.",
            place=400,
            docs="no workload in a serving namespace, nor its pod template, carries `kueue.x-k8s.io/queue-name`")
def serving_no_queue_label(args: StackValidationArgs, report: ReportViolation) -> None:
    """Serving workloads: vLLM workloads and every workload in their namespaces. Unknown values: labels that can't be
    known fail closed."""
    found = list(serving(args.resources))
    serving_namespaces = {(provider_name(r), namespace_of(o)) for r, o, _ in found}
    for resource, obj in objects(args.resources):
        cluster = provider_name(resource)
        if pod_spec(obj) is None or (cluster, namespace_of(obj)) not in serving_namespaces:
            continue
        template = field(obj, "spec", "template", "metadata", "labels") if obj["kind"] != "Pod" else None
        deciding = {"labels": label(obj, QUEUE_LABEL), "template": template if template is UNKNOWN else (template or {}).get(QUEUE_LABEL)}
        if problem := undecided(f"{describe(obj)} on {cluster}", deciding):
            report(problem, resource.urn)
            continue
        for where, value in (("", deciding["labels"]), (" on its pod template", deciding["template"])):
            if value is not None:
                report(f"serving {describe(obj)} on {cluster} carries {QUEUE_LABEL}={value}{where}; Kueue never queues serving: "
                       "remove the label", resource.urn)
