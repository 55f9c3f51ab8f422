"""The stack's own config, which the Pulumi CLI hands to the pack: where a rule's allow-list is the stack's, not the pack's.

The CLI starts a policy pack with the stack's config in PULUMI_CONFIG, as it starts the program (`constructEnv` in
pulumi's sdk/go/common/resource/plugin/analyzer_plugin.go), and the policy SDK hands it to `pulumi.Config` before each
analysis (`_configure_runtime_settings`). The pack reads the stack file's `fab-platform:site` object as written: it
cannot import the config model (it runs in its own process), and it needs only a few keys, each read defensively.
What is absent allows nothing.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pulumi

PROJECT, SITE = "fab-platform", "site"
"""The program's config key, `fab-platform:site`."""
NO_CONFIG = "the stack's config did not reach the policy pack, which the Pulumi CLI and fabctl pass in PULUMI_CONFIG"


def site_config() -> dict[str, Any] | None:
    """The stack's `fab-platform:site` object, or None when the pack was started without it."""
    raw = pulumi.Config(PROJECT).get(SITE)
    if raw is None:
        return None
    value = json.loads(raw)
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class HostAccess:
    """Where one cluster allows host access (host namespaces, privileged containers, Pod Security `privileged`): the
    namespaces its `clusters.<key>.host_network_namespaces` lists in the stack's config, and nowhere else."""

    cluster: str
    """The cluster, by its provider's name (`<site>-<cluster key>`)."""
    namespaces: tuple[str, ...]
    source: str
    """The key the list comes from."""
    note: str = ""
    """Why the list is empty although the stack may list namespaces: the config or the cluster is missing."""

    def allows(self, namespace: str) -> bool:
        return namespace in self.namespaces

    def describe(self) -> str:
        """The allow-list as a message states it: `clusters.gpu.host_network_namespaces (gpu-operator, ...)`."""
        return f"{self.source} ({', '.join(self.namespaces) or 'none'}{'; ' + self.note if self.note else ''})"


def host_access(cluster: str) -> HostAccess:
    """The host-access allow-list of `cluster` (a provider name) from the stack's config; empty where the config does
    not name the cluster, or did not reach the pack."""
    anywhere = "the stack's host_network_namespaces"
    site = site_config()
    if site is None:
        return HostAccess(cluster, (), anywhere, NO_CONFIG)
    clusters = site.get("clusters") if isinstance(site.get("clusters"), dict) else {}
    for key, entry in clusters.items():
        if f"{site.get('name')}-{key}" == cluster:
            listed = entry.get("host_network_namespaces") if isinstance(entry, dict) else None
            names = tuple(n for n in listed if isinstance(n, str)) if isinstance(listed, list) else ()
            return HostAccess(cluster, names, f"clusters.{key}.host_network_namespaces")
    return HostAccess(cluster, (), anywhere, f"{cluster} is not a cluster of site {site.get('name')}" if cluster else
                      "the resource is on no cluster")


def routes_from_git() -> str | None:
    """The cluster (a provider name) whose model routes Argo CD applies from the serving repository
    (`inference.delivery: argocd`), or None: then every route of the site is in the plan."""
    site = site_config()
    inference = site.get("inference") if site is not None else None
    if not isinstance(inference, dict) or inference.get("delivery") != "argocd":
        return None
    return f"{site.get('name')}-{inference.get('cluster')}"


@dataclass(frozen=True)
class ModelReplication:
    """The consumers the stack's config copies its models to (`federation.consumers.<site>.replicate_models: true`, a warm
    standby there): the only places models may go. No other class is ever allowed by config; gold always is."""

    consumers: tuple[str, ...]
    note: str = ""
    """Why the list is empty although the stack may name consumers: the config is missing."""

    def allows(self, consumer: Any) -> bool:
        return consumer in self.consumers

    def describe(self) -> str:
        """The allow-list as a message states it: `federation.consumers.<site>.replicate_models: true (site-b)`."""
        return (f"federation.consumers.<site>.replicate_models: true ({', '.join(self.consumers) or 'none'}"
                f"{'; ' + self.note if self.note else ''})")


