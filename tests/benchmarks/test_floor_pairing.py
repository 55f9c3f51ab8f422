"""The fair floor and its pairing: same process settings as the program, ratios pair by pair, cost per added resource.

Logic only: every figure here is built by hand; nothing is timed.
"""

from __future__ import annotations

import ast
import gc

import pytest

from benchmarks import floor
from benchmarks.run import Marginal, Pairs, Spread, cpu, marginal, marginal_cost, memory, paired, wall
from components import process
from fabctl.render import PROJECT_DIR, Plan, RenderStats

SETTINGS_CALL = process.settle_after_imports.__name__


def stats(cpu_seconds: float, seconds: float | None = None, peak_mib: float = 100.0) -> RenderStats:
    return RenderStats(seconds=cpu_seconds if seconds is None else seconds, peak_rss_mib=peak_mib, cpu_seconds=cpu_seconds)


def pairs(program: list[float], floor_: list[float]) -> Pairs:
    return Pairs(tuple(stats(s) for s in program), tuple(stats(s) for s in floor_))


def imported_modules(tree: ast.AST) -> set[str]:
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names} | {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def test_the_program_makes_its_process_settings_only_through_the_shared_call_after_its_imports():
    tree = ast.parse((PROJECT_DIR / "__main__.py").read_text(encoding="utf-8"))
    imports = [i for i, node in enumerate(tree.body) if isinstance(node, ast.Import | ast.ImportFrom)]
    settle = [i for i, node in enumerate(tree.body)
              if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == SETTINGS_CALL]
    assert imports
    assert len(settle) == 1 and settle[0] > max(imports)
    assert not {m for m in imported_modules(tree) if m.split(".")[0] == "gc"}, (
        "a process setting made in __main__.py would not reach the floor: make it in components/process.py")


def test_the_shared_process_settings_freeze_the_collector_then_collect_the_young_generation_less_often(monkeypatch):
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "set_threshold", lambda *thresholds: calls.append(thresholds))
    process.settle_after_imports()
    assert calls == ["freeze", (50_000,)]


def test_the_floor_makes_the_same_settings_after_its_imports_and_before_its_first_registration(monkeypatch):
    events = []
    monkeypatch.setattr(floor, "_class", lambda record: events.append(f"import {record['name']}"))
    monkeypatch.setattr(floor, "settle_after_imports", lambda: events.append("settle"))
    monkeypatch.setattr(floor.pulumi, "ComponentResource", lambda type_, name, props, opts: events.append(f"register {name}"))
    records = [{"urn": f"urn-{name}", "type": "fab:x:C", "name": name, "custom": False, "parent": None, "provider": None, "inputs": {}}
               for name in ("a", "b")]
    floor.replay(records)
    assert events == ["import a", "import b", "settle", "register a", "register b"]


def test_the_floor_imports_only_the_sdk_and_the_shared_settings():
    modules = imported_modules(ast.parse((PROJECT_DIR / "benchmarks" / "floor.py").read_text(encoding="utf-8")))
    assert modules
    assert {m for m in modules if m.split(".")[0] in ("components", "fabctl", "pydantic")} == {"components.process"}
    settings = imported_modules(ast.parse((PROJECT_DIR / "components" / "process.py").read_text(encoding="utf-8")))
    assert settings - {"__future__"} == {"gc"}


def test_the_ratio_is_the_min_and_median_of_the_per_pair_ratios_not_a_ratio_of_medians():
    # per pair 2.0, 1.5 and 1.2; the medians of each side (12 and 10) would say 1.2
    measured = pairs([10.0, 30.0, 12.0], [5.0, 20.0, 10.0])
    assert measured.ratio(cpu) == Spread(pytest.approx(1.2), pytest.approx(1.5))
    assert (measured.median("program", cpu), measured.median("floor", cpu)) == (12.0, 10.0)


def test_cpu_and_wall_ratios_come_from_their_own_measures():
    measured = Pairs((stats(2.0, seconds=6.0, peak_mib=110.0),), (stats(1.0, seconds=4.0, peak_mib=100.0),))
    assert measured.ratio(cpu) == Spread(2.0, 2.0)
    assert measured.ratio(wall) == Spread(1.5, 1.5)
    assert measured.ratio(memory) == Spread(pytest.approx(1.1), pytest.approx(1.1))


def test_fails_when_the_pairs_are_uneven():
    with pytest.raises(ValueError, match="as many program renders as floor renders, at least one: 2 and 1"):
        pairs([1.0, 2.0], [1.0])


