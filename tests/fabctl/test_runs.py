"""How a render request runs (fabctl/runs.py): forked from a preloaded renderer it returns what a fresh process returns; a
cached request runs once; a perturbed order is one Pulumi could produce."""

from __future__ import annotations

import json
import os
from pathlib import Path
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


def counted(monkeypatch, stdout: str = "{}") -> list[str]:
    """The requests that run (each answering `stdout`), as the cache lets them through."""
    ran: list[str] = []

    def execute(request: dict[str, Any]) -> runs.Run:
        ran.append(request["stack"])
        return runs.Run(0, stdout, "", 0.1)

    monkeypatch.setattr(runs, "_execute", execute)
    return ran


def request(project: Path, stack: str = "site-t", **more: Any) -> dict[str, Any]:
    return {"project_dir": str(project), "stack": stack, "program": None, "config": {}, **more}


def test_a_cached_request_runs_once(tmp_path, monkeypatch):
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        first, again, other = (runs.run(request(PROJECT_DIR, stack)) for stack in ("site-t", "site-t", "site-u"))
    assert (ran, again) == (["site-t", "site-u"], first)


def test_a_change_to_a_program_file_renders_again(tmp_path, monkeypatch):
    project = copy_project(tmp_path)
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        runs.run(request(project))
        (project / "components" / "constants.py").write_text((project / "components" / "constants.py").read_text() + "\n")
        runs.run(request(project))
    assert ran == ["site-t", "site-t"]


def test_a_change_to_a_file_the_config_names_renders_again(tmp_path, monkeypatch):
    bundle = tmp_path / "site-ca.pem"
    bundle.write_text("one")
    config = {"fab-platform:site": json.dumps({"ca_bundle": str(bundle)})}
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        runs.run(request(PROJECT_DIR, config=config))
        bundle.write_text("two")
        runs.run(request(PROJECT_DIR, config=config))
        runs.run(request(PROJECT_DIR, config=config))
    assert ran == ["site-t", "site-t"]


def test_a_change_to_the_tests_or_docs_reuses_the_render(tmp_path, monkeypatch):
    project = copy_project(tmp_path)
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        runs.run(request(project))
        (project / "docs").mkdir()
        (project / "docs" / "notes.md").write_text("a note")
        runs.run(request(project))
    assert ran == ["site-t"]


def test_a_render_cache_inside_the_project_is_not_part_of_what_it_keys(tmp_path, monkeypatch):
    project = copy_project(tmp_path)
    ran = counted(monkeypatch)
    with runs.cached(project / "out" / "renders"), runs.cached(project / "my-cache"):
        for _ in range(2):
            runs.run(request(project))
    assert (ran, (project / "my-cache" / runs.CACHE_TAG).is_file()) == (["site-t"], True)


def test_a_program_given_in_the_projects_place_is_never_kept(tmp_path, monkeypatch):
    """The benchmarks' floor reads the plan it replays from a file its request does not name."""
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        for _ in range(2):
            runs.run(request(PROJECT_DIR, program="/tmp/floor.py"))
    assert ran == ["site-t", "site-t"]


def test_a_renderer_that_died_is_not_kept(tmp_path, monkeypatch):
    ran = counted(monkeypatch, stdout="")
    with runs.cached(tmp_path / "renders"):
        for _ in range(2):
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t", "site-t"]


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



def test_a_render_whose_program_changed_while_it_ran_is_not_kept(tmp_path, monkeypatch):
    """An edit saved during a render may or may not be in it: the render is not kept under the key of the files as they
    were when it started, which they are again once the edit is undone."""
    project = copy_project(tmp_path)
    constants = project / "components" / "constants.py"
    original = constants.read_text()
    ran: list[str] = []

    def edited_meanwhile(request: dict[str, Any]) -> runs.Run:
        ran.append(request["stack"])
        constants.write_text(constants.read_text() + "\n")
        return runs.Run(0, "{}", "", 0.1)

    monkeypatch.setattr(runs, "_execute", edited_meanwhile)
    with runs.cached(tmp_path / "renders"):
        runs.run(request(project))
        constants.write_text(original)
        monkeypatch.setattr(runs, "_execute", lambda r: ran.append(r["stack"]) or runs.Run(0, "{}", "", 0.1))
        runs.run(request(project))
    assert ran == ["site-t", "site-t"]


def test_a_program_that_crashed_is_not_kept(tmp_path, monkeypatch):
    """A crash may depend on the moment (a file being written, memory); the program's refusal of its config does not."""
    ran = counted(monkeypatch, stdout=json.dumps({"error": {"kind": "crash", "message": "Traceback ..."}}))
    with runs.cached(tmp_path / "renders"):
        for _ in range(2):
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t", "site-t"]