def model_replication() -> ModelReplication:
    """The consumers the stack replicates its models to; none where the config does not say so, or did not reach the pack."""
    site = site_config()
    if site is None:
        return ModelReplication((), NO_CONFIG)
    federation = site.get("federation") if isinstance(site.get("federation"), dict) else {}
    consumers = federation.get("consumers") if isinstance(federation.get("consumers"), dict) else {}
    return ModelReplication(tuple(sorted(
        name for name, spec in consumers.items() if isinstance(spec, dict) and spec.get("replicate_models") is True
    )))


DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "oracle": 1521, "sqlserver": 1433}
"""The default port of each connector of `compute.trino.external_catalogs` (the config model's EXTERNAL_CONNECTORS, which
the pack cannot import; tests/policies/test_external_catalog_egress.py keeps the two equal)."""


@dataclass(frozen=True)
class ExternalDatabase:
    """One external catalog's database as the stack declares it: the ranges Trino's pods may reach, on one TCP port."""

    catalog: str
    cidrs: frozenset[str]
    port: int

    def describe(self) -> str:
        return f"{self.catalog}: {', '.join(sorted(self.cidrs))} on {self.port}"


def external_databases() -> list[ExternalDatabase] | None:
    """The databases of Trino's external catalogs in the stack's config (none while Trino is off), or None when the
    config did not reach the pack."""
    site = site_config()
    if site is None:
        return None
    compute = site.get("compute") if isinstance(site.get("compute"), dict) else {}
    trino = compute.get("trino") if isinstance(compute.get("trino"), dict) else {}
    catalogs = trino.get("external_catalogs") if isinstance(trino.get("external_catalogs"), dict) else {}
    if trino.get("enabled") is False:
        return []
    found = []
    for name, catalog in sorted(catalogs.items()):
        if not isinstance(catalog, dict) or not isinstance(catalog.get("cidrs"), list):
            continue
        port = catalog.get("port") or DATABASE_PORTS.get(str(catalog.get("connector")))
        if isinstance(port, int):
            found.append(ExternalDatabase(name, frozenset(str(c) for c in catalog["cidrs"]), port))
    return found


def keycloak_endpoint() -> tuple[str, str] | None:
    """The host and port of the site's Keycloak (`keycloak.url`), the one outside service Trino reaches by name (its
    users' sign-in); None when the config does not name it."""
    site = site_config() or {}
    keycloak = site.get("keycloak") if isinstance(site.get("keycloak"), dict) else {}
    url = urllib.parse.urlsplit(str(keycloak.get("url") or ""))
    if not url.hostname:
        return None
    return url.hostname, str(url.port or (443 if url.scheme == "https" else 80))


def in_site_ranges() -> frozenset[str]:
    """The ranges a world flow's source namespace (Trino's) may also reach by address, as the stack's config declares them:
    every cluster's internal LB pools (the VIPs of S3 and Polaris) and the federated peers' ranges (`federation.ranges`)."""
    site = site_config() or {}
    found: set[str] = set()
    clusters = site.get("clusters") if isinstance(site.get("clusters"), dict) else {}
    for cluster in clusters.values():
        pools = cluster.get("lb_pools") if isinstance(cluster, dict) and isinstance(cluster.get("lb_pools"), dict) else {}
        for pool in pools.values():
            if isinstance(pool, dict) and pool.get("visibility", "internal") == "internal" and isinstance(pool.get("cidrs"), list):
                found.update(str(c) for c in pool["cidrs"])
    federation = site.get("federation") if isinstance(site.get("federation"), dict) else {}
    peers = federation.get("peers") if isinstance(federation.get("peers"), dict) else {}
    ranges = federation.get("ranges") if isinstance(federation.get("ranges"), dict) else {}
    for peer in peers:
        if isinstance(ranges.get(peer), list):
            found.update(str(c) for c in ranges[peer])
    return frozenset(found)
