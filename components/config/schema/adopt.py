"""Objects that exist already (imported, never created over) and what the offline deploy check cannot see
on its own (DESIGN section 5; docs/deploy-check.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PrivateAttr

from components.config.fields import DnsLabel, Flag, _Model, matching
from components.config.problems import key_location
from components.config.schema.network import CILIUM_RELEASE
from components.config.schema.storage import BucketName

RELEASE_REF = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


_release_ref = matching(RELEASE_REF, "must be <namespace>/<release name>, for example kube-system/cilium", 117)


ReleaseRef = Annotated[str, AfterValidator(_release_ref)]


class AdoptConfig(_Model):
    """Objects that exist already: imported into the stack (Pulumi `import`) on the next `pulumi up`, whose preview
    shows the import and then what changes on them. Anything that exists and is not listed here is never created
    over: creating it fails. `python -m fabctl import` writes the same list as a `pulumi import` file."""

    buckets: list[BucketName] = Field(default_factory=list, description="Buckets (of `storage.buckets`, or federation replicas) that exist in the object store. Defaults to none.")
    minio_users: list[str] = Field(
        default_factory=list,
        description="MinIO users of the platform (`fab-<engine>`, `fab-replica-<site>`, `fab-remote-<site>-<team>`) that exist; creating one would "
        "reset its secret. Defaults to none.",
    )
    minio_policies: list[str] = Field(
        default_factory=list, description="MinIO policies of the platform (same names as its users) that exist. Defaults to none."
    )
    realm: Flag = Field(False, description="The realm `identity.realm` exists; needs `identity.create_realm`. Defaults to false.")
    namespaces: dict[DnsLabel, list[DnsLabel]] = Field(
        default_factory=dict, description="Cluster key -> namespaces the platform creates there that exist already. Defaults to none."
    )
    helm_releases: dict[DnsLabel, list[ReleaseRef]] = Field(
        default_factory=dict,
        description=f"Cluster key -> `<namespace>/<release>` of releases the platform installs there that exist already, "
        f"such as `{CILIUM_RELEASE}`. Defaults to none.",
    )
    _claimed: set[tuple[str, ...]] = PrivateAttr(default_factory=set)

    def claims(self, kind: str, *key: str) -> bool:
        """Whether the object is declared as existing; recorded, so that `unclaimed()` names declarations nothing matched."""
        declared = {
            "bucket": lambda b: b in self.buckets,
            "minio_user": lambda u: u in self.minio_users,
            "minio_policy": lambda p: p in self.minio_policies,
            "realm": lambda: self.realm,
            "namespace": lambda cluster, name: name in self.namespaces.get(cluster, []),
            "helm_release": lambda cluster, ref: ref in self.helm_releases.get(cluster, []),
        }[kind](*key)
        if declared:
            self._claimed.add((kind, *key))
        return declared

    def declared(self) -> list[tuple[tuple[str | int, ...], tuple[str, ...]]]:
        """(key path, claim) of every declaration."""
        out: list[tuple[tuple[str | int, ...], tuple[str, ...]]] = []
        out += [(("adopt", "buckets", i), ("bucket", b)) for i, b in enumerate(self.buckets)]
        out += [(("adopt", "minio_users", i), ("minio_user", u)) for i, u in enumerate(self.minio_users)]
        out += [(("adopt", "minio_policies", i), ("minio_policy", p)) for i, p in enumerate(self.minio_policies)]
        out += [(("adopt", "realm"), ("realm",))] if self.realm else []
        out += [(("adopt", "namespaces", c, i), ("namespace", c, n)) for c, names in sorted(self.namespaces.items()) for i, n in enumerate(names)]
        out += [(("adopt", "helm_releases", c, i), ("helm_release", c, r)) for c, refs in sorted(self.helm_releases.items()) for i, r in enumerate(refs)]
        return out

    def unclaimed(self) -> list[str]:
        """Declarations that matched no object the program manages, as error lines."""
        return [f"{key_location(path)}: {claim[-1]!r} is not an object the platform manages; remove it or fix the name"
                for path, claim in self.declared() if claim not in self._claimed and claim != ("realm",)]


CHECK_RULES = (
    "order.crd", "order.namespace", "references", "readiness.load-balancer", "readiness.deadlock",
    "scheduling.fit", "scheduling.node-agent", "images.pinned", "charts.pinned", "charts.values", "charts.render",
    "images.mirrored", "images.pull-secret", "charts.mirrored", "downloads.mirrored",
    "settings.read",
    "trust.site-ca",
)
"""The rules of `fabctl check` (docs/deploy-check.md), which `check.accept` names."""

OBJECT_REF = re.compile(r"^[A-Z][A-Za-z0-9]* ([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$")


_object_ref = matching(OBJECT_REF, "must be `Kind namespace/name` or `Kind name` (cluster-scoped), for example `Secret fdc/registry-pull`")


ObjectRef = Annotated[str, AfterValidator(_object_ref)]


class AcceptedFinding(_Model):
    """A `fabctl check` finding the site accepts, with the reason; it is then reported, and no longer an error."""

    rule: Literal[CHECK_RULES] = Field(description="The finding's rule, as `fabctl check` prints it in brackets.")  # type: ignore[valid-type]
    cluster: DnsLabel = Field(description="Key of the cluster the finding is on.")
    object: ObjectRef = Field(description="The object, as the finding names it: `Kind namespace/name` or `Kind name`.")
    reason: str = Field(min_length=10, description="Why the site accepts it, for the reviewers of the next change.")


class CheckConfig(_Model):
    """What `fabctl check` (the offline deploy check) cannot see on its own."""

    existing: dict[DnsLabel, list[ObjectRef]] = Field(
        default_factory=dict,
        description="Cluster key -> objects that exist before the program runs and that its objects use (`Kind "
        "namespace/name` or `Kind name`: a registry pull Secret, a default StorageClass, `CustomResourceDefinition "
        "<plural>.<group>`, the plural exactly as the CRD names it). Defaults to none.",
    )
    accept: list[AcceptedFinding] = Field(default_factory=list, description="Findings accepted with a reason. Defaults to none.")
