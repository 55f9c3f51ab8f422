"""The benchmark script's own logic: critical path, inherent chain, generated sites and the SDK floor."""

from __future__ import annotations

import pytest
from helpers import rendered, site_raw

from benchmarks.critical_path import Wait, chain_exists, critical_path, needless_waits, weight, weighted_path
from benchmarks.run import (
    CHECK_COLD_LIMIT_SEC,
    CHECK_WARM_LIMIT_SEC,
    OPERATOR_FIRST_CHAIN,
    CheckRun,
    check_rows_of,
    floor_renderer,
    inherent_chain,
    weighted_path_row,
)
from benchmarks.scale import DIMENSIONS
from components.config import parse_site
from fabctl.render import Plan

STACK = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"


def resource(name: str, *, custom: bool = True, type_: str = "kubernetes:core/v1:ConfigMap", parent: str | None = None,
             provider: str | None = None, depends: tuple[str, ...] = (), inputs_from: tuple[str, ...] = (),
             inputs: dict | None = None) -> dict:
    return {"urn": name, "name": name, "type": type_, "custom": custom, "parent": parent or STACK, "provider": provider,
            "dependencies": [*depends, *inputs_from], "property_dependencies": {"data": list(inputs_from)} if inputs_from else {},
            "inputs": inputs or {}}


CHART = "kubernetes:helm.sh/v3:Release"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"


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


@pytest.mark.parametrize("stack", ["site-a", "site-b"])
def test_the_weighted_path_of_each_stack_is_no_heavier_than_its_operator_first_chain(stack):
    # The CloudNativePG chart, the Postgres cluster, the schema, Polaris, the catalog setup, a team's principal and Secret:
    # an explicit wait that queued something behind a slow step without a runtime need would make a heavier chain.
    plan = rendered(stack)
    chain = [next(r for r in plan.resources if r["name"] == name and r["custom"]) for name in inherent_chain(plan, OPERATOR_FIRST_CHAIN)]
    assert chain_exists(plan, [r["urn"] for r in chain])
    assert weighted_path(plan).length == sum(weight(r) for r in chain)
    assert weighted_path_row(plan).ok


@pytest.mark.parametrize("dimension", sorted(DIMENSIONS))
def test_every_generated_site_is_a_valid_site(dimension):
    stack, grow, scales = DIMENSIONS[dimension]
    site = parse_site(grow(site_raw(stack), scales[-1]))
    assert site.name == stack


@pytest.fixture(scope="module")
def site_b_and_floor() -> tuple[Plan, Plan]:
    plan = rendered("site-b")
    return plan, floor_renderer(plan)()


def test_the_floor_registers_exactly_the_resources_of_the_program(site_b_and_floor):
    plan, floor = site_b_and_floor
    assert sorted(r["urn"] for r in floor.resources) == sorted(r["urn"] for r in plan.resources)
    assert [r["type"] for r in floor.resources if r["name"] == "storage-polaris-db"] == ["kubernetes:postgresql.cnpg.io/v1:Cluster"]


def test_the_floor_makes_the_program_s_registrations_with_the_same_inputs_dependencies_secrets_and_options(site_b_and_floor):
    # Every field the renderer records of a RegisterResource request: the SDK does the same work for both. The
    # additional secret outputs are compared as sets: the SDK's constructors add theirs to the program's, repeating a name.
    plan, floor = site_b_and_floor
    program = {r["urn"]: r for r in plan.resources}

    def same(key: str, floor_value, program_value) -> bool:
        return set(floor_value) == set(program_value) if key == "additional_secret_outputs" else floor_value == program_value

    differing = sorted({key for r in floor.resources for key in r if not same(key, r[key], program[r["urn"]].get(key))})
    assert differing == []
    assert any(r["property_dependencies"] for r in floor.resources) and any(r["secret_inputs"] for r in floor.resources)


