"""Attacks on the network boundaries, from a tenant's seat (a team's pod on a cluster of the site) and from the world (an
address outside the site), against both stacks' rendered Cilium policies, judged by tests/cilium_engine.py the way the
agent decides: issue 37, path 4 (vLLM answers any pod that reaches it), path 7 (S3 and its admin API open to the world
on site-a), and the medium and low findings on the metrics receiver, the rate-limit Valkey and Hubble Relay; and, found
beyond the issue's list by `fabctl access`, teams on one cluster not kept apart: a team's pod reached every other team's
pods and notebook servers on any port, the ClusterMesh API server's etcd and the non-compute clusters' Prometheus. A
team's pod carries its namespace's labels, which the platform sets (`in_plan` reads them from the plan) and the attacker
cannot choose, and any pod labels the attacker likes.

Not shown here: the MinIO admin API answers on the S3 port inside the same TLS connection, which no L3/L4 rule can tell
apart; it is refused to the world by refusing the world S3 itself (docs/security.md, "External S3").
"""

from __future__ import annotations

from cilium_engine import admitted, in_plan, outside, pod
from components.config import names, parse_site
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


ANY_PORTS = (22, 2379, 6379, 8265, 8888, 10001, 29500, 45678)
"""Ports a team's pods may listen on (ssh, etcd, Redis/GCS, Ray dashboard, Jupyter, Ray Client, torch rendezvous, NCCL's
ephemeral range): the isolation names none, so every one of them stands for any port."""


def _teams(plan) -> tuple[str, str]:
    """The attacker's team (the first) and another team (the second)."""
    attacker, victim, *_ = sorted(_site(plan).teams)
    return attacker, victim


def _gpu(plan) -> str:
    site = _site(plan)
    assert site.inference is not None
    return _cluster(plan, site.inference.cluster)


def test_a_team_cannot_reach_another_teams_pod_on_its_cluster(plan):
    attacker, victim = _teams(plan)
    mine = in_plan(plan, _gpu(plan), f"team-{attacker}", {"app": "mine"})
    theirs = in_plan(plan, _gpu(plan), f"team-{victim}", {"ray.io/node-type": "head", "batch.kubernetes.io/job-name": "train"})
    verdicts = {port: admitted(plan, theirs, mine, port) for port in ANY_PORTS}
    assert {port: (v.admitted, v.why) for port, v in verdicts.items()} == {port: (False, "denied by fab-team-isolation") for port in ANY_PORTS}


def test_a_team_cannot_reach_another_teams_notebook_server(plan):
    """Compute's JupyterHub runs every user's server in one namespace; GPU notebooks run in the team's `notebooks-<team>`
    (site-a). Neither answers another team's pod."""
    attacker, victim = _teams(plan)
    servers = [in_plan(plan, _cluster(plan, "compute"), "jupyterhub", {"component": "singleuser-server", "fab.internal/team": victim})]
    servers += [in_plan(plan, c, obj["metadata"]["name"], {"component": "singleuser-server", "fab.internal/team": victim})
                for c, obj, _ in plan.manifests() if obj["kind"] == "Namespace" and obj["metadata"]["name"] == f"notebooks-{victim}"]
    found = {}
    for server in servers:
        mine = in_plan(plan, str(server.cluster), f"team-{attacker}", {"app": "mine"})
        verdict = admitted(plan, server, mine, 8888)
        found[server.namespace] = (verdict.admitted, verdict.why)
    expected = {"jupyterhub": (False, "denied by notebook-servers")}
    if len(servers) > 1:
        expected[f"notebooks-{victim}"] = (False, "denied by fab-team-isolation")
    assert found == expected


def test_a_team_pod_labelled_as_another_teams_pod_is_still_refused(plan):
    """The attacker copies the victim's pod labels, team label included: its namespace still says who it is."""
    attacker, victim = _teams(plan)
    labels = {"fab.internal/team": victim, "app": "train", "ray.io/node-type": "worker", "component": "singleuser-server"}
    forged = in_plan(plan, _gpu(plan), f"team-{attacker}", labels)
    verdict = admitted(plan, in_plan(plan, _gpu(plan), f"team-{victim}", {"ray.io/node-type": "head"}), forged, 6379)
    assert (verdict.admitted, verdict.why) == (False, "denied by fab-team-isolation")


def test_a_teams_own_pods_still_reach_each_other(plan):
    """The control: a team's Jobs, Ray workers and notebooks reach its own pods on any port (NCCL, rendezvous, Ray)."""
    attacker, _ = _teams(plan)
    gpu = _gpu(plan)
    sources = [ns for c, obj, _ in plan.manifests() if obj["kind"] == "Namespace" and c == gpu
               for ns in [obj["metadata"]["name"]] if ns in (f"team-{attacker}", f"notebooks-{attacker}")]
    head = in_plan(plan, gpu, f"team-{attacker}", {"ray.io/node-type": "head"})
    verdicts = {(ns, port): admitted(plan, head, in_plan(plan, gpu, ns, {"app": "mine"}), port).admitted for ns in sources for port in ANY_PORTS}
    assert sources and all(verdicts.values())


def test_a_teams_head_on_a_gpu_cluster_answers_compute_notebooks_only_through_its_flow(plan):
    """Across clusters nothing changed: compute's notebook servers reach a team's Ray head by the team's flow, and another
    team's pod on compute does not reach it at all."""
    attacker, victim = _teams(plan)
    head = in_plan(plan, _gpu(plan), f"team-{victim}", {"ray.io/node-type": "head"})
    server = in_plan(plan, _cluster(plan, "compute"), "jupyterhub",
                     {"component": "singleuser-server", names.team_member_label(victim): names.TEAM_MEMBER})
    other = in_plan(plan, _cluster(plan, "compute"), f"team-{attacker}", {"component": "singleuser-server"})
    assert (admitted(plan, head, server, 10001).why, admitted(plan, head, other, 10001).why) == (f"allowed by fab-flow-ray-{victim}", "default deny")


def test_a_team_cannot_reach_the_clustermesh_etcd(plan):
    attacker, _ = _teams(plan)
    found = {}
    for key in sorted(_site(plan).clusters):
        apiserver = pod(_cluster(plan, key), "kube-system", {"k8s-app": "clustermesh-apiserver"})
        verdict = admitted(plan, apiserver, in_plan(plan, _cluster(plan, key), f"team-{attacker}", {"app": "mine"}), 2379)
        found[key] = (verdict.admitted, verdict.why)
    assert found == {key: (False, "denied by fab-clustermesh-apiserver") for key in found}


def test_a_team_cannot_query_a_gpu_clusters_prometheus(plan):
    """A GPU cluster's Prometheus holds every team's pods' and jobs' series."""
    attacker, _ = _teams(plan)
    prometheus = pod(_gpu(plan), MONITORING_NAMESPACE, {**PROMETHEUS_POD_LABELS, "operator.prometheus.io/name": "metrics-prometheus"})
    verdict = admitted(plan, prometheus, in_plan(plan, _gpu(plan), f"team-{attacker}", {"app": "mine"}), PROMETHEUS_PORT)
    assert (verdict.admitted, verdict.why) == (False, "denied by prometheus")
