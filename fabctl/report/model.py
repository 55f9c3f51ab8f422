"""What the plan report shows, gathered from a render, its site config and the guards' results: plain data the page
template lays out (one place computes every number the page shows, so that tests read them here and in the browser).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from components.config import SiteConfig
from components.vendor_access import vendor_rows
from fabctl.access.matrix import answer
from fabctl.access.model import Access
from fabctl.check import Report as CheckReport
from fabctl.diff import diff
from fabctl.graph import WORLD, components_by_cluster, flows
from fabctl.policy import Violation
from fabctl.render import HELM_RELEASE_TYPE, SITE_WIDE, Plan
from fabctl.report.completion import PhaseCompletion, completion

BASE_PROFILE = "(base config)"
"""The column of a site without profiles: what `pulumi up` applies."""
REDACTED = "[redacted]"
SECRET_MARK = "[secret]"
CREDENTIAL_KEYS = frozenset({
    "password", "passwd", "secret", "secretkey", "secretaccesskey", "accesskey", "privatekey", "clientsecret", "token",
    "authtoken", "bearertoken", "apikey", "credentials", "bcrypthash",
})
"""Input keys (lower case, without `_` and `-`) that name a credential: a text under one is never shown, even where the
program did not mark it secret. A key that names where a credential is kept (`secretKeyRef`, `passwordSecret`,
`passwordKey`) is no credential: reviewers need to see which Secret a pod reads."""
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@", re.IGNORECASE)


def _names_credential(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("_", "").replace("-", "") in CREDENTIAL_KEYS


def redacted(value: Any) -> Any:
    """`value` with every secret hidden: Pulumi secrets (already `[secret]` in a render), any text under a key that
    names a credential, and the password of a URL (`postgres://user:password@host`)."""
    if isinstance(value, dict):
        return {key: (_hide(item) if _names_credential(key) and not isinstance(item, dict | list) else redacted(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf"\g<head>{REDACTED}@", value)
    return value


def _hide(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _hide(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hide(item) for item in value]
    return value if value in (None, SECRET_MARK) or isinstance(value, bool) else REDACTED


def resource_inputs(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource's inputs as the page shows them: secrets redacted, a Secret's data and stringData hidden entirely."""
    inputs = resource["inputs"]
    if inputs.get("kind") == "Secret":
        inputs = {key: (_hide(item) if key in ("data", "stringData") else item) for key, item in inputs.items()}
    return redacted(inputs)


@dataclass(frozen=True)
class ClusterRow:
    key: str
    name: str
    role: str
    components: list[str]
    resources: int


@dataclass(frozen=True)
class PoolRow:
    """One GPU pool of one cluster under one profile."""

    cluster: str
    pool: str
    profile: str
    nodes: int
    gpus: int
    gpu_types: str


@dataclass(frozen=True)
class ModelRow:
    model: str
    profile: str
    weights_per_gpu_gib: float
    kv_bytes_per_token: int
    kv_cache_per_gpu_gib: float
    tensor_parallel: int
    replicas: int
    gpus: int
    concurrent_sequences: int
    """The concurrency the stack asks for (`concurrent_sequences`)."""
    sequences: int
    """Sequences of the mean context the replicas hold in their KV cache together."""

    @property
    def headroom_percent(self) -> int:
        """How much more than the asked concurrency the replicas hold (negative: short of it)."""
        return round(100 * (self.sequences - self.concurrent_sequences) / self.concurrent_sequences)


@dataclass(frozen=True)
class InferencePoolRow:
    cluster: str
    profile: str
    gpus: int
    used: int
    """GPUs the models (and their canaries) take."""


@dataclass(frozen=True)
class QuotaRow:
    team: str
    cluster: str
    profile: str
    gpus: int
    borrowing_limit_gpus: int | None
    """None: no limit."""
    lending_limit_gpus: int | None
    """None: every unused GPU."""
    peer: str | None = None
    """A federated site whose team trains here (`federation.peers`)."""


@dataclass(frozen=True)
class TreeEntry:
    index: int
    target: str
    component: str
    kind: str
    name: str
    logical_name: str
    type: str
    protected: bool
    retained: bool


@dataclass(frozen=True)
class ChangeRow:
    action: str
    """added, changed, replaced, deleted or handed over."""
    logical_name: str
    type: str
    protected: bool
    paths: list[str]


