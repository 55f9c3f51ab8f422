"""Models for DR: a site copies its models bucket to a consumer that keeps them for a warm-standby serving cluster
(`federation.consumers.<site>.replicate_models`), and a site keeps a peer's models in a prefix of its own models bucket that
its inference reads (`federation.peers.<peer>.standby_models`): the same replication machinery as gold, with the consumer's
consent read from its stack.

The smallest site (site-t, no gold bucket: models replicate on their own) plays both sides against a site-u whose exports
are written out here; the standby side's own render shows that it exports exactly the keys the producer reads."""

from __future__ import annotations

import copy
import fnmatch
import json
from typing import Any

import pytest
from helpers import config_errors
from small_site import add_model, small_site

from components.config import credential_holders, parse_site
from fabctl.render import Plan, RenderError, render_config
from fabctl.stackfile import SITE_KEY

SITE_U = "organization/fab-platform/site-u"
RANGES = {"site-u": ["172.20.0.0/16"]}
ALLOW = "Allow"


def site_u_exports(**models_target: str) -> dict[str, Any]:
    """What site-u exports to site-t: its replica target for site-t, with `models_target` when it keeps site-t's models."""
    return {"federation": {
        "site": "site-u", "catalog_uri": "http://polaris.site-u.fab.internal:8181/api/catalog", "warehouse": "fab",
        "gold_namespace": "gold", "s3_endpoint": "https://s3.site-u.fab.internal:9000",
        "principals": {"site-t": {"client_id": "u-for-t", "client_secret": "u-secret-for-t"}},
        "replica_targets": {"site-t": {"endpoint": "https://s3.site-u.fab.internal:9000", "bucket": "site-u-replica-site-t",
                                       "access_key": "UKEY", "secret_key": "u-replica-secret", **models_target}},
    }}


KEEPS_MODELS = {"models_bucket": "site-u-models", "models_prefix": "replicas/site-t/"}


def producer_site(**consumer: Any) -> dict[str, Any]:
    """The smallest site copying its models (and no gold: it has none) to site-u, which is deployed (linked)."""
    site = small_site()
    site["federation"] = {"consumers": {"site-u": {"replicate_gold": False, "replicate_models": True, **consumer}},
                          "peers": {"site-u": {}}, "linked": ["site-u"], "ranges": copy.deepcopy(RANGES)}
    return site


def standby_site() -> dict[str, Any]:
    """The smallest site keeping site-u's models for a warm standby; site-u is not linked (nothing of it is read)."""
    site = small_site()
    site["federation"] = {"peers": {"site-u": {"standby_models": True}}, "ranges": copy.deepcopy(RANGES)}
    return site


def render(site: dict[str, Any], exports: dict[str, Any] | None = None, reveal: bool = False) -> Plan:
    return render_config("site-t", {SITE_KEY: site}, stack_references={SITE_U: exports} if exports else {}, reveal_outputs=reveal)


@pytest.fixture(scope="module")
def producer() -> Plan:
    return render(producer_site(), site_u_exports(**KEEPS_MODELS))


@pytest.fixture(scope="module")
def standby() -> Plan:
    return render(standby_site(), reveal=True)


def cronjob(plan: Plan, name: str) -> dict[str, Any]:
    (job,) = [c for c in plan.objects("CronJob", "site-t-storage") if c["metadata"]["name"] == name]
    return job


def policy(plan: Plan, name: str) -> dict[str, Any]:
    (found,) = [r for r in plan.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == name]
    return json.loads(found["inputs"]["policy"])


def allowed(document: dict[str, Any]) -> set[tuple[str, str]]:
    """(action, resource) pairs a MinIO policy allows."""
    return {(a, r) for s in document["Statement"] if s["Effect"] == ALLOW for a in s["Action"] for r in s["Resource"]}


def residency(plan: Plan, bucket: str) -> str:
    (tags,) = [r for r in plan.of_type("pulumi-python:dynamic/storage:BucketTags") if r["inputs"]["bucket"] == bucket]
    return tags["inputs"]["tags"]["fab.internal/residency"]


# The producing site -----------------------------------------------------------------------------------------

def test_the_models_copy_job_mirrors_the_served_models_only(producer):
    job = cronjob(producer, "models-to-site-u")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert [c["args"] for c in pod["containers"]] == [
        ["mirror", "--overwrite", "local/site-t-models/qwen/qwen3-8b/", "remote/$(REMOTE_MODELS_BUCKET)/$(REMOTE_MODELS_PREFIX)qwen/qwen3-8b/"]
    ]
    assert job["metadata"]["labels"] == {"fab.internal/replicates": "models", "fab.internal/replicates-to": "site-u"}


