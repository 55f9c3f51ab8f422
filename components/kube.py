"""The shared Kubernetes building blocks of the components (DESIGN section 4): Helm releases, namespaces, run-once
Jobs, generated secrets and the restricted security contexts, each written once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi_kubernetes import _utilities

from components.airgap import ChartValues, chart_values
from components.config import AdoptConfig
from components.registry import Registry, merge_values
from components.versions import CNPG_POSTGRES_IMAGE, HelmChart

HELM_HISTORY = 10
"""Release revisions Helm keeps (each is a Secret in the release's namespace); Pulumi's default keeps all."""


class FlatCustomResource(pulumi.CustomResource):
    """A custom resource whose fields sit beside `metadata` instead of under `spec` (Kueue's WorkloadPriorityClass).

    `pulumi_kubernetes.apiextensions.CustomResource` only carries `spec`; the provider itself applies any
    `kubernetes:<apiVersion>:<kind>` object as given, so this registers the object's fields directly.
    """

    def __init__(self, name: str, api_version: str, kind: str, metadata: dict[str, Any], fields: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None):
        props = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_utilities.get_version()))
        super().__init__(f"kubernetes:{api_version}:{kind}", name, props, opts)


@dataclass(frozen=True)
class Adoption:
    """Which of one cluster's namespaces and Helm releases exist already (config `adopt`), as the building blocks ask.

    Every answer is recorded by `AdoptConfig.claims`, so that a declaration nothing asked about is reported.
    """

    adopt: AdoptConfig
    cluster: str
    """The cluster's key."""

    def namespace(self, name: str) -> bool:
        return self.adopt.claims("namespace", self.cluster, name)

    def release(self, namespace: str, name: str) -> bool:
        return self.adopt.claims("helm_release", self.cluster, f"{namespace}/{name}")


def adopted(existing: bool, import_id: str) -> pulumi.ResourceOptions:
    """Options that import an existing object (config `adopt`) instead of creating it; nothing otherwise.

    Pulumi imports it on the next `pulumi up` and then updates it to the program's inputs, both shown in
    the preview; the option stays in place afterwards (a no-op once the object is in the stack).
    """
    return pulumi.ResourceOptions(import_=import_id) if existing else pulumi.ResourceOptions()


def helm_release(logical: str, chart: HelmChart, *, name: str, namespace: str, values: pulumi.Input[dict[str, Any]],
                 opts: pulumi.ResourceOptions, registry: Registry, adopt: Adoption | None = None,
                 postrender: str | None = None, images: ChartValues | None = None) -> k8s.helm.v3.Release:
    """A Helm release of a pinned chart from its repository or OCI registry, with bounded history and the chart's timeout.

    Pulumi waits (Helm's `--wait`) until the release's objects are ready, LoadBalancer Services included,
    so nothing a release installs may need something created after it. The release is imported when `adopt`
    declares `<namespace>/<name>` installed already on its cluster. With a site registry the chart comes from it, and
    the chart's image values (components/airgap; `images`, an engine's chart's: its `EngineChart`) move every image the
    chart runs there.
    """
    existing = adopt is not None and adopt.release(namespace, name)
    source = registry.chart(chart)
    oci = source.repo.startswith("oci://")
    # Helm takes a CA file for a classic repository; an OCI registry is trusted through the system's store (docs/airgap.md).
    ca_file = registry.ca_file if registry.mirrored and not oci else None
    return k8s.helm.v3.Release(
        logical,
        name=name,
        chart=f"{source.repo}/{source.chart}" if oci else source.chart,
        version=source.version,
        repository_opts=None if oci else k8s.helm.v3.RepositoryOptsArgs(repo=source.repo, ca_file=ca_file),
        namespace=namespace,
        values=merge_values(values, chart_values(chart, registry, images)),
        postrender=postrender,
        max_history=HELM_HISTORY,
        timeout=chart.timeout_sec,
        opts=pulumi.ResourceOptions.merge(opts, adopted(existing, f"{namespace}/{name}")),
    )


MANAGED_BY = {"app.kubernetes.io/managed-by": "fab-platform"}
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}
"""Pod Security admission labels of every namespace the platform creates, unless an operator needs more."""


def namespace(logical: str, name: str, opts: pulumi.ResourceOptions, *, registry: Registry, labels: dict[str, str] | None = None,
              privileged_reason: str | None = None, adopt: Adoption | None = None) -> k8s.core.v1.Namespace:
    """A namespace at Pod Security `restricted`, or `privileged` with the reason recorded on it, holding the site
    registry's pull Secret when the site has one (`registry`: its cluster's).

    It is imported when `adopt` declares it existing on its cluster.
    """
    existing = adopt is not None and adopt.namespace(name)
    pss = RESTRICTED if privileged_reason is None else {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
    }
    metadata: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, **(labels or {}), **pss}}
    if privileged_reason is not None:
        metadata["annotations"] = {"fab.internal/privileged-reason": privileged_reason}
    ns = k8s.core.v1.Namespace(logical, metadata=metadata, opts=pulumi.ResourceOptions.merge(opts, adopted(existing, name)))
    # Only where the namespace is: not its aliases (a namespace's former name is no Secret's) nor its retention.
    # The namespace must exist before the Secret is created in it.
    pull_secret(f"{logical}-pull-secret", name, registry,
                pulumi.ResourceOptions(parent=opts.parent, provider=opts.provider, depends_on=[ns]))
    return ns