@dataclass
class Guards:
    policies: list[Violation] | None = None
    """None: the pack did not run (`--no-policies`)."""
    policy_count: int = 0
    check: CheckReport | None = None
    """None: the deploy check did not run (`--no-check`)."""
    warnings: list[str] = field(default_factory=list)


@dataclass
class PageData:
    stack: str
    site: str
    domain: str
    phase: int
    active_profile: str | None
    profiles: list[str]
    clusters: list[ClusterRow]
    pools: list[PoolRow]
    flows: list[dict[str, Any]]
    matrix: dict[str, dict[str, list[str]]]
    """source -> destination -> flow labels: who may open a connection to whom."""
    matrix_columns: list[str]
    sources: dict[str, str]
    """A flow source that is no cluster of the site -> what it is: the outside world, or a federated site's range."""
    tree: list[TreeEntry]
    inputs: list[dict[str, Any]]
    models: list[ModelRow]
    inference_pools: list[InferencePoolRow]
    quotas: list[QuotaRow]
    guards: Guards
    changes: list[ChangeRow] | None
    """None: no plan to compare with."""
    compared_with: str | None
    kubernetes_objects: int
    objects_include_charts: bool
    """Whether `kubernetes_objects` counts the objects the Helm releases install (the deploy check rendered them)."""
    releases_not_rendered: int
    """Releases whose objects `kubernetes_objects` lacks, NOT checked: the deploy check had no package of their chart (or
    no Helm), or Helm refused to render them."""
    vendor_grants: list[dict[str, str]] = field(default_factory=list)
    """Every grant of every equipment vendor (`storage.vendors`): Polaris privilege per table or view, a table's S3 folder, the vendor's source ranges."""
    team_access: dict[str, list[Access]] = field(default_factory=dict)
    """Team -> what a member of it can do (`fabctl access --as team:<team>`), by area."""
    completion: list[PhaseCompletion] = field(default_factory=list)
    """Per roadmap phase, what `fabctl verify` will run, what is waived and why, and what would leave it INCOMPLETE."""

    @property
    def dangerous_changes(self) -> list[ChangeRow]:
        """Protected resources that would be replaced or deleted: what makes `fabctl diff` exit 5."""
        return [c for c in self.changes or [] if c.protected and c.action in ("replaced", "deleted")]

    @property
    def resource_count(self) -> int:
        return len(self.tree)

    @property
    def gpu_count(self) -> int:
        return sum(row.gpus for row in self.pools if row.profile == self.profiles[0])


def site_profiles(site: SiteConfig) -> list[str]:
    """The profiles to show, what `pulumi up` applies first: the active profile, else the base config (then the
    profiles, as switches on a schedule or a later `active_profile` apply them)."""
    names = list(site.profiles)
    if site.active_profile not in names:  # `pulumi up` applies the base config
        return [BASE_PROFILE, *names]
    names.remove(site.active_profile)
    return [site.active_profile, *names]


def _profile_arg(profile: str) -> str | None:
    return None if profile == BASE_PROFILE else profile


def cluster_rows(plan: Plan, site: SiteConfig, tree: list[TreeEntry]) -> list[ClusterRow]:
    by_cluster = components_by_cluster(plan)
    counts = Counter(entry.target for entry in tree)
    keys = sorted(site.clusters, key=lambda key: (ROLE_ORDER.get(site.clusters[key].role, 9), key))
    return [ClusterRow(key, site.cluster_name(key), site.clusters[key].role, by_cluster.get(site.cluster_name(key), []),
                       counts[site.cluster_name(key)]) for key in keys]


ROLE_ORDER = {"storage": 0, "compute": 1, "gpu": 2, "gpu-train": 3}


def pool_rows(site: SiteConfig, profiles: list[str]) -> list[PoolRow]:
    rows = []
    for cluster, spec in sorted(site.gpu.items()):
        moved = {pool for profile in site.profiles.values() for pool in profile.node_pools.get(cluster, {}).values()}
        for profile in profiles:
            for pool in sorted({node.pool for node in spec.nodes.values()} | moved):
                nodes = [node for name, node in spec.nodes.items() if site.node_pool(cluster, name, _profile_arg(profile)) == pool]
                types = Counter(node.gpu_type for node in nodes)
                rows.append(PoolRow(cluster, pool, profile, len(nodes), sum(node.gpus for node in nodes),
                                    ", ".join(f"{count} x {name}" for name, count in sorted(types.items()))))
    return rows