def test_each_served_model_is_mirrored_by_its_own_copy_in_the_job():
    site = producer_site()
    add_model(site, "yield-tuned", source="yield/tuned/", min_replicas=1)
    pod = cronjob(render(site, site_u_exports(**KEEPS_MODELS)), "models-to-site-u")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    mirrors = [c["args"] for c in [*pod["initContainers"], *pod["containers"]] if c["args"][0] == "mirror"]
    assert mirrors == [
        ["mirror", "--overwrite", "local/site-t-models/qwen/qwen3-8b/", "remote/$(REMOTE_MODELS_BUCKET)/$(REMOTE_MODELS_PREFIX)qwen/qwen3-8b/"],
        ["mirror", "--overwrite", "local/site-t-models/yield/tuned/", "remote/$(REMOTE_MODELS_BUCKET)/$(REMOTE_MODELS_PREFIX)yield/tuned/"],
    ]


def test_the_replicated_models_are_the_served_sources_but_the_peers_and_those_inside_another():
    site = producer_site()
    site["federation"]["peers"]["site-u"] = {"standby_models": True}
    add_model(site, "qwen3-8b-instruct", source="qwen/qwen3-8b/instruct")
    add_model(site, "peer-model", source="replicas/site-u/acme/m/")
    add_model(site, "yield-tuned", source="yield/tuned")
    assert parse_site(site).replicated_models() == ("qwen/qwen3-8b/", "yield/tuned/")


def test_nothing_of_the_models_bucket_replicates_without_replicate_models():
    site = producer_site()
    del site["federation"]["consumers"]["site-u"]["replicate_models"]
    assert parse_site(site).replicated_models() == ()


def test_models_replicate_without_gold(producer):
    assert [c["metadata"]["name"] for c in producer.objects("CronJob", "site-t-storage")] == ["models-to-site-u"]


def test_the_target_secret_carries_where_the_consumer_keeps_the_models(producer):
    (secret,) = [s for s in producer.objects("Secret", "site-t-storage") if s["metadata"]["name"] == "replica-target-site-u"]
    assert sorted(secret["stringData"]) == ["REMOTE_ACCESS_KEY", "REMOTE_BUCKET", "REMOTE_ENDPOINT", "REMOTE_MODELS_BUCKET",
                                            "REMOTE_MODELS_PREFIX", "REMOTE_SECRET_KEY"]


def test_the_replication_principal_reads_the_served_models_of_the_models_bucket_once_models_replicate(producer):
    assert allowed(policy(producer, "fab-replication")) == {
        ("s3:ListBucket", "arn:aws:s3:::site-t-models"),
        ("s3:GetObject", "arn:aws:s3:::site-t-models/qwen/qwen3-8b/*"),
        ("s3:GetObjectVersion", "arn:aws:s3:::site-t-models/qwen/qwen3-8b/*"),
    }
    (listing,) = [s for s in policy(producer, "fab-replication")["Statement"] if s.get("Sid") == "ListModelPaths"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["qwen/qwen3-8b/*"]}}


def test_the_models_bucket_is_marked_replicable_once_models_replicate(producer):
    assert residency(producer, "site-t-models") == "replicable"


def test_models_stay_in_the_site_by_default():
    site = producer_site()
    del site["federation"]["consumers"]["site-u"]["replicate_models"]
    plan = render(site, site_u_exports())
    assert plan.objects("CronJob", "site-t-storage") == []
    assert residency(plan, "site-t-models") == "site-local"


def test_fails_when_the_consumer_has_not_agreed_to_keep_the_models():
    with pytest.raises(RenderError) as raised:
        render(producer_site(), site_u_exports())
    assert (
        "fab-platform:site.federation.consumers.site-u.replicate_models: the stack organization/fab-platform/site-u does not "
        "export federation.replica_targets.site-t.models_bucket, so site-u has not agreed to keep site-t's models; set "
        "federation.peers.site-t.standby_models there and deploy site-u, or set replicate_models: false here "
        "(docs/federation.md)"
    ) in str(raised.value)


def test_the_models_copy_job_holds_s3_keys_on_the_storage_cluster():
    holders = credential_holders(parse_site(producer_site()))
    assert holders["s3"]["storage"] == ["polaris", "postgres-backup", "replication"]


# The standby site --------------------------------------------------------------------------------------------

