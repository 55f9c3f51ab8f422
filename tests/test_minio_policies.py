"""Every MinIO policy of both stack files, run through a real IAM evaluator (tests/iam_engine.py): each principal lists,
reads, writes and deletes exactly what it is meant to, and nothing of the site's other buckets, prefixes or bucket roots
(tests/minio_access.py probes every prefix any policy names, so a team's prefix is tried by every other team). What
the evaluator cannot show, MinIO's semantics differing from AWS's: docs/security.md, "What the MinIO policy tests show"."""

from __future__ import annotations

import pytest
from helpers import render_small
from iam_engine import S3Request, evaluate
from minio_access import INTRUDER, access_of, named_prefixes, site_buckets, site_policies
from small_site import small_site

RO = ("locate", "list", "read", "read-version")
RW = (*RO, "list-uploads", "write", "delete", "abort-upload", "upload-parts")
PREFIX_RO = ("list", "read", "read-version")
PREFIX_RW = (*PREFIX_RO, "write", "delete", "abort-upload", "upload-parts")
OUTSIDE = "203.0.113.9"
"""An address in none of the vendors' ranges."""


def whole(verbs: tuple[str, ...]) -> dict[str, object]:
    return {verb: "whole" for verb in verbs}


def under(prefixes: list[str], verbs: tuple[str, ...], also: dict[str, list[str]] | None = None) -> dict[str, object]:
    """These verbs under these prefixes only (and `also`'s prefixes for its verbs)."""
    granted = {verb: list(prefixes) for verb in verbs}
    for verb, more in (also or {}).items():
        granted[verb] = [*granted.get(verb, []), *more]
    return granted


def team(site: str, name: str, weights: list[str]) -> dict[str, dict[str, object]]:
    """A training team: the datasets and warehouse read whole; checkpoints and models under `<team>/` only; the served
    models' weights read."""
    return {f"{site}-checkpoints": under([f"{name}/"], PREFIX_RW), f"{site}-datasets": whole(RO), f"{site}-warehouse": whole(RO),
            f"{site}-models": under([f"{name}/"], PREFIX_RW, {verb: weights for verb in PREFIX_RO})}


def expected_site_a() -> dict[str, tuple[str, dict[str, dict[str, object]]]]:
    """Policy -> (the address its requests come from, what it may do) in Pulumi.site-a.yaml."""
    s, weights = "site-a", ["meta/llama-3.3-70b-instruct/", "qwen/qwen3-8b/"]
    inside = "10.0.0.10"
    return {
        **{f"fab-training-{t}": (inside, team(s, t, weights)) for t in ("defect-vision", "fdc", "llm-apps", "vm-pdm", "wafermap", "yield")},
        "fab-inference": (inside, {f"{s}-models": whole(RO)}),
        "fab-polaris": (inside, {f"{s}-gold": whole(RW), f"{s}-warehouse": whole(RW)}),
        "fab-postgres-backup": (inside, {f"{s}-pg-backups": whole(RW)}),
        "fab-replication": (inside, {f"{s}-gold": whole(RO)}),
        "fab-spark": (inside, {f"{s}-{b}": whole(RW) for b in ("raw-fdc", "raw-images", "raw-stdf", "warehouse")}),
        "fab-starrocks": (inside, {f"{s}-gold": whole(RO), f"{s}-olap": whole(RW), f"{s}-warehouse": whole(RO)}),
        "fab-trino": (inside, {f"{s}-gold": whole(RO), f"{s}-warehouse": whole(RO)}),
        # Its namespaces' locations: fdc and stdf in the warehouse, gold in the gold bucket; not even the buckets' locations.
        "fab-iceberg-maintenance": (inside, {f"{s}-warehouse": under(["fdc/", "stdf/"], PREFIX_RW), f"{s}-gold": under(["gold/"], PREFIX_RW)}),
        "fab-metrics": (inside, {}),
        # site-b's team yield, training here: site-b's replica read whole, its own checkpoint prefix.
        "fab-remote-site-b-yield": (inside, {f"{s}-replica-site-b": whole(RO),
                                             f"{s}-checkpoints": under(["remote-site-b-yield/"], PREFIX_RW)}),
        "fab-replica-site-b": (inside, {f"{s}-replica-site-b": whole(RW)}),
        "fab-vendor-etch-tools": ("192.0.2.17", {f"{s}-gold": under(["gold/etch_tools_chamber_health/"], PREFIX_RO)}),
    }


def expected_site_b() -> dict[str, tuple[str, dict[str, dict[str, object]]]]:
    s, weights, inside = "site-b", ["qwen/qwen3-8b/"], "10.0.0.10"
    return {
        **{f"fab-training-{t}": (inside, team(s, t, weights)) for t in ("fdc", "llm-apps", "yield")},
        "fab-inference": (inside, {f"{s}-models": whole(RO)}),
        "fab-polaris": (inside, {f"{s}-gold": whole(RW), f"{s}-warehouse": whole(RW)}),
        "fab-postgres-backup": (inside, {f"{s}-pg-backups": whole(RW)}),
        "fab-replication": (inside, {f"{s}-gold": whole(RO)}),
        "fab-spark": (inside, {f"{s}-raw-fdc": whole(RW), f"{s}-warehouse": whole(RW)}),
        "fab-starrocks": (inside, {f"{s}-gold": whole(RO), f"{s}-olap": whole(RW), f"{s}-warehouse": whole(RO)}),
        "fab-trino": (inside, {f"{s}-gold": whole(RO), f"{s}-warehouse": whole(RO)}),
        "fab-iceberg-maintenance": (inside, {f"{s}-warehouse": under(["fdc/"], PREFIX_RW)}),
        "fab-metrics": (inside, {}),
        "fab-replica-site-a": (inside, {f"{s}-replica-site-a": whole(RW)}),
        "fab-vendor-cmp-tools": ("192.0.2.49", {f"{s}-gold": under(["gold/cmp_tools_pad_wear/"], PREFIX_RO)}),
    }


