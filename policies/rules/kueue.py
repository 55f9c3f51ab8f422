"""Rules on MultiKueue: a manager never dispatches to itself, and its quotas are its workers' sum."""

from __future__ import annotations

from collections import defaultdict

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs

from rules._k8s import name_of, objects, provider_name, skip_unknown, undecided
from rules._policy import stack_rule


@stack_rule("fab-multikueue-not-own-worker", "A MultiKueue manager is never its own worker.")
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


def _gpu_quotas(obj: dict) -> dict[str, int]:
    out = {}
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == "nvidia.com/gpu" and resource.get("nominalQuota") is not None:
                    out[flavor["name"]] = int(resource["nominalQuota"])
    return out


@stack_rule("fab-multikueue-quota-sum", "Manager quotas equal the sum of worker quotas.", EnforcementLevel.ADVISORY)
def multikueue_quota_sum(args: StackValidationArgs, report: ReportViolation) -> None:
    """Advisory; queues with unknown quotas are left out."""
    workers: dict[str, set[str]] = defaultdict(set)  # manager provider -> worker cluster keys
    queues: dict[str, dict[str, tuple[object, dict]]] = defaultdict(dict)  # provider -> queue name -> (resource, obj)
    for resource, obj in ((r, skip_unknown(o)) for r, o in objects(args.resources)):
        if obj["kind"] == "MultiKueueCluster":
            workers[provider_name(resource)].add(name_of(obj))
        if obj["kind"] == "ClusterQueue":
            queues[provider_name(resource)][name_of(obj)] = (resource, obj)
    for manager, keys in workers.items():
        worker_providers = [p for p in queues if any(p.endswith(f"-{k}") for k in keys)]
        for name, (resource, obj) in queues[manager].items():
            expected: dict[str, int] = defaultdict(int)
            for provider in worker_providers:
                if name in queues[provider]:
                    for flavor, gpus in _gpu_quotas(queues[provider][name][1]).items():
                        expected[flavor] += gpus
            actual = _gpu_quotas(obj)
            if actual != dict(expected):
                report(f"manager ClusterQueue {name} on {manager} has GPU quotas {actual}, but its workers' add up to {dict(expected)}",
                       resource.urn)
