"""Providers of a site (DESIGN section 4, "Providers"): one kubernetes Provider per cluster, MinIO and Keycloak, and the
references components hold of the site (`SiteRef`) and of the clusters they run on (`ClusterRef`).

Credentials never come from config: kubeconfig contexts hold the cluster credentials, and the MinIO
and Keycloak providers read theirs from their standard environment variables (MINIO_USER and
MINIO_PASSWORD; KEYCLOAK_CLIENT_SECRET), so the stack files stay secret-free and render offline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pulumi
import pulumi_keycloak as keycloak
import pulumi_kubernetes as k8s
import pulumi_minio as minio

from components.config import SiteConfig
from components.registry import UPSTREAM, Registry


@dataclass(frozen=True)
class SiteRef:
    """The few site-wide values components name: the site's name, its DNS domain and its CA bundle."""

    name: str
    """Site name; it prefixes every cluster name and names the site to its federated peers."""
    domain: str
    """Internal DNS domain of the site's endpoints."""
    ca_bundle_pem: str | None = None
    """PEM certificates of the site's CA (config `ca_bundle`), which clients of its endpoints trust; None for the system's."""

    @classmethod
    def of(cls, site: SiteConfig) -> SiteRef:
        return cls(name=site.name, domain=site.domain, ca_bundle_pem=site.ca_bundle_pem())


@dataclass(frozen=True)
class ClusterRef:
    """One cluster as a component uses it: its config key, its name (`<site>-<key>`, Cilium's cluster name), its role
    and the provider that manages it."""

    key: str
    name: str
    role: str
    provider: k8s.Provider
    registry: Registry = UPSTREAM
    """Where the cluster's charts, images and release files come from (config `registry`)."""


@dataclass(frozen=True)
class NamespaceRef:
    """A namespace on a cluster, as another component delivers into it: what it sends waits for `resource`."""

    cluster: ClusterRef
    name: str
    resource: pulumi.Resource
    """The Namespace (or whatever makes it exist)."""


@dataclass(frozen=True)
class SiteProviders:
    """The providers of one site, by cluster key for Kubernetes."""

    kubernetes: dict[str, k8s.Provider]
    minio: minio.Provider
    keycloak: keycloak.Provider
    clusters: dict[str, ClusterRef]

    def for_cluster(self, key: str) -> k8s.Provider:
        return self.kubernetes[key]

    def cluster(self, key: str) -> ClusterRef:
        return self.clusters[key]

    def with_role(self, *roles: str) -> list[ClusterRef]:
        """The clusters of these roles, in config-key order."""
        return [ref for key, ref in sorted(self.clusters.items()) if ref.role in roles]


def site_providers(site: SiteConfig, registry: Registry = UPSTREAM) -> SiteProviders:
    """Create every provider of the site; logical names are `<site>-<cluster>`, `<site>-minio`, `<site>-keycloak`."""
    clusters = {
        key: k8s.Provider(
            site.cluster_name(key),
            context=site.kubeconfig_context(key),
            # Server-side apply lets operators (Cilium, GPU Operator) co-own objects without fights.
            enable_server_side_apply=True,
        )
        for key in sorted(site.clusters)
    }
    object_store = minio.Provider(
        f"{site.name}-minio",
        minio_server=site.minio.server,
        minio_ssl=site.minio.ssl,
        minio_region=site.minio.region,
        # A path the provider reads, relative to the project directory (where Pulumi runs it), so that it is the
        # same on every machine that deploys the stack.
        minio_cacert_file=site.ca_bundle,
    )
    identity = keycloak.Provider(
        f"{site.name}-keycloak",
        url=site.keycloak.url,
        realm=site.keycloak.admin_realm,
        # Previews in CI sign in with a read-only client of their own (docs/ci.md).
        client_id=os.environ.get("KEYCLOAK_CLIENT_ID") or site.keycloak.client_id,
        root_ca_certificate=site.ca_bundle_pem(),
    )
    refs = {key: ClusterRef(key, site.cluster_name(key), site.clusters[key].role, provider, registry)
            for key, provider in clusters.items()}
    return SiteProviders(kubernetes=clusters, minio=object_store, keycloak=identity, clusters=refs)