def flow_matrix(plan: Plan, site: SiteConfig) -> tuple[dict[str, dict[str, list[str]]], list[str]]:
    """Source -> destination -> `flow port/protocol` labels, and the destinations in column order."""
    matrix: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, flow in sorted(flows(plan).items()):
        label = f"{name} {flow['port']}/{flow.get('protocol', 'TCP')}"
        if flow.get("to_cidrs"):  # egress out of the site, to these addresses only
            label += f" to {', '.join(flow['to_cidrs'])}"
        for source in [*flow.get("from", []), *flow.get("from_cidrs", [])]:
            for dest in flow["to"]:
                matrix[source][dest].append(label)
    columns = sorted(site.clusters, key=lambda key: (ROLE_ORDER.get(site.clusters[key].role, 9), key))
    if any(WORLD in dests for dests in matrix.values()):
        columns.append(WORLD)
    rows = [WORLD] if WORLD in matrix else []
    rows += [key for key in columns if key in matrix]
    rows += sorted(key for key in matrix if key not in rows)
    return {source: dict(matrix[source]) for source in rows}, columns


def outside_sources(site: SiteConfig) -> dict[str, str]:
    """What each source of flows outside the site's clusters is: the world, or a range of a federated site."""
    named = {WORLD: "outside the site"}
    for peer, cidrs in sorted(site.federation.ranges.items()):
        named.update({str(cidr): f"{peer} (federated site)" for cidr in cidrs})
    return named


def flow_list(plan: Plan) -> list[dict[str, Any]]:
    out = []
    for name, flow in sorted(flows(plan).items()):
        pod_port = flow.get("target_port", flow["port"])
        out.append({"name": name, "from": [*flow.get("from", []), *flow.get("from_cidrs", [])], "to": list(flow["to"]),
                    "to_cidrs": list(flow.get("to_cidrs", [])),
                    "port": f"{flow['port']}" + (f" ({pod_port})" if pod_port != flow["port"] else "") + f"/{flow.get('protocol', 'TCP')}",
                    "target": flow.get("target", "pods"), "description": flow.get("description", "")})
    return out


def _kind(resource: dict[str, Any]) -> str:
    inputs = resource["inputs"]
    if resource["type"] == HELM_RELEASE_TYPE:
        return "HelmRelease"
    if resource["type"].startswith("pulumi:providers:"):
        return f"Provider {resource['type'].rsplit(':', 1)[-1]}"
    return str(inputs.get("kind") or resource["type"].rsplit(":", 1)[-1])


def _display_name(resource: dict[str, Any]) -> str:
    inputs = resource["inputs"]
    meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
    if meta.get("name"):
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
    if resource["type"] == HELM_RELEASE_TYPE and inputs.get("name"):
        return f"{inputs.get('namespace')}/{inputs['name']}" if inputs.get("namespace") else str(inputs["name"])
    return resource["name"]


def resource_tree(plan: Plan) -> tuple[list[TreeEntry], list[dict[str, Any]]]:
    """Every resource the stack registers (components are the tree's branches, not entries), by target and component,
    and each one's inputs with secrets redacted (by entry index)."""
    entries, inputs = [], []
    for resource in plan.resources:
        if not resource["custom"]:
            continue
        top = plan.component(resource)
        entries.append(TreeEntry(
            index=len(entries), target=plan.target(resource) or SITE_WIDE,
            component=f"{top['name']} ({top['type'].rsplit(':', 1)[-1]})" if top else "stack",
            kind=_kind(resource), name=_display_name(resource), logical_name=resource["name"], type=resource["type"],
            protected=bool(resource.get("protect")), retained=bool(resource.get("retain_on_delete")),
        ))
        inputs.append(resource_inputs(resource))
    order = sorted(entries, key=lambda e: (e.target != SITE_WIDE, e.target, e.component, e.kind, e.name))
    return [TreeEntry(**{**e.__dict__, "index": i}) for i, e in enumerate(order)], [inputs[e.index] for e in order]


