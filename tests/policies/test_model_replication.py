"""Models leave the site only when the stack says so: fab-residency lets the models bucket be marked replicable, and
fab-replication-gold-only lets a copy job send it, only while the stack's config copies models to a consumer
(`federation.consumers.<site>.replicate_models`), to that consumer, and without the peers' models the site keeps under
`replicas/`. Every other class stays refused. The pack reads the config as the CLI hands it (PULUMI_CONFIG): the plan's
config through the real analyzer, the environment in the unit tests."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from policy_fixtures import SAFE, check, k8s, kube, resource
from rules.storage import replication_gold_only, residency
from small_site import small_site

from fabctl._mockrun import UNKNOWN_VALUE
from fabctl.policy import analyze_in_process
from fabctl.render import Plan, render_config
from fabctl.stackfile import SITE_KEY

SITE_U_EXPORTS = {"federation": {
    "site": "site-u", "catalog_uri": "http://polaris.site-u.fab.internal:8181/api/catalog", "warehouse": "fab",
    "gold_namespace": "gold", "s3_endpoint": "https://s3.site-u.fab.internal:9000",
    "principals": {"site-t": {"client_id": "u-for-t", "client_secret": "u-secret-for-t"}},
    "replica_targets": {"site-t": {"endpoint": "https://s3.site-u.fab.internal:9000", "bucket": "site-u-replica-site-t",
                                   "access_key": "UKEY", "secret_key": "u-replica-secret", "models_bucket": "site-u-models",
                                   "models_prefix": "replicas/site-t/"}},
}}
JOB = "CronJob fab-replication/models-to-site-u on site-t-storage"
TARGET = "remote/$(REMOTE_MODELS_BUCKET)/$(REMOTE_MODELS_PREFIX)"
MIRROR = ["mirror", "--overwrite", "--exclude", "replicas/*", "local/site-t-models", TARGET]
SERVED, SERVED_TARGET = "local/site-t-models/qwen/qwen3-8b/", f"{TARGET}qwen/qwen3-8b/"
"""What the site's copy job mirrors: its served model's path (`SiteConfig.replicated_models`)."""


def models_site() -> dict:
    """The smallest site with a raw bucket, copying its models (no gold) to site-u, which is deployed (linked)."""
    site = small_site()
    site["storage"]["buckets"]["site-t-raw-fdc"] = {"class": "raw"}
    site["federation"] = {"consumers": {"site-u": {"replicate_gold": False, "replicate_models": True}}, "peers": {"site-u": {}},
                          "linked": ["site-u"], "ranges": {"site-u": ["172.20.0.0/16"]}}
    return site


@pytest.fixture(scope="module")
def models_plan() -> Plan:
    return render_config("site-t", {SITE_KEY: models_site()}, stack_references={"organization/fab-platform/site-u": SITE_U_EXPORTS})


def with_job(plan: Plan, labels: dict | None = None, **container_changes) -> Plan:
    """The plan with the models copy job's labels, or its copying container, changed."""
    resources = copy.deepcopy(plan.resources)
    (job,) = [r for r in resources if r["name"] == "federation-models-site-u"]
    if labels is not None:
        job["inputs"]["metadata"]["labels"] = labels
    (mirror,) = job["inputs"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    mirror.update(container_changes)
    return dataclasses.replace(plan, resources=resources)


def without_model_replication(plan: Plan) -> Plan:
    """The plan judged under a stack config that no longer copies models to site-u."""
    config = copy.deepcopy(plan.config)
    site = json.loads(config[SITE_KEY])
    del site["federation"]["consumers"]["site-u"]["replicate_models"]
    config[SITE_KEY] = json.dumps(site)
    return dataclasses.replace(plan, config=config)


def messages(violations) -> list[tuple[str, str]]:
    return [(v.policy, v.message.splitlines()[-1]) for v in violations]


# Through the analyzer, on the rendered site ------------------------------------------------------------------

def test_the_models_copy_job_of_a_consumer_that_keeps_models_passes(models_plan):
    assert messages(analyze_in_process(models_plan)) == []


def test_fails_when_the_stack_no_longer_replicates_models(models_plan):
    assert sorted(messages(analyze_in_process(without_model_replication(models_plan)))) == [
        ("fab-replication-gold-only",
         (f"container mirror of {JOB} copies {SERVED} to {SERVED_TARGET}, bucket site-t-models (class models), to consumer "
          "site-u; models leave the site only in the copy job of a consumer with federation.consumers.<site>.replicate_models: "
          "true (none)")),
        ("fab-residency",
         ("bucket site-t-models of class models is marked 'replicable'; only gold may leave the site, and models as 'replicable' "
          "only while the stack copies them to a consumer with federation.consumers.<site>.replicate_models: true (none)")),
    ]


def test_fails_when_the_models_copy_job_copies_to_another_consumer(models_plan):
    plan = with_job(models_plan, labels={"fab.internal/replicates": "models", "fab.internal/replicates-to": "site-v"})
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies {SERVED} to {SERVED_TARGET}, bucket site-t-models (class models), to consumer "
         "site-v; models leave the site only in the copy job of a consumer with federation.consumers.<site>.replicate_models: "
         "true (site-u)"),
    )]


