"""The deploy critical path of a render: the longest chain of resources Pulumi must create one after another.

An edge runs from a resource to everything it waits for: its explicit `depends_on`, the resources its
inputs come from, its parent and its provider. `critical_path` counts steps: a custom resource costs one;
components, providers and reads cost none (nothing is created in a cluster for them). `weighted_path`
weights each step by what Pulumi waits for on it (`weight`), and `needless_waits` lists the explicit
`depends_on` edges whose removal would shorten that path: each is a wait to justify by a runtime need
or to remove. `python -m benchmarks.critical_path <stack>` prints both for a stack file's render.
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


# Weights: what the pinned pulumi-kubernetes provider (and the MinIO and Keycloak providers) wait for before they report
# a resource created, in rough units of a plain create. They rank waits, they are not timings.
HELM_RELEASE_WEIGHT = 10
"""`kubernetes:helm.sh/v3:Release`: installs a chart and, unless `skipAwait`, waits until every object it made is ready
(its Deployments and DaemonSets rolled out, its Jobs done): image pulls, starts and probes of a whole application."""
WORKLOAD_WEIGHT = 5
"""A Deployment, StatefulSet or DaemonSet: the provider waits for the rollout (every replica ready), and a batch Job: it
waits for completion. A CR with a `pulumi.com/waitFor` annotation waits for its condition, an operator's rollout."""
LOAD_BALANCER_WEIGHT = 2
"""A Service of type LoadBalancer: waits for the address LB-IPAM assigns (and, like every Service with a selector, for an
endpoint; its pods are another resource's wait, started in parallel, so this model does not charge them here)."""
PLAIN_WEIGHT = 1
"""Anything else created remotely: a ConfigMap, Secret, namespace, RBAC object, ClusterIP Service, a custom resource
without await (the provider reports it once the API server accepted it), a MinIO or Keycloak object (one API call)."""
LOCAL_WEIGHT = 0
"""Computed by the engine without any remote call: random values, generated keys, and components, providers and reads."""

WORKLOAD_TYPES = frozenset({
    "kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:Job",
})
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
LOCAL_PACKAGES = ("random:", "tls:")
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"


def weight(resource: dict[str, Any]) -> int:
    """What Pulumi waits for on `resource` once what it depends on exists (the constants above)."""
    type_ = resource["type"]
    if not steps(resource) or type_.startswith(LOCAL_PACKAGES):
        return LOCAL_WEIGHT
    inputs = resource.get("inputs") or {}
    if type_ == HELM_RELEASE_TYPE:
        return LOCAL_WEIGHT if inputs.get("skipAwait") else HELM_RELEASE_WEIGHT
    if type_ in WORKLOAD_TYPES or WAIT_FOR_ANNOTATION in ((inputs.get("metadata") or {}).get("annotations") or {}):
        return WORKLOAD_WEIGHT
    if type_ == "kubernetes:core/v1:Service" and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
        return LOAD_BALANCER_WEIGHT
    return PLAIN_WEIGHT


def explicit_waits(resource: dict[str, Any]) -> set[str]:
    """The resources `resource` waits for only because of `depends_on`: not an input's source, its parent or provider."""
    implied = {urn for urns in resource["property_dependencies"].values() for urn in urns}
    implied.update(resource[key] for key in ("parent", "provider") if resource.get(key))
    return set(resource["dependencies"]) - implied


@dataclass(frozen=True)
class WeightedPath:
    urns: tuple[str, ...]
    """The chain, first created first; only resources that weigh something."""
    length: int
    """The sum of their weights."""


def weighted_path(plan: Plan, without: tuple[str, str] | None = None) -> WeightedPath:
    """The heaviest chain, with the edge `without` (waiter, waited-for) left out; ties go to the chain met first."""
    longest, previous = _longest(plan, without)
    end = max(longest, key=lambda u: longest[u], default=None)
    length = longest[end] if end is not None else 0
    chain: list[str] = []
    while end is not None:
        if weight(plan.by_urn[end]):
            chain.append(end)
        end = previous[end]
    return WeightedPath(tuple(reversed(chain)), length)


