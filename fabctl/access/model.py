"""What `fabctl access` answers with: a principal (who asks) and the accesses the rendered plan grants it.

Each area (RBAC, network, S3, catalog, gateway, CI) has its own module with one entry point,
`accesses(plan, principal) -> list[Access]`, evaluated offline over a rendered `Plan` (fabctl/render.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("team", "vendor", "user", "pr-author")
"""The seats `--as` takes: `team:T`, `vendor:V`, `user:U`, `pr-author`."""

AREAS = ("rbac", "network", "s3", "catalog", "gateway", "ci")
"""The areas of an answer, in the order the matrix shows them."""


@dataclass(frozen=True)
class Principal:
    """Who asks, resolved from the stack: every identity the seat holds or can act through."""

    kind: str
    """One of KINDS."""
    name: str
    """The team key, vendor key, user name; `pr-author` for a pull-request author."""
    keycloak_groups: tuple[str, ...] = ()
    """The Keycloak groups the seat's people are in (as the tokens' `groups` claim carries them)."""
    rbac_subjects: tuple[tuple[str, str], ...] = ()
    """(kind, name) subjects Kubernetes RBAC sees for the seat's own requests: ("Group", "<prefix>team-x"), ("User", ...)."""
    pod_namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """cluster (provider name) -> namespaces where the seat's own pods run (or where it may create pods): the
    sources of its network reach, and whose Secrets and ServiceAccounts it can use."""
    service_accounts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """cluster -> `system:serviceaccount:<ns>:<name>` identities the seat can act as (it may run pods as them)."""
    minio_users: tuple[str, ...] = ()
    """MinIO users whose keys the seat holds (a team: its training user; a vendor: its own)."""
    polaris_principals: tuple[str, ...] = ()
    """Polaris principals whose credentials the seat holds."""
    source_cidrs: tuple[str, ...] = ()
    """Where the seat connects from when it is outside the clusters (a vendor's declared ranges)."""


@dataclass(frozen=True, order=True)
class Access:
    """One thing a principal can do, and what grants it."""

    area: str
    """One of AREAS."""
    target: str
    """Where: a cluster (provider name), `minio`, `polaris`, the gateway host, `github`."""
    scope: str
    """What within it: a namespace (`*` cluster-wide), `bucket/prefix`, `catalog.namespace.table`, a route's path, a job."""
    allowed: str
    """The verbs, actions or ports allowed, comma-separated and sorted (`create,get`, `s3:GetObject`, `TCP/9000`)."""
    via: str
    """The object(s) that grant it: `RoleBinding team-x/team-members -> ClusterRole fab-team`, a policy's name."""
    escalation: str = ""
    """Non-empty when the grant implies more than it says (pod create => every Secret of the namespace is mountable;
    `bind`, `escalate`, `impersonate`, `nodes/proxy`, `serviceaccounts/token`)."""