@pytest.mark.parametrize(("type_", "inputs", "expected"), [
    (CHART, {}, 10),
    (CHART, {"skipAwait": True}, 0),
    (DEPLOYMENT, {}, 5),
    ("kubernetes:batch/v1:Job", {}, 5),
    ("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", {"metadata": {"annotations": {"pulumi.com/waitFor": "x"}}}, 5),
    (SERVICE, {"spec": {"type": "LoadBalancer"}}, 2),
    (SERVICE, {"spec": {"type": "ClusterIP"}}, 1),
    ("kubernetes:core/v1:Secret", {}, 1),
    ("minio:index/iamUser:IamUser", {}, 1),
    ("random:index/randomPassword:RandomPassword", {}, 0),
])
def test_each_step_weighs_what_pulumi_waits_for_on_it(type_, inputs, expected):
    assert weight(resource("r", type_=type_, inputs=inputs)) == expected


def test_the_weighted_path_is_the_heaviest_chain_not_the_longest():
    plan = Plan("s", [
        resource("a"), resource("b", depends=("a",)), resource("c", depends=("b",)), resource("d", depends=("c",)),
        resource("chart", type_=CHART), resource("app", type_=DEPLOYMENT, depends=("chart",)),
    ])
    path = weighted_path(plan)
    assert path.urns == ("chart", "app")
    assert path.length == 15


def test_a_needless_wait_is_an_explicit_edge_whose_removal_shortens_the_weighted_path():
    plan = Plan("s", [
        resource("ns"),
        resource("chart", type_=CHART, depends=("ns",)),
        resource("svc", type_=SERVICE, inputs={"spec": {"type": "LoadBalancer"}}, depends=("ns", "chart")),
    ])
    assert weighted_path(plan).urns == ("ns", "chart", "svc")
    assert needless_waits(plan) == [Wait("chart", "ns", 1), Wait("svc", "chart", 2)]


def test_an_input_dependency_is_never_listed_as_a_needless_wait():
    plan = Plan("s", [resource("chart", type_=CHART), resource("job", type_="kubernetes:batch/v1:Job", inputs_from=("chart",))])
    assert weighted_path(plan).length == 15
    assert needless_waits(plan) == []


def test_an_edge_beside_an_equally_heavy_chain_is_not_a_needless_wait():
    plan = Plan("s", [
        resource("first", type_=CHART), resource("second", type_=CHART),
        resource("cr", depends=("first", "second")),
    ])
    assert weighted_path(plan).length == 11
    assert needless_waits(plan) == []


def _check_run(seconds: float, returncode: int = 0) -> CheckRun:
    return CheckRun(seconds, seconds * 1.5, returncode, "check site-t: 0 errors, all 20 releases checked, 0 accepted, 0 notes; "
                    "20 of 20 releases rendered; 900 objects checked in 1.0 s")


def test_the_deploy_check_is_within_its_limits_cold_and_warm():
    rows = check_rows_of("site-t", [_check_run(20.0), _check_run(26.0)], [_check_run(4.0), _check_run(4.5)])
    assert [(r.benchmark, r.seconds, r.resources, r.limit, r.ok) for r in rows] == [
        ("deploy check, cold", 23.0, 900, f"<= {CHECK_COLD_LIMIT_SEC:g} s", True),
        ("deploy check, warm", 4.25, 900, f"<= {CHECK_WARM_LIMIT_SEC:g} s", True),
    ]


def test_a_warm_deploy_check_over_its_limit_is_over():
    cold, warm = check_rows_of("site-t", [_check_run(20.0)], [_check_run(CHECK_WARM_LIMIT_SEC + 0.1)])
    assert (cold.ok, warm.ok) == (True, False)


def test_a_deploy_check_that_fails_is_over_whatever_its_time():
    cold, warm = check_rows_of("site-t", [_check_run(20.0, returncode=6)], [_check_run(1.0)])
    assert (cold.ok, cold.figure.splitlines()[0].endswith("; exit 6"), warm.ok) == (False, True, True)
