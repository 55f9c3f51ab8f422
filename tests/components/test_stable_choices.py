"""Choices that name one team or one cluster do not depend on sort position: adding a team or a GPU cluster whose
key sorts first adds what is its own and changes nothing the others had (issue 15, "No position-dependent choices")."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from components.training_submission import kubeconfig
from fabctl.render import Plan, render_config
from fabctl.stackfile import SITE_KEY
from small_site import small_site


def render(raw: dict[str, Any]) -> Plan:
    return render_config("site-t", {SITE_KEY: raw})


def with_gpu_cluster(raw: dict[str, Any], key: str) -> dict[str, Any]:
    """A second gpu cluster `key` with one training node, beside the small site's own."""
    cluster = copy.deepcopy(raw["clusters"]["gpu"])
    cluster.update({
        "cluster_id": 4, "pod_cidr": "10.93.0.0/16", "node_cidr": "10.30.4.0/24", "api_server": "10.30.4.10", "bgp_asn": 65304,
        "bgp_peers": {"tor": {"address": "10.30.4.1", "asn": 65300}}, "lb_pools": {"internal": {"cidrs": ["10.30.104.0/27"]}},
        "clustermesh_vip": "10.30.104.2",
    })
    raw["clusters"][key] = cluster
    raw["gpu"][key] = {"nodes": {f"{key}-trn-1": {"gpu_type": "h100", "gpus": 8, "pool": "training"}}, "system_nodes": [f"{key}-sys-1"]}
    return raw


@pytest.fixture(scope="module")
def before() -> Plan:
    return render(small_site())


def changed_inputs(before: Plan, after: Plan, component: str = "") -> list[str]:
    """URNs (of one component type, when given) present in both renders whose inputs differ."""
    old = {r["urn"]: r["inputs"] for r in before.resources if component in r["urn"]}
    new = {r["urn"]: r["inputs"] for r in after.resources}
    assert old, f"no resource of {component!r} in the render"
    return sorted(urn for urn, inputs in old.items() if new.get(urn) != inputs)


def test_adding_a_team_that_sorts_first_changes_no_resource_and_no_other_teams_contract(before):
    raw = small_site()
    assert sorted(raw["teams"]) == ["yield"]
    raw["teams"]["aaa"] = {}
    after = render(raw)
    # Each model's JWT SecurityPolicy lists the site's teams it admits (default deny), Airflow's copy of the submission
    # contract lists every team and its API server each team's role, JupyterHub marks and mounts each team's members,
    # KubeRay watches every team namespace, Spark's operator and YuniKorn each team's Spark Connect namespace, Trino's rules
    # and their groups' sync name every team, and each cluster's isolation policy holds a rule per team: all updated in
    # place, nothing else.
    assert sorted(urn.rsplit("::", 1)[1] for urn in changed_inputs(before, after)) == [
        "compute-airflow", "compute-jupyterhub", "compute-spark-operator", "compute-trino", "compute-trino-groups-sync",
        "compute-yunikorn", "inference-jwt-qwen3-8b", "network-compute-policy-fab-team-isolation",
        "network-gpu-policy-fab-team-isolation", "network-storage-policy-fab-team-isolation", "ray-gpu-kuberay",
        "training-compute-airflow-submission"]
    submission = after.outputs["training"]["submission"]
    assert submission.pop("aaa") == {"cluster": "site-t-gpu", "namespace": "team-aaa", "local_queue": "training"}
    assert submission == before.outputs["training"]["submission"]
    assert after.outputs["training"]["example_job"] == before.outputs["training"]["example_job"]


def test_adding_a_gpu_cluster_that_sorts_first_keeps_the_submission_cluster_and_training_resources(before):
    after = render(with_gpu_cluster(small_site(), "agpu"))
    assert after.outputs["training"]["submission"] == {"yield": {"cluster": "site-t-gpu", "namespace": "team-yield", "local_queue": "training"}}
    assert changed_inputs(before, after, "fab:training:TrainingPool") == []


def test_the_example_job_names_no_team_and_takes_its_checkpoint_path_from_its_namespaces_secrets(before):
    job = yaml.safe_load(before.outputs["training"]["example_job"])
    assert "namespace" not in job["metadata"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "CHECKPOINT_URI" not in {e["name"] for e in container["env"]}
    assert container["envFrom"] == [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}},
                                    {"configMapRef": {"name": "nccl"}}]


def test_a_kubeconfig_without_a_namespace_leaves_it_to_each_request():
    config = yaml.safe_load(kubeconfig("site-t-gpu", "https://10.30.3.10:6443", "Q0E=", "token", None))
    assert config["contexts"] == [{"name": "site-t-gpu", "context": {"cluster": "site-t-gpu", "user": "site-t-gpu"}}]
