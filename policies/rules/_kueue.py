"""Readers of a stack's Kueue state, shared by the Kueue and priority rules: Kueue's own configuration per cluster,
the namespaces it manages, which workloads serve and which train, PriorityClasses, and quantities.

Serving and training are told apart by what Kueue and the scheduler act on, not by names: serving is a vLLM workload
(`app.kubernetes.io/name: vllm`); training is a job-like workload Kueue manages on its cluster (it carries a queue
label, or its namespace is one Kueue's `managedJobsNamespaceSelector` selects).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

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
    unknown_paths,
)
from rules.gpu import TRAINING_KINDS

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
APP_LABEL = "app.kubernetes.io/name"
VLLM = "vllm"
METADATA_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace, with its name."""
KUEUE_NAMESPACE = "kueue-system"
"""Kueue's default `namespace`, which its default namespace selector leaves out."""

KUEUE_CHART_DEFAULT_FRAMEWORKS = [
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster", "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod", "deployment", "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
]
"""`integrations.frameworks` of the Kueue 0.19.2 chart's default `managerConfig.controllerManagerConfigYaml`: what a Kueue
release that sets no configuration of its own integrates (with Kueue's default namespace selector)."""


@dataclass(frozen=True)
class Kueue:
    """The Kueue installed on one cluster: the Helm release and its Configuration (UNKNOWN when it can't be known)."""

    release: Any
    cluster: str
    config: Any
    own_config: bool
    """Whether the release sets a Configuration (else the chart's default one applies)."""

    @property
    def frameworks(self) -> list[str]:
        """`integrations.frameworks`; Kueue integrates batch/job alone when the list is empty."""
        if not self.own_config:
            return KUEUE_CHART_DEFAULT_FRAMEWORKS
        return list(field(self.config, "integrations", "frameworks") or ["batch/job"])

    @property
    def namespace_selector(self) -> dict[str, Any]:
        """`managedJobsNamespaceSelector`, or Kueue's default: every namespace but kube-system and Kueue's own."""
        selector = field(self.config, "managedJobsNamespaceSelector") if self.own_config else None
        if selector is not None:
            return selector
        namespace = (field(self.config, "namespace") if self.own_config else None) or KUEUE_NAMESPACE
        return {"matchExpressions": [{"key": METADATA_NAME_LABEL, "operator": "NotIn", "values": ["kube-system", namespace]}]}

    def describe_selector(self) -> str:
        if self.own_config and field(self.config, "managedJobsNamespaceSelector") is not None:
            return f"managedJobsNamespaceSelector {json.dumps(self.namespace_selector, sort_keys=True)}"
        return "default managedJobsNamespaceSelector (every namespace but kube-system and its own)"


def _is_kueue_chart(chart: Any) -> bool:
    return chart_name(chart) == "kueue"


def kueue_installs(resources: list[Any]) -> dict[str, Kueue]:
    """The Kueue of each cluster, by provider name: a Helm release of the kueue chart and the Configuration it renders."""
    out = {}
    for resource in resources:
        if resource.resource_type != HELM_RELEASE:
            continue
        props = plain(resource.props)
        if not _is_kueue_chart(props.get("chart")):
            continue
        text = field(props.get("values"), "managerConfig", "controllerManagerConfigYaml")
        config = UNKNOWN if text is UNKNOWN else (yaml.safe_load(text) if isinstance(text, str) else None)
        out[provider_name(resource)] = Kueue(resource, provider_name(resource), config, text is not None)
    return out


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector selects an object with `labels` (an empty selector selects everything)."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator, False):
            return False
    return True


def namespace_labels(resources: list[Any]) -> dict[tuple[str, str], Any]:
    """(cluster, namespace) -> the namespace's labels as the API server holds them (with its name label); UNKNOWN where
    they can't be known."""
    out: dict[tuple[str, str], Any] = {}
    for resource, obj in objects(resources):
        if obj["kind"] == "Namespace":
            labels = field(obj, "metadata", "labels")
            out[provider_name(resource), name_of(obj)] = labels if labels is UNKNOWN else {
                **(labels or {}), METADATA_NAME_LABEL: name_of(obj)}
    return out