def model_rows(site: SiteConfig, profiles: list[str]) -> tuple[list[ModelRow], list[InferencePoolRow]]:
    if site.inference is None:
        return [], []
    models, pools = [], []
    for profile in profiles:
        sized = site.model_capacity(_profile_arg(profile))
        used = 0
        for name, size in sized.items():
            model = site.inference.models[name]
            canary = model.canary.replicas * size.tensor_parallel if model.canary is not None else 0
            used += size.gpus + canary
            models.append(ModelRow(name, profile, round(size.weights_per_gpu_gib, 1), size.kv_bytes_per_token,
                                   round(size.kv_budget_per_gpu_gib, 1), size.tensor_parallel, size.replicas, size.gpus,
                                   model.concurrent_sequences, size.sequences_per_replica * size.replicas))
        nodes = site.pool_nodes(site.inference.cluster, "inference", _profile_arg(profile))
        pools.append(InferencePoolRow(site.inference.cluster, profile, sum(node.gpus for node in nodes.values()), used))
    return models, pools


def quota_rows(site: SiteConfig, profiles: list[str]) -> list[QuotaRow]:
    rows = []
    for profile in profiles:
        for team, clusters in site.team_quotas(_profile_arg(profile)).items():
            for cluster, quota in clusters.items():
                rows.append(QuotaRow(team, cluster, profile, quota.gpus, quota.borrowing_limit_gpus, quota.lending_limit_gpus))
        for remote in site.remote_teams(linked_only=True).values():  # as the program sets them up
            for cluster, quota in remote.quotas.items():
                rows.append(QuotaRow(remote.team, cluster, profile, quota.gpus, quota.borrowing_limit_gpus,
                                     quota.lending_limit_gpus, peer=remote.peer))
    return rows


def config_warnings(site: SiteConfig, models: list[ModelRow]) -> list[str]:
    """What the config accepts but a reviewer should see: a profile that serves a model short of the concurrency it
    asks for, and federated peers whose teams are set up only once the peer is linked."""
    out = [
        f"{row.model} under {row.profile}: {row.replicas} replicas hold {row.sequences} sequences of the mean context, "
        f"short of concurrent_sequences {row.concurrent_sequences} ({row.headroom_percent}%): requests queue at peak"
        for row in models if row.sequences < row.concurrent_sequences
    ]
    for peer, spec in sorted(site.federation.peers.items()):
        if spec.remote_training and peer not in site.federation.linked:
            out.append(f"federation.peers.{peer}: its teams' quotas ({', '.join(sorted(spec.remote_training))}) take effect "
                       f"once {peer} is in federation.linked")
    return out


def page_data(plan: Plan, site: SiteConfig, guards: Guards, before: Plan | None = None, compared_with: str | None = None,
              kubernetes_objects: int | None = None) -> PageData:
    """Everything the page shows; with `before` (a render to compare with, named `compared_with`), what changes."""
    profiles = site_profiles(site)
    tree, inputs = resource_tree(plan)
    matrix, columns = flow_matrix(plan, site)
    models, inference_pools = model_rows(site, profiles)
    guards = replace(guards, warnings=[*config_warnings(site, models), *guards.warnings])
    return PageData(
        stack=plan.stack, site=site.name, domain=site.domain, phase=site.phase, active_profile=site.active_profile,
        profiles=profiles, clusters=cluster_rows(plan, site, tree), pools=pool_rows(site, profiles), flows=flow_list(plan),
        matrix=matrix, matrix_columns=columns, sources=outside_sources(site), tree=tree, inputs=inputs, models=models, inference_pools=inference_pools,
        quotas=quota_rows(site, profiles), guards=guards, changes=change_rows(before, plan) if before is not None else None,
        compared_with=compared_with,
        kubernetes_objects=kubernetes_objects if kubernetes_objects is not None else len(plan.manifests()),
        objects_include_charts=kubernetes_objects is not None,
        releases_not_rendered=guards.check.unchecked if guards.check is not None else 0,
        vendor_grants=vendor_rows(site.storage),
        team_access={team: answer(plan, f"team:{team}", site) for team in sorted(site.teams)},
        completion=completion(site),
    )


def change_rows(before: Plan, after: Plan) -> list[ChangeRow]:
    """What `fabctl diff` finds between two renders, resource by resource: the components (and the stack) that group
    them are left out, as they are in the resource tree, so that a new stack adds as many resources as it has."""
    result = diff(before, after)
    custom = {r["urn"] for plan in (before, after) for r in plan.resources if r["custom"]}
    rows = []
    for action, changes in (("replaced", result.replaced), ("deleted", result.removed), ("changed", result.changed),
                            ("added", result.added), ("handed over", result.handed_over)):
        rows += [ChangeRow(action, c.urn.rsplit("::", 1)[-1], c.type, c.protected, list(c.paths)) for c in changes if c.urn in custom]
    return rows
