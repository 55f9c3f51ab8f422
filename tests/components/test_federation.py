"""Cross-site federation: peers read by StackReference, gold-only replication, catalogs on the peer's Polaris."""

from __future__ import annotations

import json

import pytest

from components.config import ConfigError, parse_site
from fabctl.render import render_config
from helpers import rendered, site_raw, stack_config

SITE_A_EXPORTS = {
    "federation": {
        "site": "site-a",
        "catalog_uri": "http://polaris.site-a.fab.internal:8181/api/catalog",
        "warehouse": "fab",
        "gold_namespace": "gold",
        "s3_endpoint": "https://s3.site-a.fab.internal:9000",
        "principals": {"site-b": {"client_id": "a-for-b", "client_secret": "a-secret-for-b"}},
        "replica_targets": {"site-b": {"endpoint": "https://s3.site-a.fab.internal:9000", "bucket": "site-a-replica-site-b",
                                        "access_key": "AKEY", "secret_key": "a-replica-secret"}},
    }
}


@pytest.fixture(scope="module")
def site_b_with_site_a():
    return render_config("site-b", stack_config("site-b"), stack_references={"organization/fab-platform/site-a": SITE_A_EXPORTS})


def test_peers_are_read_by_stack_reference(site_b_with_site_a):
    refs = site_b_with_site_a.of_type("pulumi:pulumi:StackReference")
    assert [r["inputs"]["name"] for r in refs] == ["organization/fab-platform/site-a"]


def test_trino_gets_a_catalog_on_the_peers_polaris(site_b_with_site_a):
    (trino,) = [r for r in site_b_with_site_a.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    catalog = trino["inputs"]["values"]["catalogs"]["site_a"]
    assert "iceberg.rest-catalog.uri=${ENV:SITE_A_POLARIS_URI}" in catalog
    assert "iceberg.rest-catalog.oauth2.credential=${ENV:SITE_A_POLARIS_CLIENT_ID}:${ENV:SITE_A_POLARIS_CLIENT_SECRET}" in catalog
    assert {"secretRef": {"name": "polaris-peer-site-a"}} in trino["inputs"]["values"]["envFrom"]


def test_the_peer_principal_reaches_trino_only_as_a_secret(site_b_with_site_a):
    (secret,) = [r for r in site_b_with_site_a.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "polaris-peer-site-a"]
    assert set(secret["inputs"]["stringData"].values()) == {"[secret]"}
    assert "a-secret-for-b" not in json.dumps(site_b_with_site_a.to_json())


def test_only_gold_replicates(site_b_with_site_a):
    (cron,) = site_b_with_site_a.objects("CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    mirrors = [c["args"] for c in [*pod["initContainers"], *pod["containers"]] if c["args"][0] == "mirror"]
    assert mirrors == [["mirror", "--overwrite", "local/site-b-gold", "remote/$(REMOTE_BUCKET)/site-b-gold"]]
    (policy,) = [r for r in site_b_with_site_a.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == "fab-replication"]
    buckets = {res.split(":::")[1].split("/")[0] for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Effect"] == "Allow" for res in s["Resource"]}
    assert buckets == {"site-b-gold"}


def test_the_peers_gold_lands_in_a_replica_bucket_with_its_own_writer(plan_a):
    (bucket,) = [r for r in plan_a.of_type("minio:index/s3Bucket:S3Bucket") if r["inputs"]["bucket"] == "site-a-replica-site-b"]
    assert bucket["protect"] and bucket["retain_on_delete"]
    (policy,) = [r for r in plan_a.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == "fab-replica-site-b"]
    buckets = {res.split(":::")[1].split("/")[0] for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Effect"] == "Allow" for res in s["Resource"]}
    assert buckets == {"site-a-replica-site-b"}


def test_site_a_renders_without_site_b(plan_a):
    assert plan_a.outputs["federation"] == "[secret]"
    assert [r["inputs"]["name"] for r in plan_a.of_type("pulumi:pulumi:StackReference")] == ["organization/fab-platform/site-b"]


def test_exports_carry_what_peers_need_and_only_that():
    plan = render_config("site-a", stack_config("site-a"))
    (federation,) = [r for r in plan.resources if r["type"] == "fab:federation:SiteFederation"]
    assert federation["name"] == "federation"
    assert plan.outputs["federation"] == "[secret]"  # principals and replica keys inside: the whole export is secret


def test_fails_when_a_site_federates_with_itself():
    raw = site_raw("site-b")
    raw["federation"]["peers"]["site-b"] = {}
    with pytest.raises(ConfigError) as info:
        parse_site(raw)
    assert info.value.lines == ["fab-platform:site.federation.peers.site-b: 'site-b' is this site; a site does not federate with itself"]


def test_fails_when_remote_training_has_no_replicated_data():
    raw = site_raw("site-b")
    raw["federation"]["consumers"]["site-a"]["replicate_gold"] = False
    with pytest.raises(ConfigError) as info:
        parse_site(raw)
    assert info.value.lines == [
        "fab-platform:site.federation.consumers.site-a.remote_training_teams[0]: team 'yield' cannot train on site-a's "
        "GPUs: no data is replicated there; remote GPUs are used only for replicated (gold) data, so set replicate_gold"
    ]


def test_federation_is_off_by_default():
    raw = site_raw("site-b")
    del raw["federation"]
    assert parse_site(raw).federation.peers == {}


def test_the_graph_shows_federation_edges():
    from fabctl.graph import mermaid

    text = mermaid(rendered("site-b"))
    assert 'site_b_storage -. "gold replication" .-> site_a(["site-a"])' in text
    assert 'site_b_compute -. "Trino catalog site_a" .-> site_a(["site-a"])' in text
