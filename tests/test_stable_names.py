"""Growing a site never replaces anything: additive config changes keep every URN, type and replacement-forcing input."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_site
from fabctl.diff import diff
from fabctl.render import Plan, RenderError
from helpers import render_small
from small_site import add_bucket, add_gpu_cluster, add_model, add_team, full_site, small_site

names = st.from_regex(r"[a-z][a-z0-9]{2,7}", fullmatch=True)


def add_a_team(site: dict[str, Any], name: str) -> None:
    add_team(site, f"t-{name}")


def add_a_model(site: dict[str, Any], name: str) -> None:
    add_model(site, f"m-{name}", params_billion=1.5, layers=28, kv_heads=2, max_context=8192, concurrent_sequences=16, min_replicas=1)


def add_node(site: dict[str, Any], name: str) -> None:
    nodes = site["gpu"]["gpu"]["nodes"]
    gpu_type = next(n["gpu_type"] for n in nodes.values() if n["pool"] == "training")
    nodes[f"gpu-n-{name}"] = {"gpu_type": gpu_type, "gpus": 8, "pool": "training"}


def add_a_bucket(site: dict[str, Any], name: str) -> None:
    # raw and datasets: a gold or warehouse bucket changes Polaris' setup Job, which is replaced by design.
    add_bucket(site, f"{site['name']}-x-{name}", "datasets")


def add_peer(site: dict[str, Any], name: str) -> None:
    federation = site.setdefault("federation", {})
    federation.setdefault("peers", {})[f"site-{name}"] = {}
    has_gold = any(bucket["class"] == "gold" for bucket in site["storage"]["buckets"].values())
    federation.setdefault("consumers", {})[f"site-{name}"] = {"replicate_gold": has_gold}  # a site without gold has none to copy
    federation.setdefault("ranges", {})[f"site-{name}"] = ["172.31.0.0/16"]


ADDITIONS = {"team": add_a_team, "model": add_a_model, "node": add_node, "bucket": add_a_bucket, "federated-site": add_peer}
SITES = {"small": small_site, "full": full_site}
"""The sites that grow: the smallest one, and the one with a training-only cluster, MultiKueue and its own flow table."""
RERUN_BY_DESIGN = "kubernetes:batch/v1:Job"
"""Setup Jobs carry a hash of what they apply in their name: a changed plan is a new run, not lost state."""


def replaced_or_removed(before: Plan, after: Plan) -> list[str]:
    result = diff(before, after)
    return [f"removed: {c.urn}" for c in result.removed] + [
        f"replaced: {c.urn}" for c in result.replaced if c.type != RERUN_BY_DESIGN
    ]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(SITES)), st.lists(st.tuples(st.sampled_from(sorted(ADDITIONS)), names), min_size=1, max_size=3, unique_by=lambda t: t[1]))
def test_additive_changes_replace_and_remove_nothing(base, changes):
    site = SITES[base]()
    for kind, name in changes:
        ADDITIONS[kind](site, name)
    before, after = render_small(SITES[base]()), render_small(site)
    assert replaced_or_removed(before, after) == []
    result = diff(before, after)
    assert result.added or result.changed, "the change left the site as it was"


def test_adding_a_gpu_cluster_replaces_and_removes_nothing(full_plan):
    site = full_site()
    add_gpu_cluster(site, "gpu-train-2")
    after = render_small(site)
    assert replaced_or_removed(full_plan, after) == []
    added = {change.urn.rsplit("::", 1)[-1] for change in diff(full_plan, after).added}
    assert {"site-t-gpu-train-2", "network-gpu-train-2-cilium", "training-compute-multikueue-cluster-gpu-train-2"} <= added


def test_fails_when_a_bucket_is_renamed(small_plan):
    site = small_site()
    site["storage"]["buckets"]["site-t-models-2"] = site["storage"]["buckets"].pop("site-t-models")
    problems = replaced_or_removed(small_plan, render_small(site))
    assert "removed: urn:pulumi:site-t::fab-platform::fab:storage:StorageCluster$minio:index/s3Bucket:S3Bucket::storage-bucket-site-t-models" in problems


def test_a_moved_resource_keeps_its_history_through_an_alias(small_plan):
    (namespace,) = [r for r in small_plan.resources if r["name"] == "compute-ns-airflow"]
    assert namespace["aliases"] == [{"spec": {
        "name": "training-compute-ns-airflow", "parentUrn": "urn:pulumi:site-t::fab-platform::fab:training:TrainingPool::training",
    }}]


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 100000), st.text(max_size=12))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SITES)), st.data())
def test_the_program_renders_or_fails_with_a_config_error(base, data):
    """A mutated site goes through the real program: a render or a clean config error, never a crash."""
    site = SITES[base]()
    paths = []

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append((*path, key))
                walk(value, (*path, key))

    walk(site, ())
    path = data.draw(st.sampled_from(paths))
    parent = site
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = data.draw(json_leaf)
    try:
        parse_site(site)
    except ConfigError:
        expect_user_error = True
    else:
        expect_user_error = False
    try:
        render_small(site)
    except RenderError as exc:
        assert exc.user, str(exc)
        assert expect_user_error
        assert all(line.startswith("fab-platform:") for line in str(exc).splitlines())
    else:
        assert not expect_user_error
