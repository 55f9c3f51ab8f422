"""Remote-site GPU training only on replicated data (DESIGN section 2): a linked peer's team that trains here gets a
queue confined to the clusters its quotas name, a Keycloak group, and S3 keys for the peer's replica and its own
checkpoint prefix, nothing else of this site, and only once the peer's stack lists the team.

The smallest site (site-t) hosts team yield of site-u, a peer whose stack outputs the tests supply."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.config import credential_holders, parse_site
from fabctl.render import RenderError, render_config
from fabctl.stackfile import SITE_KEY
from helpers import config_errors
from small_site import add_gpu_cluster, small_site

PEER = "site-u"
NAMESPACE = "remote-site-u-yield"


def hosting_site(quotas: dict[str, Any] | None = None, linked: bool = True) -> dict[str, Any]:
    """The smallest site reading site-u's gold, where site-u's team yield trains on the gpu cluster."""
    site = small_site()
    site["federation"] = {"peers": {PEER: {"remote_training": {"yield": quotas or {"gpu": {"gpus": 8}}}}},
                          "ranges": {PEER: ["172.20.0.0/16"]}, "linked": [PEER] if linked else []}
    return site


def peer_exports(consents: list[str]) -> dict[str, Any]:
    """site-u's stack outputs: its catalog for site-t's Trino, and the teams it lets train at site-t."""
    return {f"organization/fab-platform/{PEER}": {"federation": {
        "site": PEER, "catalog_uri": "http://polaris.site-u.fab.internal:8181/api/catalog", "warehouse": "fab",
        "gold_namespace": "gold", "s3_endpoint": "https://s3.site-u.fab.internal:9000",
        "principals": {"site-t": {"client_id": "u-for-t", "client_secret": "u-secret-for-t"}},
        "replica_targets": {}, "remote_training_teams": {"site-t": consents},
    }}}


_PLANS: dict[str, Any] = {}


def hosted(site: dict[str, Any], consents: tuple[str, ...] = ("yield",)):
    key = json.dumps([site, consents], sort_keys=True)
    if key not in _PLANS:
        _PLANS[key] = render_config("site-t", {SITE_KEY: site}, stack_references=peer_exports(list(consents)))
    return _PLANS[key]


@pytest.fixture(scope="module")
def plan():
    return hosted(hosting_site())


def in_namespace(plan, kind: str, cluster: str = "site-t-gpu") -> list[dict]:
    return [o for o in plan.objects(kind, cluster) if o["metadata"].get("namespace") == NAMESPACE]


def test_a_peers_team_gets_a_namespace_queue_and_local_queue(plan):
    (namespace,) = [n for n in plan.objects("Namespace", "site-t-gpu") if n["metadata"]["name"] == NAMESPACE]
    assert {k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith("fab.internal/")} == {
        "fab.internal/kueue-managed": "true", "fab.internal/remote-team": "yield", "fab.internal/remote-site": PEER,
    }
    (queue,) = [q for q in plan.objects("ClusterQueue", "site-t-gpu") if q["metadata"]["name"] == NAMESPACE]
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == {"cpu": "128", "memory": "1024Gi", "nvidia.com/gpu": "8"}
    assert [q["spec"] for q in in_namespace(plan, "LocalQueue")] == [{"clusterQueue": NAMESPACE}]


def test_a_peers_team_acts_through_its_own_keycloak_group(plan):
    groups = [g["inputs"]["name"] for g in plan.of_type("keycloak:index/group:Group")]
    assert NAMESPACE in groups
    (binding,) = in_namespace(plan, "RoleBinding")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"oidc:{NAMESPACE}"}]


def test_a_peers_team_reads_only_the_replica_and_writes_only_its_checkpoint_prefix(plan):
    (policy,) = [p for p in plan.of_type("minio:index/iamPolicy:IamPolicy") if p["inputs"]["name"] == f"fab-{NAMESPACE}"]
    allowed = {(s["Sid"], r) for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Effect"] == "Allow" for r in s["Resource"]}
    assert allowed == {
        ("LocateReplica", "arn:aws:s3:::site-t-replica-site-u"),
        ("ListReplica", "arn:aws:s3:::site-t-replica-site-u"), ("ReadReplica", "arn:aws:s3:::site-t-replica-site-u/*"),
        ("ListOwnPrefix", "arn:aws:s3:::site-t-checkpoints"), ("OwnPrefix", f"arn:aws:s3:::site-t-checkpoints/{NAMESPACE}/*"),
    }


def test_a_peers_team_lists_the_checkpoints_bucket_under_its_prefix_only(plan):
    (policy,) = [p for p in plan.of_type("minio:index/iamPolicy:IamPolicy") if p["inputs"]["name"] == f"fab-{NAMESPACE}"]
    (listing,) = [s for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Sid"] == "ListOwnPrefix"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{NAMESPACE}/*"]}}


def test_a_peers_team_gets_its_own_keys_and_no_catalog(plan):
    secrets = in_namespace(plan, "Secret")
    assert [(s["metadata"]["name"], s["metadata"]["labels"]) for s in secrets] == [
        ("s3-remote-training", {"fab.internal/engine": "remote-training"})
    ]


def test_the_keys_carry_the_peers_consent(plan):
    (secret,) = in_namespace(plan, "Secret")
    assert secret["metadata"]["annotations"] == {"fab.internal/consented-by": PEER}


def test_the_submission_contract_names_a_peers_team(plan):
    assert plan.outputs["training"]["remote_submission"] == {
        PEER: {"yield": {"cluster": "site-t-gpu", "namespace": NAMESPACE, "local_queue": "training"}}
    }


def test_fails_when_the_peer_has_not_consented():
    with pytest.raises(RenderError) as info:
        hosted(hosting_site(), consents=())
    assert (
        "fab-platform:site.federation.peers.site-u.remote_training.yield: the stack organization/fab-platform/site-u does "
        "not list 'yield' in federation.consumers.site-t.remote_training_teams, so site-u has not agreed that the team "
        "trains here; add it there and deploy site-u, or remove the team here (docs/federation.md)"
    ) in str(info.value)


def test_a_peers_team_is_confined_to_the_clusters_its_quotas_name():
    site = hosting_site({"gpu-train": {"gpus": 8}})
    add_gpu_cluster(site, "gpu-train")
    (queue,) = [q for q in hosted(site).objects("ClusterQueue", "site-t-gpu") if q["metadata"]["name"] == NAMESPACE]
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    assert flavor["resources"] == [{"name": r, "nominalQuota": "0", "borrowingLimit": "0"} for r in ("cpu", "memory", "nvidia.com/gpu")]


def test_an_unlinked_peers_team_is_not_set_up_yet():
    plan = render_config("site-t", {SITE_KEY: hosting_site(linked=False)}, stack_references={})
    assert [n for n in plan.objects("Namespace") if n["metadata"]["name"] == NAMESPACE] == []
    assert [p for p in plan.of_type("minio:index/iamUser:IamUser") if p["inputs"]["name"] == f"fab-{NAMESPACE}"] == []


def test_the_producer_exports_its_consent():
    site = small_site()
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"consumers": {PEER: {"remote_training_teams": ["yield"]}}, "ranges": {PEER: ["172.20.0.0/16"]}}
    plan = render_config("site-t", {SITE_KEY: site}, stack_references={}, reveal_outputs=True)
    assert plan.outputs["federation"]["remote_training_teams"] == {PEER: ["yield"]}


def test_gpu_clusters_hold_the_remote_teams_keys():
    assert credential_holders(parse_site(hosting_site()))["s3"]["gpu"] == ["inference", "remote-training", "training"]


def test_fails_when_a_peers_team_trains_on_an_unknown_cluster():
    assert config_errors(hosting_site({"gpu-z": {"gpus": 8}})) == [
        "fab-platform:site.federation.peers.site-u.remote_training.yield.gpu-z: 'gpu-z' is not a GPU cluster with a gpu "
        "section; known: gpu"
    ]


def test_fails_when_a_peers_team_names_no_cluster():
    site = hosting_site()
    site["federation"]["peers"][PEER]["remote_training"]["yield"] = {}
    assert config_errors(site) == [
        "fab-platform:site.federation.peers.site-u.remote_training.yield: gives site-u's team 'yield' no GPU cluster; name "
        "the clusters it trains on: gpu"
    ]


def test_fails_when_a_peers_team_lends_more_than_its_quota():
    assert config_errors(hosting_site({"gpu": {"gpus": 2, "lending_limit_gpus": 4}})) == [
        "fab-platform:site.federation.peers.site-u.remote_training.yield.gpu.lending_limit_gpus: 4 is more than the team's "
        "nominal quota (gpus: 2); Kueue refuses a lendingLimit above nominalQuota: lend at most 2"
    ]


def test_fails_when_a_peers_team_namespace_is_too_long():
    site = hosting_site()
    site["federation"]["peers"][PEER]["remote_training"] = {"t" * 50: {"gpu": {"gpus": 8}}}
    assert config_errors(site) == [
        f"fab-platform:site.federation.peers.site-u.remote_training.{'t' * 50}: namespace 'remote-site-u-{'t' * 50}' "
        "('remote-' + peer + '-' + team) has 64 characters; Kubernetes allows at most 63: the peer's and the team's names "
        "together may have at most 55"
    ]


def test_fails_when_a_peers_team_and_the_sites_teams_exceed_the_training_pool():
    site = hosting_site()
    site["training"] = {"quotas": {"yield": {"gpu": {"gpus": 4}}}}
    assert config_errors(site) == [
        "fab-platform:site.training.quotas: teams' GPU quotas on gpu add up to 12 (site-u/yield 8, yield 4) but its training "
        "pool has 8 GPUs; lower nominal quotas and let teams borrow instead"
    ]
