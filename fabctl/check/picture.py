"""The whole picture of what a `pulumi up` applies: the program's objects, and every object its Helm releases install.

Each object is placed on its cluster with the Pulumi resource that applies it (the program's own resource,
or the Helm release that installs it), so that the rules can walk the dependency graph as the engine does
on an empty cluster: a resource is created once everything it (transitively) depends on exists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from components.config import SiteConfig
from components.constants import GATEWAY_NAMESPACE
from fabctl.check.placed import Placed, group_of
from fabctl.check.runtime import RUNTIME_CRDS, derived_objects
from fabctl.helm import MissingChart, RenderedRelease, releases
from fabctl.render import Plan

BUILTIN_GROUPS = frozenset({
    "", "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io", "apps", "authentication.k8s.io",
    "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
    "events.k8s.io", "flowcontrol.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "policy",
    "rbac.authorization.k8s.io", "resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io",
})
"""API groups a Kubernetes 1.34 API server serves without any CRD."""

CLUSTER_SCOPED_BUILTINS = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "ClusterTrustBundle", "CSIDriver",
    "CSINode", "CustomResourceDefinition", "DeviceClass", "FlowSchema", "IngressClass", "IPAddress",
    "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "Namespace", "Node",
    "PersistentVolume", "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "ServiceCIDR", "StorageClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "VolumeAttachment",
    "VolumeAttributesClass",
})

BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def site_provided(site: SiteConfig) -> list[tuple[str, str]]:
    """(cluster key, subject) of the objects config keys name as provided by the site, not by the program:
    certificates issued by the site's PKI, StorageClasses of the cluster, an adopted object store's namespace."""
    provided: list[tuple[str, str]] = []
    for key in site.keys_with_role("compute"):
        provided.append((key, f"Secret {GATEWAY_NAMESPACE}/{site.compute.ingress.tls_secret}"))
        provided.append((key, f"StorageClass {site.compute.starrocks.cache_storage_class}"))
    if site.inference is not None:
        provided.append((site.inference.cluster, f"Secret {GATEWAY_NAMESPACE}/{site.inference.gateway.tls_secret}"))
    store, postgres = site.storage.object_store, site.storage.polaris.postgres
    for key in site.keys_with_role("storage"):
        if not store.install:
            provided.append((key, f"Namespace {store.namespace}"))
        provided += [(key, f"StorageClass {name}") for name in (store.storage_class, postgres.storage_class) if name]
    return provided


INSTALL_HOOKS = ("pre-install", "post-install")


def runs_on_install(obj: dict[str, Any]) -> bool:
    """Whether `helm install` creates the object: every template, and hooks of the install phases (not the
    delete, upgrade-only, rollback or test hooks that `helm template` also prints)."""
    hooks = ((obj.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook")
    return hooks is None or any(h.strip() in INSTALL_HOOKS for h in str(hooks).split(","))


def plural(kind: str) -> str:
    """The plural resource name of a kind, as CRDs and kubectl derive it (ClusterPolicy -> clusterpolicies)."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith(("s", "x", "ch", "sh")) else "s")


def release_placed(plan: Plan, release: dict[str, Any]) -> Placed:
    """A Helm release as the subject of a finding: `HelmRelease namespace/name`, applied by itself."""
    inputs = release["inputs"]
    obj = {"apiVersion": "helm.sh/v3", "kind": "HelmRelease", "metadata": {"name": inputs.get("name") or release["name"]}}
    return Placed(plan.cluster(release) or "", obj, release, None, inputs.get("namespace") or "default")


