"""The flow `metrics` (every other cluster's Prometheus to compute's receiver, while the site keeps its metrics in-cluster)
through the real policy pack: the rendered rule passes fab-flow-direction, and the same rule on another cluster does not."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from helpers import render_small
from small_site import add_observability, small_site

from fabctl.policy import analyze_in_process

RULE = "network-compute-policy-fab-flow-metrics"


@pytest.fixture(scope="module")
def plan():
    site = small_site()
    add_observability(site)
    return render_small(site)


def test_an_in_cluster_site_passes_every_policy(plan):
    assert [(v.policy, v.message) for v in analyze_in_process(plan)] == []


def test_the_metrics_rule_admits_the_other_clusters_prometheus_on_its_port(plan):
    (rule,) = [r for r in plan.resources if r["name"] == RULE]
    (entry,) = rule["inputs"]["spec"]["ingress"]
    assert ([e["matchLabels"] for e in entry["fromEndpoints"]], entry["toPorts"]) == (
        [{"app.kubernetes.io/name": "prometheus", "k8s:io.kubernetes.pod.namespace": "monitoring",
          "io.cilium.k8s.policy.cluster": c} for c in ("site-t-gpu", "site-t-storage")],
        [{"ports": [{"port": "9090", "protocol": "TCP"}]}])


def test_fails_when_the_metrics_rule_lets_compute_write_to_a_gpu_cluster(plan):
    resources = copy.deepcopy(plan.resources)
    (rule,) = [r for r in resources if r["name"] == RULE]
    rule["provider"] = next(r["urn"] for r in resources if r["type"] == "pulumi:providers:kubernetes" and r["name"] == "site-t-gpu")
    entry = rule["inputs"]["spec"]["ingress"][0]
    entry["fromEndpoints"] = [{"matchLabels": {**entry["fromEndpoints"][0]["matchLabels"], "io.cilium.k8s.policy.cluster": "site-t-compute"}}]
    violations = analyze_in_process(dataclasses.replace(plan, resources=resources))
    assert [(v.policy, v.message.splitlines()[-1]) for v in violations if v.policy == "fab-flow-direction"] == [
        ("fab-flow-direction", ("CiliumClusterwideNetworkPolicy fab-flow-metrics on site-t-gpu (gpu) admits site-t-compute "
                                "(compute) on port 9090, which is not a flow of the design's table (into gpu: 2379 from "
                                "ranges, remote-node; 8000 from compute; 10001 from compute; 10443 from compute)")),
    ]