def test_a_refusal_of_the_config_is_kept(tmp_path, monkeypatch):
    ran = counted(monkeypatch, stdout=json.dumps({"error": {"kind": "config", "message": "fab-platform:site.name: ..."}}))
    with runs.cached(tmp_path / "renders"):
        for _ in range(2):
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t"]


def test_a_change_to_a_variable_the_program_reads_renders_again(tmp_path, monkeypatch):
    """The Keycloak provider's client id comes from KEYCLOAK_CLIENT_ID where it is set (components/providers.py)."""
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        for client in ("one", "two", "two"):
            monkeypatch.setenv("KEYCLOAK_CLIENT_ID", client)
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t", "site-t"]


@pytest.mark.parametrize("variable", ["FAB_HELM", "PYTEST_CURRENT_TEST", "COLUMNS", "SSH_CONNECTION"])
def test_a_change_to_a_variable_of_the_tools_or_the_shell_reuses_the_render(tmp_path, monkeypatch, variable):
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        for value in ("one", "two"):
            monkeypatch.setenv(variable, value)
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t"]


def test_the_program_reads_no_variable_of_fabctl(tmp_path):
    """FAB_ variables are left out of a render's key (runs.VOLATILE_PREFIXES), which is right only while no module of
    the program reads one. The DAGs Airflow loads do, from their pods' environment: the program never imports them."""
    dags = PROJECT_DIR / "components" / "dags"
    program = [PROJECT_DIR / "__main__.py", *(p for p in (PROJECT_DIR / "components").rglob("*.py") if dags not in p.parents)]
    assert [str(p.relative_to(PROJECT_DIR)) for p in program if "FAB_" in p.read_text(encoding="utf-8")] == []
    assert [str(p.relative_to(PROJECT_DIR)) for p in program if "components.dags" in p.read_text(encoding="utf-8")
            or "from .dags" in p.read_text(encoding="utf-8") or "import dags" in p.read_text(encoding="utf-8")] == []


def test_a_dangling_link_and_a_pipe_in_the_project_leave_its_key_alone(tmp_path):
    """An editor's lock file is a dangling link; a pipe would make reading it wait forever."""
    project = copy_project(tmp_path)
    before = runs.fingerprint(request(project))
    (project / "components" / ".#constants.py").symlink_to(tmp_path / "nowhere")
    os.mkfifo(project / "components" / "a-pipe")
    assert runs.fingerprint(request(project)) == before


def test_a_cache_folder_that_cannot_be_used_renders_every_request_and_says_so_once(tmp_path, monkeypatch, capsys):
    (tmp_path / "renders").write_text("a file where the cache folder should be")
    ran = counted(monkeypatch)
    with runs.cached(tmp_path / "renders"):
        for _ in range(2):
            runs.run(request(PROJECT_DIR))
    assert ran == ["site-t", "site-t"]
    assert capsys.readouterr().err == (
        f"warning: renders are not kept: the render cache {tmp_path / 'renders'} cannot be used (not a folder); "
        "name another with --render-cache DIR or FAB_CACHE_DIR\n")


def test_a_preloaded_renderer_does_not_serve_a_program_edited_since_it_started(tmp_path, monkeypatch):
    """Its imports are the files as they were when it started: an edit is rendered by a fresh process."""
    project = copy_project(tmp_path)
    monkeypatch.setattr(runs.subprocess, "Popen", lambda *args, **kwargs: object())  # only what it would serve is asked
    renderer = runs._Preloaded(project)
    served = renderer.serves(project)
    constants = project / "components" / "constants.py"
    constants.write_text(constants.read_text() + "\n")
    assert (served, renderer.serves(project)) == (True, False)


def keycloak_client(plan: Any) -> str:
    (provider,) = plan.of_type("pulumi:providers:keycloak")
    return provider["inputs"]["clientId"]


def test_a_preloaded_render_reads_the_environment_as_it_is_when_asked(monkeypatch):
    """As a fresh process started now would: the renderer was started before the variable was set."""
    config = {SITE_KEY: small_site()}
    monkeypatch.delenv("KEYCLOAK_CLIENT_ID", raising=False)
    with runs.fresh(), runs.preloaded(eager=True):
        before = keycloak_client(render_config("site-t", config))
        monkeypatch.setenv("KEYCLOAK_CLIENT_ID", "ci-pulumi")
        after = keycloak_client(render_config("site-t", config))
    assert (before, after) == ("fab-platform-pulumi", "ci-pulumi")


def test_renders_with_different_hash_seeds_record_the_same_resources(monkeypatch):
    """Children of a preloaded renderer share its hash seed (set iteration orders); no render depends on it."""
    config = {SITE_KEY: small_site()}
    found = []
    with runs.fresh():
        for seed in ("1", "2"):
            monkeypatch.setenv("PYTHONHASHSEED", seed)
            found.append(render_config("site-t", config))
    assert recorded(found[0].resources) == recorded(found[1].resources)
    assert found[0].outputs == found[1].outputs
