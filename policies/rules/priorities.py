"""Rules on priorities: serving is never preempted, training is below it. Decided on the PriorityClasses' values on each
cluster (and Kueue's WorkloadPriorityClasses), never on class names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import UNKNOWN, field, name_of, objects, provider_name, undecided
from rules._kueue import (
    PriorityClass,
    describe,
    kueue_installs,
    namespace_labels,
    number,
    pod_templates,
    priority_classes,
    serving,
    training,
)
from rules._policy import stack_rule


def _class_names(templates: Any) -> Any:
    """The priorityClassNames of a workload's pod templates ("" for none); UNKNOWN where any can't be known."""
    if templates is UNKNOWN or any(t is UNKNOWN or t.get("priorityClassName") is UNKNOWN for t in templates):
        return UNKNOWN
    return sorted({t.get("priorityClassName") or "" for t in templates})


def _workloads(args: StackValidationArgs) -> Iterator[tuple[Any, dict[str, Any], str, Any]]:
    """(resource, object, role, class names or UNKNOWN) of every serving and training workload; a workload whose labels
    can't be known is taken as serving (its class names then decide nothing, and it fails closed)."""
    for resource, obj, verdict in serving(args.resources):
        yield resource, obj, "vLLM", UNKNOWN if verdict is UNKNOWN else _class_names(pod_templates(obj))
    for resource, obj in training(args.resources, kueue_installs(args.resources), namespace_labels(args.resources)):
        yield resource, obj, "training", _class_names(pod_templates(obj))


def _listed(classes: dict[str, PriorityClass]) -> str:
    return ", ".join(sorted(classes)) or "none"


def _value(cls: PriorityClass) -> str:
    return f"{cls.name} ({cls.value})"


@stack_rule("fab-priority-class-exists",
            "vLLM pods and Kueue-managed training pods name a PriorityClass that the plan creates on their cluster.",
            place=350,
            docs="vLLM pods and Kueue-managed training pods name a PriorityClass the plan creates on their cluster")
def priority_class_exists(args: StackValidationArgs, report: ReportViolation) -> None:
    """A pod without a class runs at priority 0, below nothing; a class the cluster lacks keeps its pods from being
    created. Unknown values: a workload whose class names (or, for serving, labels) can't be known fails closed."""
    classes = priority_classes(args.resources)
    for resource, obj, role, names in _workloads(args):
        cluster = provider_name(resource)
        there = classes.get(cluster, {})
        if problem := undecided(f"{describe(obj)} on {cluster}", names, ".priorityClassName"):
            report(problem, resource.urn)
            continue
        for name in names:
            if not name:
                report(f"{describe(obj, role)} on {cluster} names no PriorityClass, so its pods run at priority 0; name one the "
                       f"plan creates there ({_listed(there)})", resource.urn)
            elif name not in there:
                report(f"{describe(obj, role)} on {cluster} names the PriorityClass {name!r}, which the plan does not create on "
                       f"{cluster}; PriorityClasses there: {_listed(there)}", resource.urn)


def _serving_classes(args: StackValidationArgs, classes: dict[str, dict[str, PriorityClass]]) -> Iterator[tuple[Any, dict, Any]]:
    """(resource, object, its PriorityClass) of every vLLM workload whose class the plan creates on its cluster (a missing
    class is fab-priority-class-exists's), with UNKNOWN for the class of a workload whose labels or class names can't
    be known."""
    for resource, obj, verdict in serving(args.resources):
        names = UNKNOWN if verdict is UNKNOWN else _class_names(pod_templates(obj))
        if names is UNKNOWN:
            yield resource, obj, UNKNOWN
            continue
        for name in names:
            if name in classes.get(provider_name(resource), {}):
                yield resource, obj, classes[provider_name(resource)][name]


def _unknown_class(obj: dict[str, Any], cluster: str) -> str:
    return undecided(f"{describe(obj)} on {cluster}", UNKNOWN, ".priorityClassName") or ""