def _longest(plan: Plan, without: tuple[str, str] | None) -> tuple[dict[str, int], dict[str, str | None]]:
    longest: dict[str, int] = {}
    previous: dict[str, str | None] = {}
    for resource in plan.resources:  # registration order: everything waited for is registered earlier
        urn = resource["urn"]
        deps = waits_for(resource)
        if without is not None and without[0] == urn:
            deps.discard(without[1])
        before = max(sorted(d for d in deps if d in longest), key=lambda d: longest[d], default=None)
        longest[urn] = weight(resource) + (longest[before] if before else 0)
        previous[urn] = before
    return longest, previous


@dataclass(frozen=True)
class Wait:
    waiter: str
    waited_for: str
    saves: int
    """How much lighter the weighted path is without this edge."""


def needless_waits(plan: Plan) -> list[Wait]:
    """The explicit `depends_on` edges whose removal alone would shorten the weighted path, first on the path first.

    Only an edge between two resources of the heaviest chain (components and providers included) can shorten it, and
    only if every equally heavy chain runs through it. An edge listed here needs a runtime reason to stay; after
    removing one, run again: the next heaviest chain may have its own."""
    longest, previous = _longest(plan, None)
    end = max(longest, key=lambda u: longest[u], default=None)
    if end is None:
        return []
    full = longest[end]
    on_path: list[str] = []
    while end is not None:
        on_path.append(end)
        end = previous[end]
    waits = []
    for waiter in reversed(on_path):
        for waited_for in sorted(explicit_waits(plan.by_urn[waiter]) & set(on_path)):
            shorter = weighted_path(plan, without=(waiter, waited_for)).length
            if shorter < full:
                waits.append(Wait(waiter, waited_for, full - shorter))
    return waits


def binding_waits(plan: Plan) -> list[tuple[Wait, int]]:
    """Every explicit edge that delays its waiter, wherever it is: (the edge, with what removing it alone saves the
    waiter, and the waiter's finish on the weighted clock), latest finish first. The path's own needless waits are
    among them; the others lengthen shorter chains, which become the path once the heavier ones are cut."""
    longest, _ = _longest(plan, None)
    found = []
    for resource in plan.resources:
        urn = resource["urn"]
        deps = waits_for(resource)
        for waited_for in sorted(explicit_waits(resource) & longest.keys()):
            rest = max((longest[d] for d in deps - {waited_for} if d in longest), default=0)
            if longest[waited_for] > rest:
                found.append((Wait(urn, waited_for, longest[waited_for] - rest), longest[urn]))
    return sorted(found, key=lambda f: (-f[1], -f[0].saves, f[0].waiter, f[0].waited_for))


def report(plan: Plan, everywhere: bool = False) -> str:
    """The weighted path (each step with its weight) and its needless waits as `waiter -> waited-for (+saving)`."""
    path = weighted_path(plan)
    lines = [f"weighted critical path of {plan.stack}: {path.length}"]
    lines += [f"  {weight(plan.by_urn[urn]):>2}  {_short(urn)}" for urn in path.urns]
    waits = needless_waits(plan)
    lines.append(f"explicit waits that lengthen it: {len(waits)}")
    lines += [f"  {_short(w.waiter)} -> {_short(w.waited_for)} (+{w.saves})" for w in waits]
    if everywhere:
        lines.append("explicit waits that delay their waiter, anywhere (finish, then waiter -> waited-for (+saving)):")
        lines += [f"  {finish:>3}  {_short(w.waiter)} -> {_short(w.waited_for)} (+{w.saves})" for w, finish in binding_waits(plan)]
    return "\n".join(lines)


def _short(urn: str) -> str:
    if "::" not in urn:
        return urn
    type_, name = urn.split("::")[2:4]
    return f"{type_.rsplit('$', 1)[-1]} {name}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from fabctl.render import render

    parser = argparse.ArgumentParser(prog="python -m benchmarks.critical_path", description=__doc__.splitlines()[0])
    parser.add_argument("stack", help="a stack file's name, e.g. site-a")
    parser.add_argument("--all", action="store_true", help="also every explicit wait that delays its waiter, off the path too")
    args = parser.parse_args(argv)
    print(report(render(args.stack), everywhere=args.all))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
