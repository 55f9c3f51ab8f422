"""Nothing stateful lost: buckets, Postgres clusters, PVCs, the object store and a created realm are `protect` AND
`retain_on_delete`.

The policy pack sees only what the engine sends it. The Analyzer request of the pinned pulumi carries `protect` but no
`retainOnDelete` (AnalyzerResourceOptions), so fab-stateful-protected checks `protect` through the pack, and the render
tests here check both options on every stateful resource (the pack's own definition of stateful, `stateful_kind`)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from pulumi.runtime.proto import analyzer_pb2
from rules.storage import stateful_kind
from small_site import full_site

from fabctl.policy import analyze_in_process
from fabctl.render import Plan, render_config
from fabctl.stackfile import SITE_KEY

ANALYZER_OPTIONS = {"protect", "ignoreChanges", "deleteBeforeReplace", "deleteBeforeReplaceDefined", "additionalSecretOutputs",
                    "aliases", "customTimeouts", "parent"}
"""What the pinned pulumi's Analyzer request says of a resource's options."""


def everything_stateful() -> dict:
    """The full small site plus what it leaves out that keeps data: an installed object store, a created realm and a
    replica bucket for a peer site."""
    site = full_site()
    site["storage"]["object_store"] = {"install": True}
    site["gpu"][site["inference"]["cluster"]].pop("infiniband")  # an installed store answers on Ethernet only
    site["identity"] = {"realm": "fab-t", "create_realm": True}
    site["federation"] = {"peers": {"site-u": {}}, "ranges": {"site-u": ["172.20.0.0/16"]}}
    return site


@pytest.fixture(scope="module")
def stateful_plan() -> Plan:
    return render_config("site-t", {SITE_KEY: everything_stateful(), "fab-platform:aistorLicense": {"secure": "v1:license"},
                                    "fab-platform:aistorRootPassword": {"secure": "v1:password"}})


def stateful(plan: Plan) -> dict[str, dict]:
    """Every resource of a render that holds data, by logical name."""
    return {r["name"]: r for r in plan.resources if stateful_kind(r["type"], r["inputs"])}


def unkept(plan: Plan) -> list[str]:
    """Stateful resources of a render that a stack change could delete: without protect or without retain_on_delete."""
    return sorted(f"{name}: protect={r['protect']}, retain_on_delete={r['retain_on_delete']}"
                  for name, r in stateful(plan).items() if not (r["protect"] and r["retain_on_delete"]))


def test_the_analyzer_request_does_not_carry_retain_on_delete():
    # When pulumi sends it, fab-stateful-protected checks it and fabctl/policy.py sends it as the CLI does.
    assert {f.name for f in analyzer_pb2.AnalyzerResourceOptions.DESCRIPTOR.fields} == ANALYZER_OPTIONS


def test_every_kind_of_stateful_resource_is_rendered(stateful_plan):
    kinds = {stateful_kind(r["type"], r["inputs"]) for r in stateful(stateful_plan).values()}
    assert kinds == {"S3Bucket", "Cluster", "Realm", "object store"}


def test_every_stateful_resource_is_protected_and_retained_on_delete(stateful_plan):
    assert stateful(stateful_plan)
    assert unkept(stateful_plan) == []


def test_every_stateful_resource_of_a_stack_is_protected_and_retained_on_delete(plan):
    assert stateful(plan)
    assert unkept(plan) == []


def test_the_render_check_finds_a_bucket_that_is_not_retained(stateful_plan):
    resources = copy.deepcopy(stateful_plan.resources)
    (replica,) = [r for r in resources if r["name"] == "federation-replica-site-u"]
    replica["retain_on_delete"] = False
    assert unkept(dataclasses.replace(stateful_plan, resources=resources)) == [
        "federation-replica-site-u: protect=True, retain_on_delete=False"
    ]


# fab-stateful-protected through the pack ----------------------------------------------------------

@pytest.mark.parametrize(("name", "message"), [
    ("storage-polaris-db", ("Cluster storage-polaris-db on site-t-storage holds data but has protect: false; resources that "
                           "hold data are protected (and retained on delete)")),
    ("storage-bucket-site-t-raw-fdc", ("S3Bucket storage-bucket-site-t-raw-fdc on site-t-minio holds data but has protect: "
                                      "false; resources that hold data are protected (and retained on delete)")),
    ("identity-realm", ("Realm identity-realm on site-t-keycloak holds data but has protect: false; resources that hold data "
                       "are protected (and retained on delete)")),
    ("storage-aistor-objectstore", ("object store storage-aistor-objectstore on site-t-storage holds data but has protect: "
                                   "false; resources that hold data are protected (and retained on delete)")),
])
def test_fails_when_a_stateful_resource_is_not_protected(stateful_plan, name, message):
    resources = copy.deepcopy(stateful_plan.resources)
    (target,) = [r for r in resources if r["name"] == name]
    target["protect"] = False
    violations = analyze_in_process(dataclasses.replace(stateful_plan, resources=resources))
    assert [(v.policy, v.message.splitlines()[-1]) for v in violations] == [("fab-stateful-protected", message)]
