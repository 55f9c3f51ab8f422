"""Residency on the job (fab-replication-gold-only): whatever copies a bucket to another object store (the gold copy job,
any `mc cp|mirror|mv` between two aliases, a bucket replication) copies only this site's gold buckets, read from the
job's own arguments and environment and checked against the buckets' class tags; and fab-residency on the tags alone."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from policy_fixtures import SAFE, check, k8s, kube, resource
from rules.storage import replication_gold_only
from small_site import small_site

from fabctl.policy import analyze_in_process
from fabctl.render import Plan, render_config
from fabctl.stackfile import SITE_KEY

SITE_U_EXPORTS = {"federation": {
    "site": "site-u", "catalog_uri": "http://polaris.site-u.fab.internal:8181/api/catalog", "warehouse": "fab",
    "gold_namespace": "gold", "s3_endpoint": "https://s3.site-u.fab.internal:9000",
    "principals": {"site-t": {"client_id": "u-for-t", "client_secret": "u-secret-for-t"}},
    "replica_targets": {"site-t": {"endpoint": "https://s3.site-u.fab.internal:9000", "bucket": "site-u-replica-site-t",
                                   "access_key": "UKEY", "secret_key": "u-replica-secret"}},
}}
JOB = "CronJob fab-replication/gold-to-site-u on site-t-storage"


def replicating_site() -> dict:
    """The smallest site with a gold and a raw bucket, copying its gold to site-u, which is deployed (linked)."""
    site = small_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["storage"]["buckets"]["site-t-raw-fdc"] = {"class": "raw"}
    site["federation"] = {"consumers": {"site-u": {}}, "peers": {"site-u": {}}, "linked": ["site-u"],
                          "ranges": {"site-u": ["172.20.0.0/16"]}}
    return site


@pytest.fixture(scope="module")
def replicating_plan() -> Plan:
    return render_config("site-t", {SITE_KEY: replicating_site()},
                         stack_references={"organization/fab-platform/site-u": SITE_U_EXPORTS})


def with_mirror(plan: Plan, **container_changes) -> Plan:
    """The plan with the gold copy job's copying container changed."""
    resources = copy.deepcopy(plan.resources)
    (job,) = [r for r in resources if r["name"] == "federation-mirror-site-u"]
    (mirror,) = job["inputs"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    mirror.update(container_changes)
    return dataclasses.replace(plan, resources=resources)


def messages(violations) -> list[tuple[str, str]]:
    return [(v.policy, v.message.splitlines()[-1]) for v in violations]


def test_the_gold_copy_job_passes(replicating_plan):
    assert messages(analyze_in_process(replicating_plan)) == []


def test_fails_when_the_copy_job_mirrors_a_raw_bucket(replicating_plan):
    plan = with_mirror(replicating_plan, args=["mirror", "--overwrite", "local/site-t-raw-fdc", "remote/$(REMOTE_BUCKET)/site-t-raw-fdc"])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/site-t-raw-fdc to remote/$(REMOTE_BUCKET)/site-t-raw-fdc, bucket "
        "site-t-raw-fdc (class raw); only gold buckets leave the site, and models to a consumer the stack replicates them to"),
    )]


def test_fails_when_the_copy_job_mirrors_every_bucket(replicating_plan):
    plan = with_mirror(replicating_plan, args=["mirror", "--overwrite", "local", "remote/$(REMOTE_BUCKET)"])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local to remote/$(REMOTE_BUCKET), every bucket of that store; only gold buckets, "
        "named one by one, leave the site"),
    )]


def test_fails_when_the_source_bucket_comes_from_the_jobs_environment(replicating_plan):
    plan = with_mirror(replicating_plan, args=["cp", "--recursive", "local/$(SOURCE)", "remote/$(REMOTE_BUCKET)/copy"],
                       env=[{"name": "MC_CONFIG_DIR", "value": "/work/.mc"}, {"name": "SOURCE", "value": "site-t-models/qwen"}])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/$(SOURCE) to remote/$(REMOTE_BUCKET)/copy, bucket site-t-models (class "
        "models), to consumer site-u; models leave the site only in the copy job of a consumer with "
        "federation.consumers.<site>.replicate_models: true (none)"),
    )]


def test_fails_closed_when_the_source_bucket_comes_from_a_secret(replicating_plan):
    plan = with_mirror(replicating_plan, args=["mirror", "local/$(REMOTE_BUCKET)", "remote/$(REMOTE_BUCKET)/copy"])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/$(REMOTE_BUCKET) to remote/$(REMOTE_BUCKET)/copy: its bucket can't be "
        "decided from the job (a variable without a literal value), so this rule fails closed; name the gold bucket in the "
        "job's arguments"),
    )]


def test_fails_when_a_shell_script_copies_a_raw_bucket(replicating_plan):
    script = ("mc alias set local $(AWS_ENDPOINT_URL_S3) k s && mc mirror --overwrite local/site-t-gold remote/b/site-t-gold; "
              "mc cp --recursive --older-than 7 local/site-t-raw-fdc/2024/ remote/b/raw/")
    plan = with_mirror(replicating_plan, command=["/bin/sh", "-c", script], args=[])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/site-t-raw-fdc/2024/ to remote/b/raw/, bucket site-t-raw-fdc (class raw); "
        "only gold buckets leave the site, and models to a consumer the stack replicates them to"),
    )]


# The rule alone, on single workloads: what is and is not a copy to another store --------------

MC = "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z"


def tags(bucket: str, data_class: str) -> object:
    return resource("pulumi-python:dynamic/storage:BucketTags", {"bucket": bucket, "tags": {"fab.internal/class": data_class}},
                    f"tags-{bucket}")


BUCKETS = [tags("site-a-gold", "gold"), tags("site-a-raw", "raw")]


def copy_job(*args: str, **container) -> object:
    spec = {"containers": [{**SAFE, "name": "copy", "image": MC, "args": list(args), **container}]}
    return kube(k8s("Job", "copy", "ops", api="batch/v1", spec={"template": {"spec": spec}}), "site-a-storage")


def test_a_download_of_a_raw_bucket_to_a_local_path_is_no_copy_between_stores():
    assert check(replication_gold_only, [*BUCKETS, copy_job("mirror", "local/site-a-raw", "/cache/raw")]) == []


def test_a_copy_within_one_store_stays_in_the_site():
    assert check(replication_gold_only, [*BUCKETS, copy_job("cp", "-r", "local/site-a-raw/x", "local/site-a-gold/x")]) == []


def test_fails_when_an_mc_command_copies_a_bucket_of_no_class():
    job = copy_job("mirror", "--exclude", "*.tmp", "local/scratch", "peer/backup", command=["mc"])
    assert check(replication_gold_only, [*BUCKETS, job]) == [
        ("container copy of Job ops/copy on site-a-storage copies local/scratch to peer/backup, bucket scratch (not a bucket of "
        "this site, so of no class); only gold buckets leave the site, and models to a consumer the stack replicates them to")
    ]


def test_fails_when_a_non_gold_bucket_replicates():
    replication = resource("minio:index/s3BucketReplication:S3BucketReplication", {"bucket": "site-a-raw"}, "repl-raw")
    assert check(replication_gold_only, [*BUCKETS, replication]) == [
        ("repl-raw replicates bucket site-a-raw (class raw) to another store; only gold buckets leave the site by bucket "
         "replication (models only by the copy job of a consumer the stack replicates them to)")
    ]
