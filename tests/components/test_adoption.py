"""Adopting a running site: what exists is imported when the config says so, and never created over otherwise."""

from __future__ import annotations

import json

import pytest

from components.config import parse_site
from components.minio_admin import taken_names
from fabctl.commands.pulumi_import import import_file
from fabctl.render import RenderError
from fabctl.stackfile import SITE_KEY
from helpers import config_errors, render_config, render_small, site_raw
from small_site import small_site


def imported(plan) -> dict[str, str]:
    return {r["name"]: r["import_id"] for r in plan.resources if r.get("import_id")}


def test_the_stack_files_import_what_they_declare_and_nothing_else(plan):
    adopt = parse_site(site_raw(plan.stack)).adopt
    found = imported(plan)
    assert found, "the stack adopts nothing"
    expected = sorted([*adopt.buckets, *(ref for refs in adopt.helm_releases.values() for ref in refs)])
    assert sorted(found.values()) == expected


def test_a_declared_namespace_and_minio_user_are_imported():
    raw = small_site()
    raw["adopt"]["namespaces"] = {"compute": ["airflow"]}
    raw["adopt"]["minio_users"] = ["fab-spark"]
    found = imported(render_small(raw))
    assert (found["compute-ns-airflow"], found["storage-spark-user"]) == ("airflow", "fab-spark")


def test_fails_when_an_adopted_object_is_not_one_the_platform_manages():
    raw = small_site()
    raw["adopt"]["namespaces"] = {"compute": ["airflw"]}
    with pytest.raises(RenderError) as info:
        render_small(raw)
    assert (info.value.user, str(info.value)) == (True, (
        "fab-platform:site.adopt.namespaces.compute[0]: 'airflw' is not an object the platform manages; remove it or fix the name"
    ))


def test_fails_when_an_adopted_bucket_is_not_declared():
    raw = small_site()
    raw["adopt"]["buckets"] = ["site-t-modles"]
    assert config_errors(raw) == [
        "fab-platform:site.adopt.buckets[0]: 'site-t-modles' is not a bucket of storage.buckets or a federation replica bucket"
    ]


def test_fails_when_cilium_would_be_installed_over_a_running_storage_cluster():
    raw = small_site()
    del raw["adopt"]["helm_releases"]["storage"]
    assert config_errors(raw) == [
        "fab-platform:site.clusters.storage.cilium.managed: true (the default) would install Cilium over the CNI of a "
        "running cluster (storage.object_store.install is false: its AIStor is adopted); adopt its Cilium release with "
        "adopt.helm_releases.storage: [kube-system/cilium], or set managed: false where Cilium is installed by other means"
    ]


def test_an_unmanaged_cilium_needs_no_adoption():
    raw = small_site()
    del raw["adopt"]["helm_releases"]["storage"]
    raw["clusters"]["storage"]["cilium"] = {"managed": False}
    assert parse_site(raw).clusters["storage"].cilium.managed is False


def test_fails_when_a_realm_is_adopted_but_not_managed():
    raw = small_site()
    raw["adopt"]["realm"] = True
    assert config_errors(raw) == [
        "fab-platform:site.adopt.realm: true needs identity.create_realm: true; a realm the platform does not manage is only referenced"
    ]


def test_minio_users_policies_and_buckets_wait_for_a_name_check_of_their_name(small_plan):
    # The site's check covers the engines' names and the buckets; each training team's user and policy have their own,
    # so that adding a team changes no existing resource.
    kinds = {"minio:index/iamUser:IamUser": "users", "minio:index/iamPolicy:IamPolicy": "policies",
             "minio:index/s3Bucket:S3Bucket": "buckets"}
    checks = {r["urn"]: r for r in small_plan.resources if r["type"].endswith(":MinioNamesFree")}
    waiting = [r for r in small_plan.resources if r["type"] in kinds and small_plan.component(r)["name"] == "storage"]
    assert waiting
    unchecked = [r["name"] for r in waiting
                 if not any((r["inputs"].get("name") or r["inputs"].get("bucket")) in checks[urn]["inputs"]["names"][kinds[r["type"]]]
                            for urn in r["dependencies"] if urn in checks)]
    assert unchecked == []


def test_the_name_check_knows_what_is_adopted():
    raw = small_site()
    raw["adopt"] = {"buckets": ["site-t-models"], "minio_users": ["fab-spark"], "helm_releases": raw["adopt"]["helm_releases"]}
    (guard,) = [r for r in render_small(raw).resources if r["name"] == "storage-names-free"]
    assert guard["inputs"]["adopted"] == {"buckets": ["site-t-models"], "policies": [], "users": ["fab-spark"]}
    assert "site-t-models" in guard["inputs"]["names"]["buckets"] and "fab-spark" in guard["inputs"]["names"]["users"]


def test_an_installed_object_store_needs_no_name_check():
    raw = small_site()
    raw["storage"]["object_store"] = {"install": True}
    raw["adopt"]["helm_releases"].pop("storage")
    config = {SITE_KEY: raw, "fab-platform:aistorLicense": {"secure": "v1:license"}, "fab-platform:aistorRootPassword": {"secure": "v1:password"}}
    plan = render_config("site-t", config)
    assert [r["name"] for r in plan.resources if r["type"].endswith(":MinioNamesFree")] == []


def test_fails_when_a_minio_user_to_create_exists_already():
    exists = lambda kind, name: (kind, name) == ("user", "fab-spark")  # noqa: E731
    failures = taken_names({"names": {"users": ["fab-spark", "fab-trino"]}}, {}, exists)
    assert [(f.property, f.reason) for f in failures] == [(
        "users", "MinIO user 'fab-spark' exists already: creating it would take it over and reset its secret; list it under "
        "adopt.minio_users to import it, or remove it from the object store",
    )]


def test_the_name_check_asks_only_about_names_new_to_it():
    asked = []
    taken_names({"names": {"users": ["fab-spark", "fab-new", "fab-old"]}, "adopted": {"users": ["fab-old"]}},
                {"names": {"users": ["fab-spark"]}}, lambda kind, name: asked.append(name) or False)
    assert asked == ["fab-new"]


def test_the_import_file_lists_the_adopted_objects_with_parents_and_providers():
    raw = small_site()
    raw["adopt"]["buckets"] = ["site-t-warehouse"]
    document = import_file(render_small(raw))
    (bucket,) = [r for r in document["resources"] if r["type"] == "minio:index/s3Bucket:S3Bucket"]
    assert bucket == {"type": "minio:index/s3Bucket:S3Bucket", "name": "storage-bucket-site-t-warehouse", "id": "site-t-warehouse",
                      "parent": "storage", "provider": "site-t-minio"}
    assert document["nameTable"]["storage"] == "urn:pulumi:site-t::fab-platform::pulumi:pulumi:Stack$fab:storage:StorageCluster::storage"
    assert json.loads(json.dumps(document)) == document
