"""The policy pack on serving through Git (issue 18): the smallest site with Argo CD delivering passes every policy, Argo
CD's pods are compute workloads of the interactive pool, and its flow to the serving API server is one of the design's."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from helpers import render_config
from policy_fixtures import check, k8s, options, provider
from pulumi_policy import PolicyResource
from rules.network import DESIGN_FLOWS, flow_direction
from small_site import SERVING_REPO_TOKEN, small_site, with_argocd

from fabctl.policy import analyze_in_process
from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY


@pytest.fixture(scope="module")
def plan() -> Plan:
    return render_config("site-t", {SITE_KEY: with_argocd(small_site()), **SERVING_REPO_TOKEN})


def violations(plan: Plan, edit: Callable[[list[dict[str, Any]]], None]) -> list[tuple[str, str]]:
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    return [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(dataclasses.replace(plan, resources=resources))]


def argocd_values(resources: list[dict[str, Any]]) -> dict[str, Any]:
    (release,) = [r for r in resources if r["name"] == "compute-argocd"]
    return release["inputs"]["values"]


def test_the_smallest_site_serving_through_git_passes_every_policy(plan):
    assert [(v.policy, v.message) for v in analyze_in_process(plan)] == []


def test_fails_when_argo_cds_pods_select_the_batch_pool(plan):
    def edit(resources):
        argocd_values(resources)["global"]["nodeSelector"] = {"fab.internal/compute-pool": "batch"}

    message = ("Helm release compute-argocd (chart argo-cd) on site-t-compute: its {} pods select fab.internal/compute-pool=batch "
               "(global.nodeSelector); argo-cd is interactive work, allowed: nodeSelector fab.internal/compute-pool=interactive")
    assert violations(plan, edit) == [
        ("fab-compute-pool-placement", message.format(group))
        for group in ("controller", "server", "repoServer", "applicationSet", "notifications", "redis")
    ]


def test_fails_when_argo_cds_controller_runs_at_the_batch_priority(plan):
    def edit(resources):
        argocd_values(resources)["controller"]["priorityClassName"] = "compute-batch"

    message = ("Helm release compute-argocd (chart argo-cd) on site-t-compute: its controller pods run at PriorityClass "
               "compute-batch (labelled fab.internal/compute-pool=batch) (controller.priorityClassName); argo-cd is interactive "
               "work, allowed: compute-interactive")
    assert violations(plan, edit) == [("fab-compute-priority-class", message)]


# fab-flow-direction: Argo CD's flow is the design's own entry -----------------------------------------------------------

COMPUTE_COMPONENT = PolicyResource("fab:compute:ComputeCluster", {}, "urn:pulumi:s::p::fab:compute:ComputeCluster::compute", "compute",
                                   options(), None, None, [], {})


def on_compute(obj: dict[str, Any]) -> PolicyResource:
    type_ = f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
    return PolicyResource(type_, obj, f"urn:pulumi:s::p::{type_}::{obj['metadata']['name']}", obj["metadata"]["name"], options(),
                          provider("site-a-compute"), COMPUTE_COMPONENT, [], {})


ARGOCD_EGRESS = on_compute(k8s("CiliumClusterwideNetworkPolicy", "fab-flow-argocd", api="cilium.io/v2", spec={
    "endpointSelector": {"matchLabels": {"app.kubernetes.io/name": "argocd-application-controller"}},
    "egress": [{"toCIDR": ["10.10.3.10/32"], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]}],
}))


def test_the_design_table_lets_compute_reach_api_servers_for_argo_cd():
    assert [f for f in DESIGN_FLOWS if f["name"] == "argocd"] == [{"name": "argocd", "from": ["compute"], "to": "api-server", "port": 6443}]


def test_argo_cds_flow_passes_without_the_multikueue_entry():
    table = [f for f in DESIGN_FLOWS if f["name"] != "multikueue"]
    assert check(flow_direction, [ARGOCD_EGRESS], {"flows": table}) == []


def test_fails_when_the_table_has_no_api_server_flow():
    table = [f for f in DESIGN_FLOWS if f["name"] not in ("multikueue", "argocd")]
    assert check(flow_direction, [ARGOCD_EGRESS], {"flows": table}) == [
        ("CiliumClusterwideNetworkPolicy fab-flow-argocd on site-a-compute (compute) lets its pods reach addresses outside the "
         "cluster on port 6443, which is not a flow of the design's table (to API servers: nothing)")
    ]