def postgres_image(registry: Registry) -> dict[str, Any]:
    """A CloudNativePG Cluster's image fields on a site with a registry: the operator's default Postgres image from the
    mirror (without `imageName` the operator pulls its compiled-in default upstream), and the pull Secret, which the
    operator puts on the Cluster's ServiceAccount. None without a registry: the operator's default, as before."""
    if not registry.mirrored:
        return {}
    return {"imageName": registry.image(CNPG_POSTGRES_IMAGE), **registry.pod_fields()}


def pull_secret(logical: str, namespace_: str, registry: Registry, opts: pulumi.ResourceOptions) -> k8s.core.v1.Secret | None:
    """The site registry's image pull Secret in one namespace (config `registry.pull_secret`), or None without one.

    Pods of the namespace name it in `imagePullSecrets` (`Registry.pod_fields`); a pod created before it exists fails
    its pull and the kubelet retries it (docs/airgap.md).
    """
    if registry.pull_secret is None:
        return None
    return k8s.core.v1.Secret(
        logical,
        metadata={"name": registry.pull_secret, "namespace": namespace_, "labels": MANAGED_BY},
        type="kubernetes.io/dockerconfigjson",
        string_data={".dockerconfigjson": pulumi.Output.secret(registry.pull_credentials)},
        opts=opts,
    )




CHECKOV_SUPPRESSIONS = {
    "CKV_K8S_43": "images are pinned to exact tags in components/versions.py; digests cannot be resolved offline and are a follow-up",
    "CKV_K8S_35": "the tool reads its credentials from environment variables (S3 SDKs, Quarkus, mysql); the Secret reaches this pod only",
    "CKV2_K8S_6": "ingress is denied by Cilium clusterwide policies (fab-default-deny-remote and the flow rules), which checkov does not read",
    "CKV_K8S_158": "a dry run of a Role is checked for escalation like a real one; the preview identity can only dry-run (fab-preview-dry-run-only)",
    "CKV_K8S_38": "it calls the API server with its ServiceAccount's token: a Spark driver (the Spark Connect server) creates "
                  "and deletes its executor pods; an endpoint picker watches its pool's pods and InferencePool; Trino's group sync "
                  "patches the one Secret of its groups",
}
"""Scanner findings the platform accepts, with the reason; each is written on the object it concerns."""


@dataclass(frozen=True)
class Priority:
    """A PriorityClass: its role in logical names (`<prefix>-priority-<role>`), value, preemption policy and why."""

    role: str
    value: int
    preemption: str
    description: str
    labels: dict[str, str] | None = None
    """Labels of the PriorityClass (the compute pool it belongs to, which the policy pack reads)."""


