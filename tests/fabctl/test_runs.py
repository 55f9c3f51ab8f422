"""How a render request runs (fabctl/runs.py): forked from a preloaded renderer it returns what a fresh process returns; a
cached request runs once; a perturbed order is one Pulumi could produce."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import copy_project
from small_site import small_site

from fabctl import runs
from fabctl.render import PROJECT_DIR, render_config
from fabctl.stackfile import SITE_KEY


def recorded(resources: list[dict[str, Any]]) -> list[str]:
    """Every recorded field of every resource, whatever order they were registered in."""
    return sorted(json.dumps(r, sort_keys=True) for r in resources)


@pytest.fixture(scope="module")
def fresh_and_preloaded() -> tuple[Any, Any]:
    """The smallest site rendered in a fresh process and in a child of a preloaded renderer (neither from a cache)."""
    config = {SITE_KEY: small_site()}
    with runs.fresh():
        fresh = render_config("site-t", config)
        with runs.preloaded():
            render_config("site-t", {SITE_KEY: small_site(multikueue=True)})  # the preloaded renderer has rendered before
            preloaded = render_config("site-t", config)
    return fresh, preloaded


def test_a_preloaded_render_records_what_a_fresh_process_records(fresh_and_preloaded):
    fresh, preloaded = fresh_and_preloaded
    assert fresh.resources, "the render recorded nothing"
    assert recorded(preloaded.resources) == recorded(fresh.resources)


def test_a_preloaded_render_has_the_outputs_of_a_fresh_process(fresh_and_preloaded):
    fresh, preloaded = fresh_and_preloaded
    assert fresh.outputs
    assert preloaded.outputs == fresh.outputs


def test_a_copy_of_the_program_is_the_same_program(tmp_path):
    assert runs.same_program(copy_project(tmp_path))


def test_a_changed_copy_of_the_program_is_another_program(tmp_path):
    project = copy_project(tmp_path)
    (project / "components" / "versions.py").write_text((PROJECT_DIR / "components" / "versions.py").read_text() + "\n# changed\n")
    assert not runs.same_program(project)


def test_a_cached_request_runs_once(tmp_path, monkeypatch):
    ran: list[str] = []

    def execute(request: dict[str, Any]) -> runs.Run:
        ran.append(request["stack"])
        return runs.Run(0, json.dumps({"stack": request["stack"]}), "", 0.1)

    monkeypatch.setattr(runs, "_execute", execute)
    with runs.cached(tmp_path / "renders"):
        first = runs.run({"stack": "site-t"})
        again = runs.run({"stack": "site-t"})
        other = runs.run({"stack": "site-u"})
    assert (ran, first, again.stdout, other.stdout) == (["site-t", "site-u"], again, first.stdout, '{"stack": "site-u"}')


def chain() -> list[dict[str, Any]]:
    """A stack, a component, its two children (one reading the other's output) and a provider they use."""
    def resource(name: str, parent: str | None = None, provider: str | None = None, **more: Any) -> dict[str, Any]:
        return {"urn": f"urn:{name}", "name": name, "parent": parent and f"urn:{parent}", "provider": provider and f"urn:{provider}",
                "dependencies": more.get("dependencies", []), "property_dependencies": more.get("property_dependencies", {})}

    return [
        resource("provider"),
        resource("component"),
        resource("bucket", parent="component", provider="provider"),
        resource("policy", parent="component", provider="provider", property_dependencies={"bucket": ["urn:bucket"]}),
        resource("user", parent="component", provider="provider", dependencies=["urn:policy"]),
        *(resource(f"namespace-{i}", provider="provider") for i in range(8)),
    ]


def positions(resources: list[dict[str, Any]]) -> dict[str, int]:
    return {r["name"]: i for i, r in enumerate(resources)}


@pytest.mark.parametrize("seed", ["a", "b", "c", "d"])
def test_a_perturbed_order_keeps_parents_providers_and_dependencies_first(seed):
    at = positions(runs.perturbed(chain(), seed))
    assert at["component"] < at["bucket"] < at["policy"] < at["user"]
    assert all(at["provider"] < at[name] for name in at if name not in ("provider", "component"))


def test_a_perturbed_order_holds_every_resource_once():
    assert recorded(runs.perturbed(chain(), "a")) == recorded(chain())


def test_a_seed_gives_the_same_order_whatever_order_the_render_came_in():
    assert runs.perturbed(chain(), "a") == runs.perturbed(list(reversed(chain())), "a")


def test_seeds_give_different_orders():
    orders = {tuple(r["name"] for r in runs.perturbed(chain(), seed)) for seed in "abcdefgh"}
    assert len(orders) > 1


def test_a_render_comes_in_the_order_its_seed_gives(monkeypatch, small_plan):
    monkeypatch.setenv(runs.ORDER_VARIABLE, "fixed")
    plan = render_config("site-t", {SITE_KEY: small_site()})
    assert [r["urn"] for r in plan.resources] == [r["urn"] for r in runs.perturbed(small_plan.resources, "fixed")]


def test_the_order_of_a_cycle_is_kept():
    looped = [{"urn": "urn:a", "parent": "urn:b"}, {"urn": "urn:b", "parent": "urn:a"}]
    assert runs.perturbed(looped, "a") == looped


def test_a_preloaded_renderer_that_cannot_start_leaves_renders_to_fresh_processes(monkeypatch, tmp_path):
    with runs.fresh(), runs.preloaded():
        monkeypatch.setattr(runs._Preloaded, "_started", lambda self: False)
        plan = render_config("site-t", {SITE_KEY: small_site()})
    assert plan.resources