def labels_of(cluster: str, namespace: str, namespaces: dict[tuple[str, str], Any]) -> Any:
    """A namespace's labels; one the plan does not create has only its name label."""
    return namespaces.get((cluster, namespace), {METADATA_NAME_LABEL: namespace})


def is_serving(obj: dict[str, Any]) -> Any:
    """Whether a workload is a vLLM server (UNKNOWN when its labels are unknown), False for anything else."""
    if pod_spec(obj) is None:
        return False
    app = label(obj, APP_LABEL)
    return UNKNOWN if app is UNKNOWN else app == VLLM


def serving(resources: list[Any]) -> Iterator[tuple[Any, dict[str, Any], Any]]:
    """(resource, object, True or UNKNOWN) of every workload that serves or can't be told apart from one."""
    for resource, obj in objects(resources):
        verdict = is_serving(obj)
        if verdict is not False:
            yield resource, obj, verdict


def pod_templates(obj: dict[str, Any]) -> Any:
    """Every pod spec of a workload, at any depth (Job, JobSet, RayJob, PyTorchJob, ...), UNKNOWN where the spec is."""
    spec = obj.get("spec")
    if spec is UNKNOWN:
        return UNKNOWN
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "containers" in value:
                found.append(value)
                return
            for key, item in value.items():
                if item is UNKNOWN and key in ("template", "spec"):
                    found.append(UNKNOWN)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(spec)
    return found


def training(resources: list[Any], kueues: dict[str, Kueue], namespaces: dict[tuple[str, str], Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(resource, object) of every training workload: a job-like workload that Kueue on its cluster manages, because it
    carries a queue label or because its namespace is one Kueue's namespace selector selects. Where the labels or
    Kueue's configuration can't be known, the workload counts as training (the rules then fail closed on it)."""
    for resource, obj in objects(resources):
        kueue = kueues.get(provider_name(resource))
        if obj["kind"] not in TRAINING_KINDS or kueue is None:
            continue
        queue = label(obj, QUEUE_LABEL)
        labels = labels_of(kueue.cluster, namespace_of(obj), namespaces)
        if queue or unknown_paths([queue, kueue.config, labels]) or selects(kueue.namespace_selector, labels):
            yield resource, obj


def describe(obj: dict[str, Any], role: str = "") -> str:
    """`vLLM Deployment inference/vllm-a`, `training Job team-yield/train`."""
    where = f"{namespace_of(obj)}/{name_of(obj)}" if namespace_of(obj) else name_of(obj) or "<unknown during preview>"
    return f"{role + ' ' if role else ''}{obj['kind']} {where}"


def number(value: Any) -> Any:
    """A number as written: the engine sends every number as a float, so a whole one becomes an int again."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass(frozen=True)
class PriorityClass:
    resource: Any
    name: str
    value: Any
    preemption: Any


def priority_classes(resources: list[Any]) -> dict[str, dict[str, PriorityClass]]:
    """cluster -> PriorityClass name -> the PriorityClass the plan creates there."""
    out: dict[str, dict[str, PriorityClass]] = {}
    for resource, obj in objects(resources):
        if obj["kind"] == "PriorityClass":
            out.setdefault(provider_name(resource), {})[name_of(obj)] = PriorityClass(
                resource, name_of(obj), number(obj.get("value") or 0), obj.get("preemptionPolicy"))
    return out


_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (`16`, `500m`, `128Gi`, `1e3`) as a number; raises ValueError on anything else."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return Decimal(text)


def format_like(amount: Decimal, example: Any) -> str:
    """`amount` with the suffix of the quantity `example` where that writes it whole, else the largest binary suffix that
    does, else as a plain number: `1536Gi` next to `1Ti`."""
    text = str(example).strip()
    suffix = next((s for s in sorted(_SUFFIXES, key=len, reverse=True) if s and text.endswith(s)), "")
    binary = sorted((s for s in _SUFFIXES if s.endswith("i")), key=lambda s: _SUFFIXES[s], reverse=True)
    for candidate in [suffix, *(binary if suffix.endswith("i") else [])]:
        scaled = amount / Decimal(_SUFFIXES[candidate])
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{candidate}"
    return f"{amount.normalize():f}"