def test_the_standby_exports_where_the_peers_models_go(standby):
    target = standby.outputs["federation"]["replica_targets"]["site-u"]
    assert {key: target[key] for key in ("bucket", "models_bucket", "models_prefix")} == {
        "bucket": "site-t-replica-site-u", "models_bucket": "site-t-models", "models_prefix": "replicas/site-u/"}
    assert set(KEEPS_MODELS) < set(target)  # the keys the producer reads


def test_the_peers_writer_reaches_the_models_bucket_under_its_prefix_only(standby):
    in_models = {(a, r) for a, r in allowed(policy(standby, "fab-replica-site-u")) if "site-t-models" in r}
    assert in_models == {("s3:ListBucket", "arn:aws:s3:::site-t-models"),
                         *((a, "arn:aws:s3:::site-t-models/replicas/site-u/*") for a in (
                             "s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                             "s3:ListMultipartUploadParts"))}
    (listing,) = [s for s in policy(standby, "fab-replica-site-u")["Statement"] if s.get("Sid") == "ListModelsPrefix"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["replicas/site-u/*"]}}


def test_the_standby_inference_reads_the_peers_models(standby):
    reads = [r for a, r in allowed(policy(standby, "fab-inference")) if a == "s3:GetObject"]
    assert reads
    assert any(fnmatch.fnmatchcase("arn:aws:s3:::site-t-models/replicas/site-u/qwen/qwen3-8b/config.json", r) for r in reads)


def test_the_standby_keeps_its_own_models_bucket_site_local(standby):
    assert residency(standby, "site-t-models") == "site-local"


def test_a_standby_model_is_served_from_the_peers_prefix():
    site = standby_site()
    site["inference"]["models"]["qwen3-8b"]["source"] = "replicas/site-u/qwen/qwen3-8b/"
    plan = render(site)
    args = [arg for d in plan.objects("Deployment", "site-t-gpu") for c in d["spec"]["template"]["spec"].get("initContainers", [])
            for arg in c.get("args", [])]
    assert any("site-t-models/replicas/site-u/qwen/qwen3-8b" in arg for arg in args)


# Config checks -------------------------------------------------------------------------------------------------

def test_fails_when_a_model_is_served_from_the_replicas_of_a_peer_whose_models_are_not_kept():
    site = standby_site()
    site["inference"]["models"]["qwen3-8b"]["source"] = "replicas/site-z/qwen/qwen3-8b/"
    assert config_errors(site) == [(
        "fab-platform:site.inference.models.qwen3-8b.source: 'replicas/site-z/qwen/qwen3-8b/' is under replicas/, where this "
        "site keeps the models of the peers it stands by for, but it keeps no models of 'site-z'; peers whose models it keeps "
        "(federation.peers.<peer>.standby_models: true): site-u"
    )]


def test_fails_when_models_replicate_but_the_site_serves_none_of_its_own():
    site = producer_site()
    site["federation"]["peers"]["site-u"] = {"standby_models": True}
    site["inference"]["models"]["qwen3-8b"]["source"] = "replicas/site-u/qwen/qwen3-8b/"
    assert config_errors(site) == [(
        "fab-platform:site.federation.consumers.site-u.replicate_models: true copies the models this site serves "
        "(inference.models.<model>.source) to site-u, but it serves none of its own (a model under replicas/ is a peer's and "
        "stays): serve a model here, or set replicate_models: false"
    )]


def test_fails_when_a_team_is_named_like_the_folder_of_the_peers_models():
    site = standby_site()
    site["teams"]["replicas"] = {"description": "a team named like the folder"}
    assert config_errors(site) == [(
        "fab-platform:site.teams.replicas: a team named 'replicas' owns the prefix replicas/ of the models bucket, where this "
        "site keeps its peers' models (federation.peers.site-u.standby_models): rename the team, so that neither overwrites "
        "the other"
    )]


def test_fails_when_the_models_copy_job_of_a_consumer_would_not_fit_a_cronjob_name():
    consumer = "site-z-downstream-analytics-and-reports-hub"  # 43 characters: `gold-to-` fits, `models-to-` does not
    site = small_site()
    site["federation"] = {"consumers": {consumer: {"replicate_gold": False, "replicate_models": True}},
                          "ranges": {consumer: ["172.20.0.0/16"]}}
    assert config_errors(site) == [(
        f"fab-platform:site.federation.consumers.{consumer}.replicate_models: true needs the CronJob 'models-to-{consumer}' "
        "('models-to-' + consumer), which has 53 characters; Kubernetes allows at most 52: models are copied only to a "
        "consumer whose name has at most 42 characters"
    )]
