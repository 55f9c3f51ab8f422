"""fabctl diff's comparison of two renders: additions, changes, replacements, deletions, aliases."""

from __future__ import annotations

import copy

from fabctl.diff import diff
from fabctl.render import Plan


def test_a_resource_moved_with_an_alias_is_neither_added_nor_deleted(small_plan):
    after = small_plan
    before = copy.deepcopy(after.resources)
    (moved,) = [r for r in before if r["name"] == "compute-ns-airflow"]
    moved["urn"] = "urn:pulumi:site-t::fab-platform::fab:training:TrainingPool$kubernetes:core/v1:Namespace::training-compute-ns-airflow"
    moved["name"] = "training-compute-ns-airflow"
    result = diff(Plan("site-t", before), after)
    assert (result.added, result.removed) == ([], [])


def test_a_changed_object_name_is_a_replacement(small_plan):
    after = small_plan
    before = copy.deepcopy(after.resources)
    (namespace,) = [r for r in before if r["name"] == "compute-ns-trino"]
    namespace["inputs"]["metadata"]["name"] = "trino-old"
    result = diff(Plan("site-t", before), after)
    assert [c.urn.rsplit("::", 1)[-1] for c in result.replaced] == ["compute-ns-trino"]
    assert result.replaced[0].paths == ["metadata.name"]