def test_pairs_alternate_which_side_runs_first_and_the_floor_replays_the_first_program_render():
    order = []
    count = {"program": 0, "floor": 0}

    def render(side: str):
        def run() -> Plan:
            count[side] += 1
            order.append(side)
            return Plan("s", [{"urn": f"{side}-{count[side]}"}], stats=stats(float(count[side])))
        return run

    replayed = []

    def floor_of(plan: Plan):
        replayed.append(plan.resources[0]["urn"])
        return render("floor")

    first, measured = paired(render("program"), floor_of, repeat=4)
    assert order == ["program", "floor", "floor", "program", "program", "floor", "floor", "program"]
    assert replayed == ["program-1"]
    assert first.resources == [{"urn": "program-1"}]
    assert len(measured.program) == len(measured.floor) == 4


def test_the_marginal_cost_is_the_difference_of_two_sizes_over_the_difference_of_their_resources():
    assert marginal_cost(3.0, 500, 9.0, 2500) == pytest.approx(0.003)


def test_fails_when_two_sizes_have_as_many_resources():
    with pytest.raises(ValueError, match="must differ in resources to give a cost per resource: both have 500"):
        marginal_cost(3.0, 500, 9.0, 500)


def test_the_added_resources_are_compared_with_what_they_cost_the_floor():
    small, large = pairs([3.0, 3.1], [2.5, 2.6]), pairs([9.0, 9.2], [7.5, 7.6])
    added = marginal(small, 500, large, 2500)
    assert added == Marginal(program_seconds=pytest.approx(0.003025), floor_seconds=pytest.approx(0.0025),
                             program_mib=0.0, measurable=True)
    assert added.ratio == pytest.approx(1.21)


@pytest.mark.parametrize(("floor_large", "why"), [
    ([2.4, 2.5], "the floor got cheaper with more resources (a slower moment at the small size)"),
    ([2.6, 3.0], "the floor's difference is within the spread of its own renders"),
])
def test_a_difference_the_noise_could_make_gives_no_ratio(floor_large, why):
    added = marginal(pairs([3.0, 3.1], [2.5, 2.6]), 500, pairs([9.0, 9.2], floor_large), 2500)
    assert not added.measurable, why
    assert added.ratio is None


def test_a_single_pair_gives_no_ratio_having_no_spread_to_judge_by():
    added = marginal(pairs([3.0], [2.5]), 500, pairs([9.0], [7.5]), 2500)
    assert added.ratio is None
    assert added.program_seconds == pytest.approx(0.003)


def test_a_recorded_secret_path_through_keys_with_dots_and_list_items_wraps_that_value_alone():
    inputs = {"stringData": {"tls.crt": "a", "tls.key": "b"}, "env": [{"value": "c"}, {"value": "d"}]}
    wrapped = floor._replaced(floor._replaced(inputs, "stringData.tls.key", lambda v: ("secret", v)), "env[1].value", lambda v: ("secret", v))
    assert wrapped == {"stringData": {"tls.crt": "a", "tls.key": ("secret", "b")}, "env": [{"value": "c"}, {"value": ("secret", "d")}]}
    assert inputs["stringData"]["tls.key"] == "b"


def test_fails_when_a_recorded_secret_path_is_not_in_the_recorded_inputs():
    with pytest.raises(ValueError, match=r"^the recorded secret path 'data\.token' is not in the recorded inputs$"):
        floor._replaced({"stringData": {"token": "x"}}, "data.token", lambda v: v)


def test_a_recorded_alias_is_the_sdk_alias_that_sends_the_same_message():
    by_type = floor._alias({"spec": {"parentUrn": "", "type": "kubernetes:rbac.authorization.k8s.io/v1beta1:Role"}})
    renamed = floor._alias({"spec": {"name": "old", "parentUrn": "urn:pulumi:s::p::fab:x:C::c"}})
    unparented = floor._alias({"spec": {"name": "old", "noParent": True}})
    assert (by_type.type_, by_type.name, by_type.parent) == ("kubernetes:rbac.authorization.k8s.io/v1beta1:Role", ..., ...)
    assert (renamed.name, renamed.type_, renamed.parent) == ("old", ..., "urn:pulumi:s::p::fab:x:C::c")
    assert (unparented.name, unparented.parent) == ("old", None)
    assert floor._alias({"urn": "urn:pulumi:s::p::fab:x:C::old"}) == "urn:pulumi:s::p::fab:x:C::old"
