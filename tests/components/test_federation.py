"""Cross-site federation: peers read by StackReference, gold-only replication, catalogs on the peer's Polaris.

The linked stack files (site-a and site-b read each other) show the StackReferences; the config checks and the flows are
shown on a small site federated with a site-u that is not linked yet."""

from __future__ import annotations

import json

import pytest

from components.config import parse_site
from fabctl.render import RenderError, render_config
from helpers import config_errors, render_small, rendered, stack_config
from small_site import small_site

SITE_U_RANGES = ["172.20.0.0/16", "172.21.0.0/16"]


def federated_site() -> dict:
    """The smallest site, reading site-u's gold and replicating its own there, where team yield may train."""
    site = small_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"consumers": {"site-u": {"remote_training_teams": ["yield"]}}, "peers": {"site-u": {}},
                          "ranges": {"site-u": list(SITE_U_RANGES)}}
    return site

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
    return render_config("site-b", stack_config("site-b"), stack_references={"fab/fab-platform/site-a": SITE_A_EXPORTS})


def test_peers_are_read_by_stack_reference(site_b_with_site_a):
    refs = site_b_with_site_a.of_type("pulumi:pulumi:StackReference")
    assert [r["inputs"]["name"] for r in refs] == ["fab/fab-platform/site-a"]


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
    (cron,) = site_b_with_site_a.objects("CronJob", "site-b-storage")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    mirrors = [c["args"] for c in [*pod["initContainers"], *pod["containers"]] if c["args"][0] == "mirror"]
    assert mirrors == [["mirror", "--overwrite", "local/site-b-gold", "remote/$(REMOTE_BUCKET)/site-b-gold"]]
    (policy,) = [r for r in site_b_with_site_a.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == "fab-replication"]
    buckets = {res.split(":::")[1].split("/")[0] for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Effect"] == "Allow" for res in s["Resource"]}
    assert buckets == {"site-b-gold"}


def test_the_gold_copy_job_trusts_the_site_ca(site_b_with_site_a):
    (cron,) = site_b_with_site_a.objects("CronJob", "site-b-storage")
    assert {"name": "site-ca", "secret": {"secretName": "fab-site-ca"}} in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]


