"""The deploy critical path of a render: the longest chain of resources Pulumi must create one after another.

An edge runs from a resource to everything it waits for: its explicit `depends_on`, the resources its
inputs come from, its parent and its provider. A custom resource costs one step; components, providers
and reads cost none (nothing is created in a cluster for them), so the length counts deployed objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabctl.render import Plan


def waits_for(resource: dict[str, Any]) -> set[str]:
    edges = set(resource["dependencies"])
    for urns in resource["property_dependencies"].values():
        edges.update(urns)
    for key in ("parent", "provider"):
        if resource.get(key):
            edges.add(resource[key])
    return edges


def steps(resource: dict[str, Any]) -> int:
    deployed = resource["custom"] and not resource.get("read") and not resource["type"].startswith("pulumi:providers:")
    return 1 if deployed else 0


@dataclass(frozen=True)
class Path:
    urns: tuple[str, ...]
    """The chain, first created first; only deployed resources (each one step)."""

    @property
    def length(self) -> int:
        return len(self.urns)


def critical_path(plan: Plan) -> Path:
    """The longest chain; ties go to the chain that ends on the resource registered first."""
    longest: dict[str, int] = {}
    previous: dict[str, str | None] = {}
    for resource in plan.resources:  # registration order: everything waited for is registered earlier
        urn = resource["urn"]
        before = max((d for d in waits_for(resource) if d in longest), key=lambda d: longest[d], default=None)
        longest[urn] = steps(resource) + (longest[before] if before else 0)
        previous[urn] = before
    end = max(longest, key=lambda u: longest[u], default=None)
    chain: list[str] = []
    while end is not None:
        if steps(plan.by_urn[end]):
            chain.append(end)
        end = previous[end]
    return Path(tuple(reversed(chain)))


def chain_exists(plan: Plan, urns: list[str]) -> bool:
    """True if each resource waits, directly or through components and providers, for the one before it."""
    for before, after in zip(urns, urns[1:]):
        if not _reaches(plan, after, before):
            return False
    return True


def _reaches(plan: Plan, start: str, goal: str) -> bool:
    seen, stack = set(), [start]
    while stack:
        urn = stack.pop()
        for dep in waits_for(plan.by_urn[urn]) if urn in plan.by_urn else ():
            if dep == goal:
                return True
            if dep not in seen and not steps(plan.by_urn.get(dep, {"custom": False, "type": ""})):
                seen.add(dep)
                stack.append(dep)
    return False