@stack_rule("fab-serving-not-preemptible",
            "The vLLM pods' PriorityClass has the highest value of all PriorityClasses the plan creates on their cluster.",
            place=360,
            docs="the vLLM pods' PriorityClass has the highest value of all PriorityClasses the plan creates on their cluster")
def serving_not_preemptible(args: StackValidationArgs, report: ReportViolation) -> None:
    """Then nothing the platform runs there can preempt serving (the scheduler preempts only for a higher value).
    Unknown values: a vLLM workload's class, or a PriorityClass value on its cluster, that can't be known fails closed."""
    classes = priority_classes(args.resources)
    for resource, obj, own in _serving_classes(args, classes):
        cluster = provider_name(resource)
        if own is UNKNOWN:
            report(_unknown_class(obj, cluster), resource.urn)
            continue
        values = {name: cls.value for name, cls in classes[cluster].items()}
        if problem := undecided(f"PriorityClasses on {cluster}", values, ".value"):
            report(problem, resource.urn)
            continue
        rivals = [cls for name, cls in sorted(classes[cluster].items()) if name != own.name and cls.value >= own.value]
        if rivals:
            report(f"{describe(obj, 'vLLM')} on {cluster} runs at PriorityClass {_value(own)}, which does not outrank "
                   f"{', '.join(_value(c) for c in rivals)} there; serving's class has the highest value on its cluster, so "
                   "that nothing the platform runs preempts it", resource.urn)


@stack_rule("fab-training-below-serving",
            "On a serving cluster, every training pod's PriorityClass and every Kueue WorkloadPriorityClass has a value "
            "below the vLLM pods' PriorityClass.",
            place=370,
            docs="on a serving cluster, every training pod's PriorityClass and every WorkloadPriorityClass has a value below "
                 "serving's")
def training_below_serving(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: the class of a vLLM or training workload, or the value of a PriorityClass or WorkloadPriorityClass,
    that can't be known fails closed."""
    classes = priority_classes(args.resources)
    lowest: dict[str, PriorityClass] = {}
    for resource, obj, own in _serving_classes(args, classes):
        cluster = provider_name(resource)
        if own is UNKNOWN:
            report(_unknown_class(obj, cluster), resource.urn)
        elif own.value is UNKNOWN:
            report(undecided(f"PriorityClass {own.name} on {cluster}", own.value, ".value"), own.resource.urn)
        elif cluster not in lowest or own.value < lowest[cluster].value:
            lowest[cluster] = own
    for resource, obj in training(args.resources, kueue_installs(args.resources), namespace_labels(args.resources)):
        cluster = provider_name(resource)
        if cluster not in lowest:
            continue
        names = _class_names(pod_templates(obj))
        if names is UNKNOWN:
            report(_unknown_class(obj, cluster), resource.urn)
            continue
        for name in names:
            cls = classes[cluster].get(name)
            if cls is None:
                continue  # a missing class: fab-priority-class-exists
            if problem := undecided(f"PriorityClass {name} on {cluster}", cls.value, ".value"):
                report(problem, resource.urn)
            elif cls.value >= lowest[cluster].value:
                report(f"{describe(obj, 'training')} on {cluster} runs at PriorityClass {_value(cls)}, not below serving's "
                       f"{_value(lowest[cluster])}; training stays below serving, so that serving can always preempt it",
                       resource.urn)
    for resource, obj in objects(args.resources):
        cluster = provider_name(resource)
        if obj["kind"] != "WorkloadPriorityClass" or cluster not in lowest:
            continue
        value = number(field(obj, "value") or 0)
        if problem := undecided(f"WorkloadPriorityClass {name_of(obj)} on {cluster}", value, ".value"):
            report(problem, resource.urn)
        elif value >= lowest[cluster].value:
            report(f"WorkloadPriorityClass {name_of(obj)} on {cluster} has the value {value}, not below serving's PriorityClass "
                   f"{_value(lowest[cluster])}; training stays below serving", resource.urn)