class Picture:
    """A plan and what its Helm releases render to, with the site config it came from."""

    def __init__(self, plan: Plan, site: SiteConfig, releases: list[RenderedRelease], missing: list[MissingChart]):
        self.plan, self.site, self.releases, self.missing = plan, site, releases, missing
        self._waits: dict[str, set[str]] = {}

    @cached_property
    def crd_scopes(self) -> dict[tuple[str, str, str], str]:
        """(cluster, group, kind) -> scope of every CRD the picture installs."""
        scopes = {}
        for placed in self._raw():
            if placed.kind == "CustomResourceDefinition":
                spec = placed.obj.get("spec") or {}
                scopes[placed.cluster, spec.get("group"), (spec.get("names") or {}).get("kind")] = spec.get("scope", "Namespaced")
        return scopes

    def _raw(self) -> Iterator[Placed]:
        for cluster, obj, record in self.plan.manifests():
            yield Placed(cluster, obj, record)
        for rendered in self.releases:
            for obj in rendered.objects:
                if runs_on_install(obj):
                    yield Placed(rendered.cluster, obj, rendered.release, rendered)

    def namespaced(self, cluster: str, obj: dict[str, Any]) -> bool:
        """A kind's scope: built-in, from its CRD in the picture, or from the run-time CRD table; else namespaced."""
        group, kind = group_of(str(obj.get("apiVersion", ""))), str(obj.get("kind"))
        if group in BUILTIN_GROUPS:
            return kind not in CLUSTER_SCOPED_BUILTINS
        if (cluster, group, kind) in self.crd_scopes:
            return self.crd_scopes[cluster, group, kind] == "Namespaced"
        return not any(entry.group == group and kind in entry.cluster_scoped for entry in RUNTIME_CRDS)

    @cached_property
    def placed(self) -> list[Placed]:
        """Every object, the program's first (in registration order), then each release's in Helm's output order."""
        out = []
        for raw in self._raw():
            namespace = None
            if self.namespaced(raw.cluster, raw.obj):
                default = raw.release.release["inputs"].get("namespace") if raw.release else None
                namespace = (raw.obj.get("metadata") or {}).get("namespace") or default or "default"
            out.append(Placed(raw.cluster, raw.obj, raw.resource, raw.release, namespace))
        return out

    @cached_property
    def derived(self) -> list[Placed]:
        """Objects controllers create from objects of the picture (`runtime.DERIVED`), placed with what creates them."""
        return list(derived_objects(self.placed))

    @cached_property
    def by_name(self) -> dict[tuple[str, str, str | None, str], list[Placed]]:
        """(cluster, kind, namespace, name) -> the objects of that name, applied or derived (more than one only when
        two sources create it)."""
        index: dict[tuple[str, str, str | None, str], list[Placed]] = defaultdict(list)
        for placed in [*self.placed, *self.derived]:
            index[placed.cluster, placed.kind, placed.namespace, placed.name].append(placed)
        return index

    def waits_for(self, resource: dict[str, Any]) -> set[str]:
        """URNs that exist before `resource` is created (its dependencies, transitively)."""
        urn = resource["urn"]
        if urn not in self._waits:
            self._waits[urn] = self.plan.waits_for(resource)
        return self._waits[urn]

    def before(self, placed: Placed, resource: dict[str, Any]) -> bool:
        """Whether `placed` exists when `resource` is created: it is applied by something `resource` waits for."""
        return placed.resource["urn"] in self.waits_for(resource)

    def unrendered(self, cluster: str) -> list[dict[str, Any]]:
        """Releases on the cluster whose objects are not in the picture (no chart package, or Helm refused them)."""
        return [m.release for m in self.missing if m.cluster == cluster] + [
            r.release for r in self.releases if r.cluster == cluster and r.error
        ]

    def awaited(self, placed: Placed) -> bool:
        """Whether `pulumi up` waits for the object to be ready: a release's objects unless it skips waiting,
        the program's own unless annotated `pulumi.com/skipAwait`."""
        if placed.release is not None:
            return not placed.resource["inputs"].get("skipAwait")
        annotations = (placed.obj.get("metadata") or {}).get("annotations") or {}
        return annotations.get("pulumi.com/skipAwait") != "true"

    @cached_property
    def _existing(self) -> dict[str, set[str]]:
        """Cluster provider name -> subjects (`Kind namespace/name`, `Kind name`) the config declares as existing:
        `check.existing`, `adopt.namespaces`, and what config keys name as provided by the site."""
        declared: dict[str, set[str]] = defaultdict(set)
        for key, refs in self.site.check.existing.items():
            declared[self.site.cluster_name(key)].update(refs)
        for key, names in self.site.adopt.namespaces.items():
            declared[self.site.cluster_name(key)].update(f"Namespace {n}" for n in names)
        for key, subject in site_provided(self.site):
            declared[self.site.cluster_name(key)].add(subject)
        return declared

    def existing(self, cluster: str, kind: str, namespace: str | None, name: str) -> bool:
        """Whether the stack's config declares the object as existing before the program runs."""
        subject = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        return subject in self._existing.get(cluster, set())

    def existing_crd(self, cluster: str, group: str, kind: str) -> bool:
        """Whether a declared existing CRD defines the kind: `CustomResourceDefinition <plural>.<group>`, with the
        plural Kubernetes tooling derives from the kind (`ippools`, `clusterpolicies`, `ingresses`)."""
        return f"CustomResourceDefinition {plural(kind)}.{group}" in self._existing.get(cluster, set())

    def release_records(self) -> list[dict[str, Any]]:
        return releases(self.plan)

    def cluster_key(self, cluster: str) -> str:
        """The config key of a cluster from its provider name (`site-a-gpu` -> `gpu`)."""
        prefix = f"{self.site.name}-"
        return cluster.removeprefix(prefix)