def test_fails_when_a_job_copying_models_names_no_consumer(models_plan):
    plan = with_job(models_plan, labels={"fab.internal/replicates": "models"})
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies {SERVED} to {SERVED_TARGET}, bucket site-t-models (class models), in a workload "
         "labelled for no consumer (fab.internal/replicates-to is unset); models leave the site only in the copy job of a "
         "consumer with federation.consumers.<site>.replicate_models: true (site-u)"),
    )]


def test_fails_closed_when_the_consumer_of_a_models_copy_is_unknown(models_plan):
    plan = with_job(models_plan, labels={"fab.internal/replicates": "models", "fab.internal/replicates-to": UNKNOWN_VALUE})
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies {SERVED} to {SERVED_TARGET}, bucket site-t-models (class models), to a consumer "
         "that can't be known during preview (its fab.internal/replicates-to label is unknown), so this rule fails closed"),
    )]


def test_fails_when_the_models_copy_carries_the_peers_models_the_site_keeps(models_plan):
    plan = with_job(models_plan, args=["mirror", "--overwrite", "local/site-t-models", TARGET])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/site-t-models to {TARGET}, the whole bucket site-t-models (class models) "
         "without --exclude replicas/*: the peers' models this site keeps under replicas/ would leave with it; only this "
         "site's own models leave it"),
    )]


def test_fails_when_the_models_copy_sends_a_peers_models_on(models_plan):
    plan = with_job(models_plan, args=["mirror", "--overwrite", "local/site-t-models/replicas/site-z/", TARGET])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/site-t-models/replicas/site-z/ to {TARGET}, the peers' models this site "
         "keeps under replicas/; only this site's own models leave it"),
    )]


def test_fails_when_the_job_of_a_consumer_that_keeps_models_copies_raw_data(models_plan):
    plan = with_job(models_plan, args=["mirror", "--overwrite", "local/site-t-raw-fdc", TARGET])
    assert messages(analyze_in_process(plan)) == [(
        "fab-replication-gold-only",
        (f"container mirror of {JOB} copies local/site-t-raw-fdc to {TARGET}, bucket site-t-raw-fdc (class raw); only gold "
         "buckets leave the site, and models to a consumer the stack replicates them to"),
    )]


# The rules alone, with the stack's config in the environment -----------------------------------------------

MC = "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z"


def tags(bucket: str, data_class: str, residency_: str = "site-local") -> object:
    return resource("pulumi-python:dynamic/storage:BucketTags", {"bucket": bucket, "tags": {
        "fab.internal/class": data_class, "fab.internal/residency": residency_}}, f"tags-{bucket}")


@pytest.fixture
def replicating_models(monkeypatch):
    """The stack's config copies models to site-u, as the CLI hands it to the pack."""
    site = models_site()
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({SITE_KEY: json.dumps(site)}))


def copy_job(*args: str, labels: dict | None = None) -> object:
    spec = {"containers": [{**SAFE, "name": "copy", "image": MC, "args": list(args)}]}
    job = k8s("Job", "copy", "fab-replication", api="batch/v1", labels=labels, spec={"template": {"spec": spec}})
    return kube(job, "site-t-storage")


def test_a_replicable_models_bucket_passes_while_the_stack_replicates_models(replicating_models):
    assert check(residency, [tags("site-t-models", "models", "replicable")]) == []


def test_fails_when_the_models_bucket_is_marked_as_a_replica(replicating_models):
    assert check(residency, [tags("site-t-models", "models", "replica")]) == [
        ("bucket site-t-models of class models is marked 'replica'; only gold may leave the site, and models as 'replicable' "
         "only while the stack copies them to a consumer with federation.consumers.<site>.replicate_models: true (site-u)")
    ]


def test_fails_when_raw_data_is_marked_replicable_while_models_replicate(replicating_models):
    assert check(residency, [tags("site-t-raw-fdc", "raw", "replicable")]) == [
        "bucket site-t-raw-fdc of class raw is marked 'replicable'; only gold may leave the site"
    ]


def test_fails_when_the_pack_gets_no_stack_config(monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert check(residency, [tags("site-t-models", "models", "replicable")]) == [
        ("bucket site-t-models of class models is marked 'replicable'; only gold may leave the site, and models as 'replicable' "
         "only while the stack copies them to a consumer with federation.consumers.<site>.replicate_models: true (none; the "
         "stack's config did not reach the policy pack, which the Pulumi CLI and fabctl pass in PULUMI_CONFIG)")
    ]


def test_an_exclude_written_with_an_equals_sign_leaves_the_peers_models_out(replicating_models):
    job = copy_job("mirror", "--exclude=replicas/*", "local/site-t-models", "remote/b/replicas/site-t/",
                   labels={"fab.internal/replicates-to": "site-u"})
    assert check(replication_gold_only, [tags("site-t-models", "models", "replicable"), job]) == []


def test_fails_when_the_models_bucket_replicates_by_bucket_replication(replicating_models):
    replication = resource("minio:index/s3BucketReplication:S3BucketReplication", {"bucket": "site-t-models"}, "repl-models")
    assert check(replication_gold_only, [tags("site-t-models", "models", "replicable"), replication]) == [
        ("repl-models replicates bucket site-t-models (class models) to another store; only gold buckets leave the site by "
         "bucket replication (models only by the copy job of a consumer the stack replicates them to)")
    ]
