"""The benchmark script's own logic: critical path, inherent chain, generated sites and the SDK floor."""

from __future__ import annotations


import pytest

from benchmarks.critical_path import chain_exists, critical_path
from benchmarks.run import floor_renderer, inherent_chain
from benchmarks.scale import DIMENSIONS
from components.config import parse_site
from fabctl.render import Plan
from helpers import rendered, site_raw

STACK = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"


def resource(name: str, *, custom: bool = True, type_: str = "kubernetes:core/v1:ConfigMap", parent: str | None = None,
             provider: str | None = None, depends: tuple[str, ...] = (), inputs_from: tuple[str, ...] = ()) -> dict:
    return {"urn": name, "name": name, "type": type_, "custom": custom, "parent": parent or STACK, "provider": provider,
            "dependencies": list(depends), "property_dependencies": {"data": list(inputs_from)} if inputs_from else {}}


def test_the_critical_path_follows_depends_on_and_inputs_and_counts_deployed_resources_only():
    plan = Plan("s", [
        resource("provider", type_="pulumi:providers:kubernetes"),
        resource("component", custom=False, type_="fab:x:Component"),
        resource("operator", parent="component", provider="provider"),
        resource("crd-user", parent="component", provider="provider", depends=("operator",)),
        resource("consumer", inputs_from=("crd-user",)),
        resource("independent", provider="provider"),
    ])
    path = critical_path(plan)
    assert path.urns == ("operator", "crd-user", "consumer")
    assert path.length == 3


def test_a_chain_exists_only_through_dependencies_components_and_providers():
    plan = Plan("s", [
        resource("component", custom=False, type_="fab:x:Component", depends=("a",)),
        resource("a"),
        resource("b", parent="component"),
        resource("c"),
    ])
    assert chain_exists(plan, ["a", "b"])
    assert not chain_exists(plan, ["a", "c"])


@pytest.mark.parametrize("stack", ["site-a", "site-b"])
def test_the_inherent_chain_is_a_dependency_chain_of_each_stack(stack):
    plan = rendered(stack)
    chain = inherent_chain(plan)
    urns = [next(r["urn"] for r in plan.resources if r["name"] == name and r["custom"]) for name in chain]
    assert chain_exists(plan, urns)
    assert critical_path(plan).length <= len(chain) + 1


@pytest.mark.parametrize("dimension", sorted(DIMENSIONS))
def test_every_generated_site_is_a_valid_site(dimension):
    stack, grow, scales = DIMENSIONS[dimension]
    site = parse_site(grow(site_raw(stack), scales[-1]))
    assert site.name == stack


def test_the_floor_registers_exactly_the_resources_of_the_program():
    plan = rendered("site-b")
    floor = floor_renderer(plan)()
    assert sorted(r["urn"] for r in floor.resources) == sorted(r["urn"] for r in plan.resources)
    assert [r["type"] for r in floor.resources if r["name"] == "storage-polaris-db"] == ["kubernetes:postgresql.cnpg.io/v1:Cluster"]
