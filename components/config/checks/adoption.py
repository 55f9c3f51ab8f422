"""Cross-field checks of what exists already: the CA bundle, adopted objects, Cilium on a running storage
cluster, and the deploy check's inputs (DESIGN section 5; docs/deploy-check.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.checks.registry import pem_file_problems
from components.config.problems import Problem
from components.config.schema.network import CILIUM_RELEASE
from components.config.views import replica_bucket

if TYPE_CHECKING:
    from components.config.views import SiteViews


def adoption_problems(site: SiteViews) -> Iterator[Problem]:
    adopt = site.adopt
    if site.ca_bundle is not None:
        yield from pem_file_problems(site.ca_bundle, ("ca_bundle",))
    declared = adopt.declared()
    for i, (path, claim) in enumerate(declared):
        if claim in [c for _, c in declared[:i]]:
            yield path, f"{claim[-1]!r} is listed twice"
    replicas = {replica_bucket(site.name, peer) for peer in site.federation.peers}
    for i, bucket in enumerate(adopt.buckets):
        if bucket not in site.storage.buckets and bucket not in replicas:
            yield ("adopt", "buckets", i), f"{bucket!r} is not a bucket of storage.buckets or a federation replica bucket"
    for field in ("minio_users", "minio_policies"):
        for i, name in enumerate(getattr(adopt, field)):
            if not name.startswith("fab-"):
                yield ("adopt", field, i), f"{name!r} is not a platform name: the platform's MinIO users and policies are fab-<engine>, fab-replica-<site> and fab-remote-<site>-<team>"
    if adopt.realm and not site.identity.create_realm:
        yield ("adopt", "realm"), "true needs identity.create_realm: true; a realm the platform does not manage is only referenced"
    for field in ("namespaces", "helm_releases"):
        for cluster in sorted(getattr(adopt, field)):
            if cluster not in site.clusters:
                yield ("adopt", field, cluster), f"{cluster!r} is not a cluster of this site; clusters: {', '.join(sorted(site.clusters))}"
    store = site.storage.object_store
    for key in site.keys_with_role("storage"):
        if site.clusters[key].cilium.managed and not store.install and CILIUM_RELEASE not in adopt.helm_releases.get(key, []):
            yield ("clusters", key, "cilium", "managed"), (
                f"true (the default) would install Cilium over the CNI of a running cluster (storage.object_store.install "
                f"is false: its AIStor is adopted); adopt its Cilium release with adopt.helm_releases.{key}: "
                f"[{CILIUM_RELEASE}], or set managed: false where Cilium is installed by other means"
            )


def check_problems(site: SiteViews) -> Iterator[Problem]:
    clusters = ", ".join(sorted(site.clusters))
    for cluster in sorted(site.check.existing):
        if cluster not in site.clusters:
            yield ("check", "existing", cluster), f"{cluster!r} is not a cluster of this site; clusters: {clusters}"
    for i, accepted in enumerate(site.check.accept):
        if accepted.cluster not in site.clusters:
            yield ("check", "accept", i, "cluster"), f"{accepted.cluster!r} is not a cluster of this site; clusters: {clusters}"
        if (accepted.rule, accepted.cluster, accepted.object) in [(a.rule, a.cluster, a.object) for a in site.check.accept[:i]]:
            yield ("check", "accept", i), f"{accepted.rule} {accepted.cluster} {accepted.object!r} is accepted twice"
