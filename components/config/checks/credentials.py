"""Cross-field check of data credentials: every cluster that receives S3 or Polaris credentials is a source of
the matching flow (DESIGN section 2, network rules: compute and GPU pods reach the AIStor S3 port and the
Polaris REST port, everything else between clusters is denied). Without it the keys would be delivered to
pods whose every call to the endpoint the default-deny drops.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.checks.network import sound_flows
from components.config.problems import Problem
from components.config.views import POLARIS_FLOW, S3_FLOW, credential_holders, default_flows

if TYPE_CHECKING:
    from components.config.views import SiteViews

CREDENTIALS = {S3_FLOW: "S3", POLARIS_FLOW: "Polaris"}
"""The credentials each flow is for, as the messages name them."""


def credential_flow_problems(site: SiteViews) -> Iterator[Problem]:
    table = site.flows if site.flows is not None else default_flows(site)
    # The endpoints run on the storage cluster: its own holders reach them without crossing clusters.
    storage = set(site.keys_with_role("storage"))
    for name, holders in credential_holders(site).items():
        remote = {cluster: grantees for cluster, grantees in holders.items() if cluster not in storage}
        if not remote:
            continue
        kind = CREDENTIALS[name]
        flow = table.get(name)
        if flow is None:
            clusters = sorted(remote)
            yield ("flows",), (
                f"has no {name!r} flow, but {'clusters' if len(clusters) > 1 else 'cluster'} {_and(clusters)} "
                f"{'receive' if len(clusters) > 1 else 'receives'} {kind} credentials; add flows.{name} from them to the storage cluster"
            )
            continue
        if site.flows is not None and name not in sound_flows(site):
            continue  # refused by the flow checks; judged again once they accept it
        missing = [(cluster, grantees) for cluster, grantees in sorted(remote.items()) if cluster not in flow.sources]
        if missing:
            cluster, grantees = missing[0]
            others = f" (and {_and([c for c, _ in missing[1:]])})" if len(missing) > 1 else ""
            yield ("flows", name, "from"), (
                f"{flow.sources!r} leaves out cluster {cluster!r}{others}, {_whose(grantees)} {kind} credentials; add it"
            )


def _whose(grantees: list[str]) -> str:
    """`whose team namespaces receive`, `whose trino namespace receives`: each grantee has its namespace, training one per team."""
    named = [g for g in grantees if g not in ("training", "remote-training")]
    parts = [f"{_and(named)} namespace{'s' if len(named) > 1 else ''}"] if named else []
    parts += ["team namespaces"] if "training" in grantees else []
    parts += ["remote teams' namespaces"] if "remote-training" in grantees else []
    plural = len(parts) > 1 or parts[0].endswith("s")
    return f"whose {' and '.join(parts)} {'receive' if plural else 'receives'}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
