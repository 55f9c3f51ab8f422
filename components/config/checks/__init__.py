"""Cross-field checks of a site, run once the whole site is parsed (DESIGN section 4, "Config first":
overlapping CIDRs, duplicate cluster ids or ASNs, a MultiKueue manager listed as its own worker, quotas
that exceed the nodes).

Each check yields (key path, message), the message naming the value and the fix. One module per domain;
`site_problems` runs them in stages, in a fixed order, which is the order of the error lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.checks.acceptance import acceptance_problems
from components.config.checks.addresses import host_address_problems, pod_range_problems, vip_edge_problems
from components.config.checks.adoption import adoption_problems, check_problems
from components.config.checks.catalogs import external_catalog_problems, trino_reader_problems
from components.config.checks.compute import compute_problems
from components.config.checks.credentials import credential_flow_problems
from components.config.checks.federation import federation_problems
from components.config.checks.flows import service_flow_problems
from components.config.checks.gitops import gitops_problems
from components.config.checks.gpu import gpu_problems
from components.config.checks.names import name_problems
from components.config.checks.network import (
    cluster_problems,
    encryption_problems,
    flow_problems,
    overlap_problems,
    role_problems,
    vip_problems,
)
from components.config.checks.notebooks import notebooks_problems
from components.config.checks.observability import observability_problems
from components.config.checks.phases import phase_problems
from components.config.checks.profiles import schedule_problems
from components.config.checks.registry import registry_problems
from components.config.checks.storage import storage_problems
from components.config.checks.training import training_problems
from components.config.checks.vendors import vendor_problems
from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews

STAGES = (
    (role_problems, cluster_problems, encryption_problems, name_problems),
    (overlap_problems,),
    (pod_range_problems, host_address_problems, vip_problems, vip_edge_problems),
    (flow_problems, service_flow_problems),
    (credential_flow_problems,),
    (storage_problems, gpu_problems, training_problems, schedule_problems, compute_problems, gitops_problems,
     federation_problems, adoption_problems, check_problems, acceptance_problems, observability_problems, notebooks_problems,
     registry_problems, vendor_problems, external_catalog_problems, trino_reader_problems),
    (phase_problems,),
)
"""The checks in stages: the clusters and their pools, disjoint ranges, addresses in them, the flows between the
clusters, who holds credentials for them (once the flows are sound), each domain, then the roadmap phase of what the site enables (on a site that is otherwise sound). A stage runs only when the ones before it found nothing: its checks build on what those
checked, and one mistake (a pool that overlaps a pod range) is then reported once, not again as every VIP the pool
no longer holds."""


def site_problems(site: SiteViews) -> Iterator[Problem]:
    """The cross-field problems of the site: those of the first stage that has any, rule by rule."""
    for stage in STAGES:
        problems = [problem for rule in stage for problem in rule(site)]
        if problems:
            yield from problems
            return