def test_the_peers_gold_lands_in_a_replica_bucket_with_its_own_writer(plan_a):
    (bucket,) = [r for r in plan_a.of_type("minio:index/s3Bucket:S3Bucket") if r["inputs"]["bucket"] == "site-a-replica-site-b"]
    assert bucket["protect"] and bucket["retain_on_delete"]
    (policy,) = [r for r in plan_a.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == "fab-replica-site-b"]
    buckets = {res.split(":::")[1].split("/")[0] for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Effect"] == "Allow" for res in s["Resource"]}
    assert buckets == {"site-a-replica-site-b"}


def test_the_offline_render_reads_a_linked_site_from_its_stack_file(plan_a):
    assert plan_a.outputs["federation"] == "[secret]"
    assert [r["inputs"]["name"] for r in plan_a.of_type("pulumi:pulumi:StackReference")] == ["fab/fab-platform/site-b"]
    assert [c["metadata"]["name"] for c in plan_a.objects("CronJob", "site-a-storage")] == ["gold-to-site-b"]


def test_exports_carry_what_peers_need_and_only_that(plan_a):
    (federation,) = [r for r in plan_a.resources if r["type"] == "fab:federation:SiteFederation"]
    assert federation["name"] == "federation"
    assert plan_a.outputs["federation"] == "[secret]"  # principals and replica keys inside: the whole export is secret


def test_fails_when_a_site_federates_with_itself():
    raw = federated_site()
    raw["federation"]["peers"]["site-t"] = {}
    raw["federation"]["ranges"]["site-t"] = ["172.22.0.0/16"]
    assert config_errors(raw) == ["fab-platform:site.federation.peers.site-t: 'site-t' is this site; a site does not federate with itself"]


def test_fails_when_remote_training_has_no_replicated_data():
    raw = federated_site()
    raw["federation"]["consumers"]["site-u"]["replicate_gold"] = False
    assert config_errors(raw) == [
        "fab-platform:site.federation.consumers.site-u.remote_training_teams[0]: team 'yield' cannot train on site-u's "
        "GPUs: no data is replicated there; remote GPUs are used only for replicated (gold) data, so set replicate_gold"
    ]


def test_federation_is_off_by_default():
    site = parse_site(small_site())
    assert (site.federation.peers, site.federation.consumers, site.federation.sites()) == ({}, {}, [])


def test_the_graph_shows_federation_edges():
    from fabctl.graph import mermaid

    text = mermaid(rendered("site-b"))
    assert 'site_b_storage -. "gold replication" .-> site_a(["site-a"])' in text
    assert 'site_b_compute -. "Trino catalog site_a" .-> site_a(["site-a"])' in text


def _unlinked(stack: str) -> dict:
    config = stack_config(stack)
    config["fab-platform:site"]["federation"]["linked"] = []
    return config


def test_a_site_deploys_before_its_federated_sites_exist():
    config = _unlinked("site-b")
    plan = render_config("site-b", config, stack_references={})
    assert plan.of_type("pulumi:pulumi:StackReference") == []
    assert plan.objects("CronJob", "site-b-storage") == []
    assert [s for s in plan.objects("Secret") if s["metadata"]["name"].startswith(("polaris-peer-", "replica-target-"))] == []
    (trino,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "trino"]
    # Its own lake and its external databases, no peer's catalog.
    own = ["fab", *config["fab-platform:site"]["compute"].get("trino", {}).get("external_catalogs", {})]
    assert sorted(trino["inputs"]["values"]["catalogs"]) == sorted(own)


def test_an_unlinked_site_still_sets_up_its_own_side():
    plan = render_config("site-b", _unlinked("site-b"), stack_references={})
    buckets = [r["inputs"]["bucket"] for r in plan.of_type("minio:index/s3Bucket:S3Bucket")]
    assert "site-b-replica-site-a" in buckets
    (setup,) = [c for c in plan.objects("ConfigMap") if c["metadata"]["name"] == "polaris-setup"]
    principals = [p["name"] for p in json.loads(setup["data"]["plan.json"])["principals"]]
    assert "fab-federation-site-a" in principals


def test_fails_when_a_linked_site_exports_nothing():
    with pytest.raises(RenderError) as info:
        render_config("site-b", stack_config("site-b"), stack_references={})
    assert (info.value.user, str(info.value)) == (True, (
        "fab-platform:site.federation.linked: the stack fab/fab-platform/site-a does not export federation.catalog_uri, "
        "which this site needs; deploy site-a with site-b in its federation first, or remove site-a from federation.linked "
        "until then (docs/federation.md)"
    ))


def test_gold_is_replicated_from_phase_05_only_unless_the_stack_says_so(plan_b):
    """Both seeds put gold replication in the last phase: site-b at phase 4, its consumer's replicate_gold unset (and
    without the remote training that needs it), copies no gold; at phase 5 (its stack file) it does."""
    config = stack_config("site-b")
    site = config["fab-platform:site"]
    site["phase"] = 4
    site["federation"]["consumers"]["site-a"] = {}
    plan = render_config("site-b", config, stack_references={"fab/fab-platform/site-a": SITE_A_EXPORTS})
    assert [c["metadata"]["name"] for c in plan.objects("CronJob", "site-b-storage")] == []
    assert [c["metadata"]["name"] for c in plan_b.objects("CronJob", "site-b-storage")] == ["gold-to-site-a"]


def test_the_stack_reference_is_in_the_stacks_own_organization_by_default():
    config = stack_config("site-b")
    del config["fab-platform:site"]["federation"]["organization"]
    plan = render_config("site-b", config, stack_references={"organization/fab-platform/site-a": SITE_A_EXPORTS})
    assert [r["inputs"]["name"] for r in plan.of_type("pulumi:pulumi:StackReference")] == ["organization/fab-platform/site-a"]


def test_fails_when_linked_names_a_site_that_is_not_federated():
    raw = federated_site()
    raw["federation"]["linked"] = ["site-c"]
    assert config_errors(raw) == ["fab-platform:site.federation.linked[0]: 'site-c' is neither a consumer nor a peer; federated sites: site-u"]


def test_federated_sites_reach_only_s3_and_polaris_from_their_ranges():
    plan = render_small(federated_site())
    flows = {name: flow for name, flow in plan.outputs["network"]["flows"].items() if name.startswith("federation-")}
    assert {name: (flow["from_cidrs"], flow["to"], flow["port"], flow["to_namespace"]) for name, flow in flows.items()} == {
        "federation-site-u-s3": (SITE_U_RANGES, ["storage"], 9000, "aistor"),
        "federation-site-u-polaris": (SITE_U_RANGES, ["storage"], 8181, "polaris"),
    }
    (rule,) = [p for p in plan.objects("CiliumClusterwideNetworkPolicy", "site-t-storage")
               if p["metadata"]["name"] == "fab-flow-federation-site-u-s3"]
    assert rule["spec"]["ingress"] == [{
        "fromCIDRSet": [{"cidr": cidr} for cidr in SITE_U_RANGES],
        "toPorts": [{"ports": [{"port": "9000", "protocol": "TCP"}]}],
    }]
    assert rule["spec"]["endpointSelector"] == {"matchLabels": {"aistor.min.io/objectStore": "aistor", "k8s:io.kubernetes.pod.namespace": "aistor"}}


def test_a_peer_only_reaches_s3_to_write_its_replica():
    raw = federated_site()
    del raw["federation"]["consumers"]
    site = parse_site(raw)
    assert sorted(n for n in site.flow_table() if n.startswith("federation-")) == ["federation-site-u-s3"]


def test_fails_when_a_federated_site_has_no_ranges():
    raw = federated_site()
    del raw["federation"]["ranges"]
    assert config_errors(raw) == [
        "fab-platform:site.federation.ranges: has no ranges for 'site-u': its traffic arrives from outside this site's "
        "clusters and is denied unless its source ranges are declared"
    ]


def test_fails_when_a_federated_sites_range_overlaps_this_site():
    raw = federated_site()
    raw["federation"]["ranges"]["site-u"] = ["10.90.0.0/16"]
    assert config_errors(raw) == [
        "fab-platform:site.federation.ranges.site-u[0]: 10.90.0.0/16 overlaps clusters.storage.pod_cidr (10.90.0.0/16) of this site"
    ]


def test_fails_when_a_site_is_linked_twice():
    raw = federated_site()
    raw["federation"]["linked"] = ["site-u", "site-u"]
    assert config_errors(raw) == ["fab-platform:site.federation.linked[1]: 'site-u' is listed twice"]
