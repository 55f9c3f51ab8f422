"""fab-credentials-have-flow: a cluster that holds S3 or Polaris credentials is a source of the flow to that port.

Unit tests build the two sides by hand, as the program renders them: StorageCluster's credential Secrets
(`s3-<engine>`, `polaris-<engine>`, labelled `fab.internal/engine`, on the provider of the cluster they are
delivered to) and CrossClusterNetwork's flow rules (on the serving cluster, each source cluster named by
Cilium's cluster label). The pack test takes the smallest site's render and drops one source from a flow.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
from helpers import render_config
from policy_fixtures import check, k8s, kube
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE
from rules.network import credentials_have_flow
from small_site import small_site

from fabctl.policy import analyze_in_process
from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY

STORAGE, COMPUTE, GPU, GPU_TRAIN = "site-a-storage", "site-a-compute", "site-a-gpu", "site-a-gpu-train"
FAILS_CLOSED = ("can't be known during preview, and this rule decides on it, so it fails closed; compute the value in the "
                "program instead of from another resource's output")


def flow_rule(name: str, port: int, *sources: str) -> dict:
    """A flow's rule as CrossClusterNetwork renders it on the serving cluster."""
    return k8s("CiliumClusterwideNetworkPolicy", f"fab-flow-{name}", api="cilium.io/v2",
               labels={"fab.internal/rule": "flow", "fab.internal/flow": name},
               spec={"endpointSelector": {"matchLabels": {"k8s:io.kubernetes.pod.namespace": name}}, "ingress": [{
                   "fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": s}} for s in sources],
                   "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}],
               }]})


def credential(name: str, namespace: str, engine: str | None = "training") -> dict:
    """A Secret as StorageCluster delivers it (without its data, which the rule does not read)."""
    return k8s("Secret", name, namespace, labels={"fab.internal/engine": engine} if engine else None, type="Opaque")


FLOWS = [kube(flow_rule("s3", 9000, COMPUTE, GPU), STORAGE), kube(flow_rule("polaris", 8181, COMPUTE, GPU), STORAGE)]


def test_credentials_on_the_flows_sources_pass():
    held = [kube(credential("s3-spark", "spark", "spark"), COMPUTE), kube(credential("polaris-training", "team-yield"), GPU)]
    assert check(credentials_have_flow, FLOWS + held) == []


def test_credentials_on_the_serving_cluster_need_no_flow():
    assert check(credentials_have_flow, FLOWS + [kube(credential("s3-polaris", "polaris", "polaris"), STORAGE)]) == []


def test_fails_when_a_cluster_holding_s3_credentials_is_not_a_source_of_the_s3_flow():
    assert check(credentials_have_flow, FLOWS + [kube(credential("s3-training", "team-yield"), GPU_TRAIN)]) == [
        "Secret team-yield/s3-training on site-a-gpu-train holds S3 credentials, but site-a-gpu-train is not a source of the "
        "flow to port 9000 on site-a-storage; add it to that flow's sources"
    ]


def test_fails_when_a_cluster_holding_polaris_credentials_is_not_a_source_of_the_polaris_flow():
    assert check(credentials_have_flow, FLOWS + [kube(credential("polaris-training", "team-yield"), GPU_TRAIN)]) == [
        "Secret team-yield/polaris-training on site-a-gpu-train holds Polaris credentials, but site-a-gpu-train is not a "
        "source of the flow to port 8181 on site-a-storage; add it to that flow's sources"
    ]


def test_fails_when_the_cluster_is_a_source_of_the_other_flow_only():
    flows = [kube(flow_rule("s3", 9000, COMPUTE), STORAGE), kube(flow_rule("polaris", 8181, COMPUTE, GPU), STORAGE)]
    assert check(credentials_have_flow, flows + [kube(credential("s3-training", "team-yield"), GPU)]) == [
        "Secret team-yield/s3-training on site-a-gpu holds S3 credentials, but site-a-gpu is not a source of the flow to port "
        "9000 on site-a-storage; add it to that flow's sources"
    ]


def test_fails_when_no_flow_reaches_the_port():
    assert check(credentials_have_flow, [FLOWS[1], kube(credential("s3-training", "team-yield"), GPU)]) == [
        "Secret team-yield/s3-training on site-a-gpu holds S3 credentials, but no flow reaches port 9000 on any cluster; add a "
        "flow from site-a-gpu to the cluster serving S3"
    ]


def test_the_configured_port_is_the_one_checked():
    flows = [kube(flow_rule("s3", 9443, COMPUTE, GPU), STORAGE)]
    assert check(credentials_have_flow, flows + [kube(credential("s3-training", "team-yield"), GPU)], {"s3Port": 9443}) == []


def test_secrets_storage_cluster_did_not_deliver_are_not_its_credentials():
    peer = credential("polaris-peer-site-b", "trino", engine=None)  # another site's catalog, reached by its own flow
    assert check(credentials_have_flow, FLOWS + [kube(peer, GPU_TRAIN)]) == []


def test_fails_closed_when_a_credential_secrets_labels_are_unknown():
    secret = credential("s3-training", "team-yield")
    secret["metadata"]["labels"] = UNKNOWN_OBJECT_VALUE
    assert check(credentials_have_flow, FLOWS + [kube(secret, GPU_TRAIN)]) == [f"Secret team-yield/s3-training: .engine {FAILS_CLOSED}"]


def test_fails_closed_when_a_flow_rules_ingress_is_unknown():
    rule = flow_rule("s3", 9000, COMPUTE, GPU)
    rule["spec"]["ingress"] = UNKNOWN_ARRAY_VALUE
    assert check(credentials_have_flow, [kube(rule, STORAGE)]) == [f"CiliumClusterwideNetworkPolicy fab-flow-s3 on site-a-storage: "
                                                                   f".spec.ingress {FAILS_CLOSED}"]


# Through the pack's Analyzer service, on the smallest site's render.

@pytest.fixture(scope="module")
def small_plan() -> Plan:
    return render_config("site-t", {SITE_KEY: small_site()})


def test_the_smallest_site_passes(small_plan):
    assert [(v.policy, v.message) for v in analyze_in_process(small_plan)] == []


def test_fails_when_the_gpu_cluster_is_dropped_from_the_rendered_s3_flow(small_plan):
    resources = copy.deepcopy(small_plan.resources)
    (rule,) = [r for r in resources if r["name"] == "network-storage-policy-fab-flow-s3"]
    for entry in rule["inputs"]["spec"]["ingress"]:
        entry["fromEndpoints"] = [e for e in entry["fromEndpoints"] if e["matchLabels"]["io.cilium.k8s.policy.cluster"] != "site-t-gpu"]
    violations = analyze_in_process(dataclasses.replace(small_plan, resources=resources))
    assert {(v.policy, v.level) for v in violations} == {("fab-credentials-have-flow", "mandatory")}
    assert sorted(v.message.splitlines()[-1] for v in violations) == [
        f"Secret {ns}/s3-{engine} on site-t-gpu holds S3 credentials, but site-t-gpu is not a source of the flow to port 9000 "
        "on site-t-storage; add it to that flow's sources"
        for ns, engine in (("inference", "inference"), ("team-yield", "training"))
    ]
