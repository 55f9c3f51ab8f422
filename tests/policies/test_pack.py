"""The policy pack end to end: started as the Pulumi CLI starts it and driven over its Analyzer gRPC service."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf import empty_pb2

from fabctl.policy import analyze_with, analyzer
from fabctl.render import Plan
from helpers import STACKS, render_small, rendered
from small_site import full_site

LEVELS = {0: "advisory", 1: "mandatory"}
EXPECTED_RULES = {
    "fab-no-gpu-outside-gpu-clusters": "mandatory",
    "fab-gpu-lb-private-only": "mandatory",
    "fab-gateway-local-traffic": "advisory",
    "fab-routes-authenticated": "mandatory",
    "fab-cross-cluster-default-deny": "mandatory",
    "fab-credentials-have-flow": "mandatory",
    "fab-host-network-allow-listed": "mandatory",
    "fab-single-catalog-authority": "mandatory",
    "fab-bucket-least-privilege": "mandatory",
    "fab-stateful-protected": "mandatory",
    "fab-versioned-artifacts": "mandatory",
    "fab-residency": "mandatory",
    "fab-multikueue-not-own-worker": "mandatory",
    "fab-multikueue-quota-sum": "advisory",
    "fab-serving-not-preemptible": "mandatory",
    "fab-training-kueue-managed": "advisory",
    "fab-training-ib-nccl-only": "advisory",
    "fab-pinned-versions": "mandatory",
    "fab-pod-security": "mandatory",
    "fab-no-plaintext-secrets": "mandatory",
    "fab-remote-training-replica-only": "mandatory",
}


@pytest.fixture(scope="module")
def stub():
    with analyzer() as started:
        yield started


def test_analyzer_info_lists_every_rule_with_its_level(stub):
    info = stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "fab-platform"
    assert {p.name: LEVELS[p.enforcementLevel] for p in info.policies} == EXPECTED_RULES
    assert all(p.description for p in info.policies)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_passes_every_policy(stub, stack):
    assert [(v.policy, v.message) for v in analyze_with(stub, rendered(stack))] == []


def test_the_full_small_site_passes_every_policy(stub, full_plan):
    assert [(v.policy, v.message) for v in analyze_with(stub, full_plan)] == []


# Each modification changes one thing in a render of the full small site (small_site.full_site), which passes every
# policy (the test above), as a mistaken change to the program would.

def modified(plan: Plan, edit: Callable[[list[dict[str, Any]]], None]) -> Plan:
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    return Plan(stack=plan.stack, resources=resources, outputs=plan.outputs)


def find(resources: list[dict[str, Any]], type_suffix: str, name: str) -> dict[str, Any]:
    (match,) = [r for r in resources if r["type"].endswith(type_suffix) and r["name"] == name]
    return match


def containers_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    return record["inputs"]["spec"]["template"]["spec"]["containers"]


def gpu_on_compute(rs):
    containers_of(find(rs, ":Job", "compute-starrocks-setup-job"))[0]["resources"]["limits"]["nvidia.com/gpu"] = "1"


def public_gpu_vip(rs):
    proxy = find(rs, ":EnvoyProxy", "inference-envoy-proxy")
    proxy["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["annotations"]["lbipam.cilium.io/ips"] = "198.51.100.9"


def cluster_traffic(rs):
    find(rs, ":EnvoyProxy", "inference-envoy-proxy")["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["externalTrafficPolicy"] = "Cluster"


def no_jwt(rs):
    rs.remove(find(rs, ":SecurityPolicy", "inference-jwt-qwen3-8b"))


def gpu_train_not_an_s3_source(rs):
    rule = find(rs, ":CiliumClusterwideNetworkPolicy", "network-storage-policy-fab-flow-s3")
    for entry in rule["inputs"]["spec"]["ingress"]:
        entry["fromEndpoints"] = [e for e in entry["fromEndpoints"] if e["matchLabels"]["io.cilium.k8s.policy.cluster"] != "site-t-gpu-train"]


def host_network(rs):
    find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["hostNetwork"] = True


def tables_reachable(rs):
    policy = find(rs, ":IamPolicy", "storage-spark-policy")
    document = json.loads(policy["inputs"]["policy"])
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    policy["inputs"]["policy"] = json.dumps(document)


def s3_star(rs):
    policy = find(rs, ":IamPolicy", "storage-trino-policy")
    document = json.loads(policy["inputs"]["policy"])
    document["Statement"][0]["Action"] = ["s3:*"]
    policy["inputs"]["policy"] = json.dumps(document)


def unprotected_bucket(rs):
    find(rs, ":S3Bucket", "storage-bucket-site-t-gold")["protect"] = False


def unversioned_models(rs):
    rs.remove(find(rs, ":S3BucketVersioning", "storage-bucket-site-t-models-versioning"))


def replicable_raw(rs):
    find(rs, ":BucketTags", "storage-bucket-site-t-raw-fdc-tags")["inputs"]["tags"]["fab.internal/residency"] = "replicable"


def own_worker(rs):
    find(rs, ":MultiKueueCluster", "training-compute-multikueue-cluster-gpu")["inputs"]["metadata"]["name"] = "compute"


def manager_quota(rs):
    queue = find(rs, ":ClusterQueue", "training-compute-queue-yield")
    queue["inputs"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "99"


def serving_priority(rs):
    find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["priorityClassName"] = "fab-training"


def unqueued_job(rs):
    job = copy.deepcopy(find(rs, ":Job", "storage-job-polaris-bootstrap"))
    job["name"], job["urn"] = "stray-training", job["urn"] + "-stray"
    job["inputs"]["metadata"] = {"name": "stray-training", "namespace": "team-yield"}
    rs.append(job)


def ipoib_for_training(rs):
    pool = find(rs, ":IPPool", "gpu-gpu-ipoib-pool")
    pool["inputs"]["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["training"]


def floating_chart(rs):
    find(rs, ":Release", "storage-polaris")["inputs"]["version"] = "1.x"


def writable_root(rs):
    containers_of(find(rs, ":Deployment", "inference-vllm-qwen3-8b"))[0]["securityContext"]["readOnlyRootFilesystem"] = False


def password_in_values(rs):
    find(rs, ":Release", "compute-trino")["inputs"]["values"]["auth"] = {"password": "Pl41nT3xtPassword"}


PLAN_EDITS = {
    "fab-no-gpu-outside-gpu-clusters": gpu_on_compute,
    "fab-gpu-lb-private-only": public_gpu_vip,
    "fab-gateway-local-traffic": cluster_traffic,
    "fab-routes-authenticated": no_jwt,
    "fab-credentials-have-flow": gpu_train_not_an_s3_source,
    "fab-host-network-allow-listed": host_network,
    "fab-single-catalog-authority": tables_reachable,
    "fab-bucket-least-privilege": s3_star,
    "fab-stateful-protected": unprotected_bucket,
    "fab-versioned-artifacts": unversioned_models,
    "fab-residency": replicable_raw,
    "fab-multikueue-not-own-worker": own_worker,
    "fab-multikueue-quota-sum": manager_quota,
    "fab-serving-not-preemptible": serving_priority,
    "fab-training-kueue-managed": unqueued_job,
    "fab-training-ib-nccl-only": ipoib_for_training,
    "fab-pinned-versions": floating_chart,
    "fab-pod-security": writable_root,
    "fab-no-plaintext-secrets": password_in_values,
    "fab-remote-training-replica-only": lambda rs: find(rs, ":IamUser", "storage-training-user")["inputs"]["tags"].update(
        {"fab.internal/engine": "remote-training"}),  # the training keys, read as a peer's team's: they reach the warehouse
}


ALSO_TRIGGERED = {"fab-multikueue-not-own-worker": {"fab-multikueue-quota-sum"}}
"""A manager listed as its own worker also breaks the quota sum, which counts that worker."""


@pytest.mark.parametrize("rule", sorted(PLAN_EDITS))
def test_a_modified_site_triggers_the_rule(stub, full_plan, rule):
    violations = analyze_with(stub, modified(full_plan, PLAN_EDITS[rule]))
    assert {v.policy for v in violations} == {rule, *ALSO_TRIGGERED.get(rule, set())}
    assert all(v.level == EXPECTED_RULES[v.policy] for v in violations)


def test_a_flow_on_an_unapproved_port_triggers_default_deny(stub):
    raw = full_site()
    raw["flows"]["postgres"] = {"from": ["compute"], "to": ["storage"], "port": 5432, "to_namespace": "polaris"}
    violations = analyze_with(stub, render_small(raw))
    assert [(v.policy, v.level) for v in violations] == [("fab-cross-cluster-default-deny", "mandatory")]
    assert "allows port 5432, which is not an approved cross-cluster port" in violations[0].message


def test_every_rule_is_shown_violated_by_some_modified_site():
    assert set(PLAN_EDITS) | {"fab-cross-cluster-default-deny"} == set(EXPECTED_RULES)
