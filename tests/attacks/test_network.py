"""Attacks on the network boundaries, from a tenant's seat (a team's pod on a cluster of the site) and from the world (an
address outside the site), against both stacks' rendered Cilium policies, judged by tests/cilium_engine.py the way the
agent decides: issue 37, path 4 (vLLM answers any pod that reaches it), path 7 (S3 and its admin API open to the world
on site-a), and the medium and low findings on the metrics receiver, the rate-limit Valkey and Hubble Relay.

Not shown here: the MinIO admin API answers on the S3 port inside the same TLS connection, which no L3/L4 rule can tell
apart; it is refused to the world by refusing the world S3 itself (docs/security.md, "External S3").
"""

from __future__ import annotations

from cilium_engine import admitted, outside, pod
from components.config import parse_site
from components.constants import MONITORING_NAMESPACE, PROMETHEUS_POD_LABELS, VLLM_APP
from components.gateway import RATE_LIMIT_STORE, RATE_LIMIT_STORE_PORT
from components.gpu import INFERENCE_NAMESPACE
from components.serving import VLLM_PORT, stable_labels
from helpers import site_raw

HUBBLE_RELAY_PORT = 4245
"""Hubble Relay's gRPC port (Cilium 1.18 chart, hubble.relay.listenPort)."""
GATEWAY_NAMESPACE = "envoy-gateway-system"
PROMETHEUS_PORT = 9090
AN_ADDRESS_OF_THE_WORLD = "8.8.8.8"


def _site(plan):
    return parse_site(site_raw(plan.stack))


def _cluster(plan, key: str) -> str:
    return f"{_site(plan).name}-{key}"


def _team_pod(plan, cluster_key: str):
    """A pod the first team runs in its own namespace (a Job, a notebook: what a team member may create)."""
    team = sorted(_site(plan).teams)[0]
    return pod(_cluster(plan, cluster_key), f"team-{team}", {"app": "mine", "batch.kubernetes.io/job-name": "mine"})


def test_a_team_cannot_call_a_vllm_pod_past_the_gateway(plan):
    site = _site(plan)
    assert site.inference is not None
    key = site.inference.cluster
    model = sorted(site.inference.models)[0]
    vllm = pod(_cluster(plan, key), INFERENCE_NAMESPACE, stable_labels(model))
    assert stable_labels(model)["app.kubernetes.io/name"] == VLLM_APP
    verdict = admitted(plan, vllm, _team_pod(plan, key), VLLM_PORT)
    assert (verdict.admitted, verdict.why) == (False, "denied by vllm")


def test_the_world_cannot_reach_s3(plan):
    site = _site(plan)
    store = site.storage.object_store
    s3 = pod(_cluster(plan, "storage"), store.namespace, store.s3_pod_labels)
    verdict = admitted(plan, s3, outside(AN_ADDRESS_OF_THE_WORLD), store.s3_port)
    assert (verdict.admitted, verdict.why) == (False, "default deny")


def test_a_vendor_reaches_s3_only_from_its_own_ranges(plan):
    """The control of the test above: the vendors' declared ranges are the one way in from outside."""
    site = _site(plan)
    store = site.storage.object_store
    s3 = pod(_cluster(plan, "storage"), store.namespace, store.s3_pod_labels)
    (vendor, *_) = sorted(site.storage.vendors.items())
    inside = str(next(vendor[1].source_cidrs[0].hosts()))
    assert admitted(plan, s3, outside(inside), store.s3_port).admitted


def test_a_compute_pod_cannot_write_to_the_metrics_receiver(plan):
    prometheus = pod(_cluster(plan, "compute"), MONITORING_NAMESPACE,
                     {**PROMETHEUS_POD_LABELS, "operator.prometheus.io/name": "metrics-prometheus"})
    verdict = admitted(plan, prometheus, _team_pod(plan, "compute"), PROMETHEUS_PORT)
    assert (verdict.admitted, verdict.why) == (False, "denied by prometheus")


def test_a_team_cannot_reach_the_rate_limit_store(plan):
    site = _site(plan)
    assert site.inference is not None
    key = site.inference.cluster
    (store,) = [d for d in plan.objects("Deployment", _cluster(plan, key)) if d["metadata"]["name"] == RATE_LIMIT_STORE]
    valkey = pod(_cluster(plan, key), GATEWAY_NAMESPACE, store["spec"]["template"]["metadata"]["labels"])
    verdict = admitted(plan, valkey, _team_pod(plan, key), RATE_LIMIT_STORE_PORT)
    assert (verdict.admitted, verdict.why) == (False, "denied by ratelimit-valkey")


def test_a_team_cannot_read_every_flow_from_hubble_relay(plan):
    for key in sorted(_site(plan).clusters):
        relay = pod(_cluster(plan, key), "kube-system", {"k8s-app": "hubble-relay"})
        verdict = admitted(plan, relay, pod(_cluster(plan, key), "team-x", {"app": "mine"}), HUBBLE_RELAY_PORT)
        assert (key, verdict.admitted, verdict.why) == (key, False, "denied by fab-hubble-relay")