def priority_classes(prefix: str, table: dict[str, Priority], opts: pulumi.ResourceOptions) -> dict[str, k8s.scheduling.v1.PriorityClass]:
    """One PriorityClass per entry of `table` (PriorityClass name -> Priority), by name."""
    return {
        name: k8s.scheduling.v1.PriorityClass(
            f"{prefix}-priority-{p.role}", metadata={"name": name, **({"labels": p.labels} if p.labels else {})}, value=p.value,
            preemption_policy=p.preemption, description=p.description, opts=opts,
        )
        for name, p in table.items()
    }


def checkov_skips(*check_ids: str) -> dict[str, str]:
    """Annotations that suppress checkov checks on one object, each with its written reason."""
    return {f"checkov.io/skip{i}": f"{check}={CHECKOV_SUPPRESSIONS[check]}" for i, check in enumerate(check_ids, start=1)}


WORKLOAD_SKIPS = ("CKV_K8S_43", "CKV_K8S_35", "CKV2_K8S_6")
"""The suppressions of every workload the platform runs itself (Jobs, Deployments, CronJobs)."""


def restricted_security_context(user: int) -> dict[str, Any]:
    """A container securityContext that meets Pod Security `restricted`, with a read-only root filesystem."""
    return {
        "runAsNonRoot": True,
        "runAsUser": user,
        "runAsGroup": user,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_pod_security_context(**extra: Any) -> dict[str, Any]:
    """A pod securityContext that meets Pod Security `restricted` (`extra` adds fields such as fsGroup)."""
    return {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, **extra}


SMALL_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
"""Requests and limits of a helper container (setup, sync) unless it states its own."""


def restricted_container(name: str, image: str, user: int, **extra: Any) -> dict[str, Any]:
    """A container spec that meets Pod Security `restricted`, always pulled, with requests and limits.

    `extra` adds the container's other fields (args, env, volumeMounts) and may replace `resources`.
    """
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "Always",
        "securityContext": restricted_security_context(user),
        "resources": SMALL_RESOURCES,
        **extra,
    }


def run_once_job(logical: str, *, name: str, namespace: str, containers: list[dict[str, Any]], volumes: list[dict[str, Any]],
                 opts: pulumi.ResourceOptions, registry: Registry, backoff_limit: int = 6, labels: dict[str, str] | None = None,
                 placement: dict[str, Any] | None = None) -> k8s.batch.v1.Job:
    """A Job that runs its containers to completion once (retried on failure), in a restricted pod without an API token,
    naming the pull Secret of its cluster's `registry` where the site has one.

    `placement`: pod fields choosing its nodes and priority (nodeSelector, tolerations, priorityClassName).
    A Job's pod template is immutable: a changed template replaces the Job, and the old one is deleted first
    since both have the same `name`.
    """
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "OnFailure",
            "automountServiceAccountToken": False,
            "securityContext": restricted_pod_security_context(),
            "containers": containers,
            "volumes": volumes,
            **(placement or {}),
            **registry.pod_fields(),
        },
    }
    if labels:
        template["metadata"] = {"labels": labels}
    return k8s.batch.v1.Job(
        logical,
        metadata={"name": name, "namespace": namespace, "annotations": checkov_skips(*WORKLOAD_SKIPS)},
        spec={"backoffLimit": backoff_limit, "template": template},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
    )


CACHE_DURABILITY = {"fab.internal/durability": "cache"}
"""The label of a StorageClass whose volumes hold nothing that must survive (DESIGN section 2: local NVMe is cache only)."""


def cache_storage_class(logical: str, name: str, provisioner: str, purpose: str,
                        opts: pulumi.ResourceOptions) -> k8s.storage.v1.StorageClass:
    """A local NVMe StorageClass for cache and scratch only: volumes bound where their pod runs, deleted with their claim."""
    return k8s.storage.v1.StorageClass(
        logical,
        metadata={"name": name, "labels": CACHE_DURABILITY, "annotations": {"fab.internal/purpose": purpose}},
        provisioner=provisioner,
        reclaim_policy="Delete",
        volume_binding_mode="WaitForFirstConsumer",
        allow_volume_expansion=False,
        opts=opts,
    )


def random_secret(logical: str, length: int, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """A generated password of letters and digits (no symbols: it goes into URIs and config files), as a Pulumi secret."""
    return pulumi.Output.secret(random.RandomPassword(logical, length=length, special=False, opts=opts).result)