EXPECTED = {"site-a": expected_site_a, "site-b": expected_site_b}
ABSENT = {("site-b", "fab-remote-")}
"""The kinds of principal a stack has none of (site-b hosts no peer's team)."""
MINIO_ONLY = {"fab-metrics": ["ReadMetrics"]}
"""The statements the evaluator cannot read (MinIO admin actions), by policy."""

_FOUND: dict[str, dict] = {}


def found(plan) -> dict[str, tuple[dict, list]]:
    """Policy -> (what the evaluator allows it from its address, the statements it could not evaluate); once per stack."""
    if plan.stack not in _FOUND:
        policies, expected = site_policies(plan), EXPECTED[plan.stack]()
        names = sorted(set(policies) & set(expected))
        results = access_of([(n, policies[n], expected[n][0]) for n in names], site_buckets(plan), named_prefixes(policies))
        _FOUND[plan.stack] = dict(zip(names, results))
    return _FOUND[plan.stack]


def expanded(grants: dict[str, dict[str, object]], prefixes: list[str]) -> dict[str, dict[str, object]]:
    """The expected grants as the probe summary shows them: a granted prefix allows every probed prefix under it."""
    probes = ["", *prefixes, INTRUDER]
    return {bucket: {verb: g if g == "whole" else [p for p in probes if any(p.startswith(x) for x in g)] for verb, g in verbs.items()}
            for bucket, verbs in grants.items()}


def test_every_minio_policy_the_program_ships_has_its_expected_access(plan):
    assert sorted(site_policies(plan)) == sorted(EXPECTED[plan.stack]()), (
        "a MinIO policy ships without its expected access in tests/test_minio_policies.py, or one expected is gone")


@pytest.mark.parametrize("kind", ["fab-training-", "fab-iceberg-maintenance", "fab-remote-", "fab-replica-", "fab-vendor-",
                                  "fab-metrics", "engines"])
def test_each_principal_reaches_exactly_its_buckets_and_prefixes(plan, kind):
    expected, prefixes = EXPECTED[plan.stack](), named_prefixes(site_policies(plan))
    engines = {n for n in expected if not n.startswith(("fab-training-", "fab-iceberg-maintenance", "fab-remote-", "fab-replica-",
                                                        "fab-vendor-", "fab-metrics"))}
    names = sorted(engines if kind == "engines" else {n for n in expected if n.startswith(kind)})
    assert names or (plan.stack, kind) in ABSENT, f"{plan.stack} has no {kind} principal"
    got = {n: found(plan)[n][0] for n in names}
    assert got == {n: expanded(expected[n][1], prefixes) for n in names}


def test_only_minio_admin_statements_are_beyond_the_evaluator(plan):
    assert {n: [s.get("Sid") for s in unevaluated] for n, (_, unevaluated) in found(plan).items() if unevaluated} == MINIO_ONLY


def test_a_vendor_reaches_nothing_from_outside_its_ranges(plan):
    policies = site_policies(plan)
    vendors = sorted(n for n in policies if n.startswith("fab-vendor-"))
    assert vendors
    results = access_of([(n, policies[n], OUTSIDE) for n in vendors], site_buckets(plan), named_prefixes(policies))
    assert [summary for summary, _ in results] == [{} for _ in vendors]


def test_a_team_cannot_reach_a_prefix_that_only_starts_like_its_own(plan_a):
    """`yield/*` is not `yield-shadow/...`: a neighbour whose name extends a team's gets nothing of the team's."""
    policy = site_policies(plan_a)["fab-training-yield"]
    requests = [S3Request("s3:ListBucket", "site-a-checkpoints", prefix="yield"),
                S3Request("s3:ListBucket", "site-a-checkpoints", prefix="yield-shadow/"),
                S3Request("s3:PutObject", "site-a-checkpoints", key="yield-shadow/ckpt-1"),
                S3Request("s3:GetObject", "site-a-checkpoints", key="yield"),
                S3Request("s3:ListBucket", "site-a-checkpoints", prefix="yield/run-1/")]
    assert list(evaluate("fab-training-yield", policy, requests).allowed.values()) == [False, False, False, False, True]


def test_the_replication_principal_reads_only_the_served_models_of_the_models_bucket():
    """With `replicate_models` (neither stack file has it: the smallest site copying its models to site-u), the replication
    principal lists and reads the served model's weights and nothing else of the models bucket: no team's prefix."""
    site = small_site()
    site["federation"] = {"consumers": {"site-u": {"replicate_gold": False, "replicate_models": True}},
                          "ranges": {"site-u": ["172.20.0.0/16"]}}
    plan = render_small(site)
    policies = site_policies(plan)
    prefixes = named_prefixes(policies)
    assert "yield/" in prefixes  # the team's own prefix is probed
    ((summary, unevaluated),) = access_of([("fab-replication", policies["fab-replication"], "10.0.0.10")], site_buckets(plan), prefixes)
    assert (summary, unevaluated) == (expanded({"site-t-models": under(["qwen/qwen3-8b/"], PREFIX_RO)}, prefixes), [])
