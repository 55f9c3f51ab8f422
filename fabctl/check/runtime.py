"""What controllers create at run time: CRDs an operator registers, and objects that appear in every namespace or
that an operator writes for itself. Each entry says who creates it and where that is documented, so that the rules
can tell "created later by a controller this plan waits for" from "never created".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components import versions
from components.registry import Registry
from fabctl.check.placed import Placed
from fabctl.helm import ChartRef, releases

if TYPE_CHECKING:
    from components.config import SiteConfig
    from fabctl.render import Plan

WAIT_FOR = "pulumi.com/waitFor"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


@dataclass(frozen=True)
class RuntimeCrds:
    """CRDs of an API group that a controller registers when it runs, not a chart or the program."""

    group: str
    installer: str
    source: str
    ready_after: Callable[[Plan, SiteConfig, str], list[dict[str, Any]]]
    """The resources of a cluster (of the plan, with the site config it came from) once created (and awaited) the CRDs
    exist."""
    fix: str
    cluster_scoped: frozenset[str] = frozenset()
    """Kinds of the group that are cluster-scoped (the CRDs are not in the picture to say so)."""


def _cilium_releases(plan: Plan, site: SiteConfig, cluster: str) -> list[dict[str, Any]]:
    return [r for r in releases(plan)
            if plan.cluster(r) == cluster and ChartRef.of(r).name == "cilium" and not r["inputs"].get("skipAwait")]


def _nv_ipam_policies(plan: Plan, site: SiteConfig, cluster: str) -> list[dict[str, Any]]:
    return [record for c, obj, record in plan.manifests()
            if c == cluster and obj["kind"] == "NicClusterPolicy" and (obj.get("spec") or {}).get("nvIpam")
            and "state-nv-ipam-cni" in ((obj.get("metadata") or {}).get("annotations") or {}).get(WAIT_FOR, "")]


def _inference_extension_crds(plan: Plan, site: SiteConfig, cluster: str) -> list[dict[str, Any]]:
    # From GitHub, or from the site registry's copy of it (`registry.files`).
    sources = {versions.INFERENCE_EXTENSION_CRDS, Registry.of(site.registry).file(versions.INFERENCE_EXTENSION_CRDS)}
    return [r for r in plan.resources
            if r["type"] == CONFIG_FILE and plan.cluster(r) == cluster and r["inputs"].get("file") in sources]


RUNTIME_CRDS = (
    RuntimeCrds(
        group="cilium.io",
        installer="Cilium's operator, which registers the cilium.io CRDs when it starts (the Cilium release waits for it)",
        source="Cilium 1.18 operator, --skip-crd-creation=false (the default): pkg/k8s/apis/cilium.io/client/register.go",
        ready_after=_cilium_releases,
        fix="make it depend on the cluster's Cilium Helm release (without skipAwait)",
        cluster_scoped=frozenset({
            "CiliumBGPAdvertisement", "CiliumBGPClusterConfig", "CiliumBGPNodeConfig", "CiliumBGPNodeConfigOverride",
            "CiliumBGPPeerConfig", "CiliumCIDRGroup", "CiliumClusterwideEnvoyConfig", "CiliumClusterwideNetworkPolicy",
            "CiliumEndpointSlice", "CiliumExternalWorkload", "CiliumIdentity", "CiliumL2AnnouncementPolicy",
            "CiliumLoadBalancerIPPool", "CiliumNode", "CiliumPodIPPool",
        }),
    ),
    RuntimeCrds(
        group="nv-ipam.nvidia.com",
        installer="the Network Operator, which applies the nv-ipam CRDs when it reconciles a NicClusterPolicy with nvIpam "
        "(state state-nv-ipam-cni)",
        source="Network Operator 26.4 manifests/state-nv-ipam-cni (CRDs applied with the state's objects)",
        ready_after=_nv_ipam_policies,
        fix="make it depend on a NicClusterPolicy with spec.nvIpam that Pulumi waits for until state-nv-ipam-cni is "
        "ready (annotation pulumi.com/waitFor)",
    ),
    RuntimeCrds(
        group="inference.networking.k8s.io",
        installer="the Gateway API Inference Extension's release manifest, which the provider reads when it deploys (a "
        "kubernetes:yaml/v2:ConfigFile of versions.INFERENCE_EXTENSION_CRDS): not rendered offline",
        source="gateway-api-inference-extension v1.5.0 release asset manifests.yaml (Makefile: kustomize build config/crd)",
        ready_after=_inference_extension_crds,
        fix="make it depend on the ConfigFile of versions.INFERENCE_EXTENSION_CRDS on its cluster "
        "(components/routing.py inference_pool_crds)",
    ),
)


@dataclass(frozen=True)
class RuntimeObject:
    """Objects a controller creates by name pattern: `kind`, `namespace` and `name` are shell patterns."""

    kind: str
    namespace: str
    name: str
    creator: str
    source: str

    def matches(self, kind: str, namespace: str | None, name: str) -> bool:
        return (kind == self.kind and fnmatch.fnmatchcase(namespace or "", self.namespace)
                and fnmatch.fnmatchcase(name, self.name))


RUNTIME_OBJECTS = (
    RuntimeObject("ServiceAccount", "*", "default", "kube-controller-manager (serviceaccount controller), in every namespace",
                  "Kubernetes docs: Service Accounts, default service accounts"),
    RuntimeObject("ConfigMap", "*", "kube-root-ca.crt", "kube-controller-manager (root-ca-cert-publisher), in every namespace",
                  "Kubernetes docs: Configure Service Accounts for Pods, kube-root-ca.crt"),
)
"""Objects controllers create that the picture cannot show. Grown only with a source for each entry."""


def created_at_run_time(kind: str, namespace: str | None, name: str) -> RuntimeObject | None:
    return next((entry for entry in RUNTIME_OBJECTS if entry.matches(kind, namespace, name)), None)


def _secret(creator: Placed, namespace: str | None, name: str) -> Placed:
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
    return Placed(creator.cluster, obj, creator.resource, creator.release, namespace)


def _cnpg_secrets(creator: Placed) -> Iterator[Placed]:
    """CloudNativePG 1.30 writes these Secrets for each Cluster it reconciles (docs: "Connecting from an application",
    "Certificates"): `-app` unless bootstrap.initdb.secret is given, `-superuser` with enableSuperuserAccess and no
    superuserSecret, and its CA, server and replication certificates."""
    spec = creator.obj.get("spec") or {}
    names = ["ca", "server", "replication"]
    if not ((spec.get("bootstrap") or {}).get("initdb") or {}).get("secret"):
        names.append("app")
    if spec.get("enableSuperuserAccess") and not spec.get("superuserSecret"):
        names.append("superuser")
    for suffix in names:
        yield _secret(creator, creator.namespace, f"{creator.name}-{suffix}")


ENVOY_CERTGEN_SECRETS = ("envoy-gateway", "envoy", "envoy-rate-limit", "envoy-oidc-hmac")
"""Envoy Gateway 1.9 `envoy-gateway certgen` (the chart's pre-install hook Job): internal/cmd/certgen.go."""


def _envoy_certgen_secrets(creator: Placed) -> Iterator[Placed]:
    pod = ((creator.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    if any(c.get("command") == ["envoy-gateway", "certgen"] for c in pod.get("containers") or []):
        for name in ENVOY_CERTGEN_SECRETS:
            yield _secret(creator, creator.namespace, name)


WEBHOOK_CERTGEN_IMAGE = "kube-webhook-certgen"
"""The image of the Prometheus operator chart's admission hooks (kube-prometheus-stack 88: jkroepke/kube-webhook-certgen)."""


def _webhook_certgen_secrets(creator: Placed) -> Iterator[Placed]:
    """`kube-webhook-certgen create --namespace=NS --secret-name=NAME` (kube-prometheus-stack's pre-install hook Job
    `<name>-admission-create`) writes the webhook's certificate Secret NAME in NS (the tool's README, command `create`)."""
    pod = ((creator.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in pod.get("containers") or []:
        args = [str(a) for a in container.get("args") or []]
        if WEBHOOK_CERTGEN_IMAGE not in str(container.get("image", "")) or "create" not in args:
            continue
        flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        if "secret-name" in flags:
            yield _secret(creator, flags.get("namespace", creator.namespace), flags["secret-name"])


def _job_secrets(creator: Placed) -> Iterator[Placed]:
    yield from _envoy_certgen_secrets(creator)
    yield from _webhook_certgen_secrets(creator)


DERIVED = {
    ("postgresql.cnpg.io", "Cluster"): _cnpg_secrets,
    ("batch", "Job"): _job_secrets,
}
"""(group, kind) -> the objects a controller creates from an object of that kind, with their documentation."""


def derived_objects(placed_objects: Iterable[Placed]) -> Iterator[Placed]:
    for placed in placed_objects:
        make = DERIVED.get((placed.group, placed.kind))
        if make is not None:
            yield from make(placed)
