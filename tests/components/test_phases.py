"""Phased adoption (docs/roadmap.md): a site states its roadmap phase, and a feature of a later phase is refused unless
the site lists it in `early_features`; a phase 1 site brings up the GPU base without serving models."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import config_errors, render_small
from small_site import add_gpu_cluster, add_weights_over_ib, small_site, write_flow_table

from components.config import parse_site
from components.config.checks.phases import USES
from components.config.schema.roadmap import FEATURES
from fabctl.policy import analyze_in_process


def at_phase(phase: int) -> dict[str, Any]:
    """The smallest site at `phase`, with nothing of a later phase: no weights over InfiniBand, and in phase 1 no models
    (its inference node trains)."""
    site = small_site()
    site["phase"] = phase
    if phase == 1:
        del site["inference"]
        site["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["pool"] = "training"
    return site


@pytest.mark.parametrize("phase", [1, 2, 3, 4, 5])
def test_the_smallest_site_is_valid_in_every_phase(phase):
    assert parse_site(at_phase(phase)).phase == phase


def test_every_feature_is_found_where_a_site_enables_it():
    assert set(USES) == set(FEATURES)


def test_fails_when_the_phase_is_missing():
    site = at_phase(5)
    del site["phase"]
    assert config_errors(site) == ["fab-platform:site.phase: required key is missing"]


def test_fails_when_the_phase_is_beyond_the_roadmap():
    site = at_phase(5)
    site["phase"] = 6
    assert config_errors(site) == ["fab-platform:site.phase: Input should be less than or equal to 5 (got 6)"]


def test_fails_when_inference_comes_in_phase_1():
    site = small_site()
    site["phase"] = 1
    assert config_errors(site) == [
        "fab-platform:site.inference: serves qwen3-8b: online inference (the `inference` section: vLLM behind the gateway) "
        "comes in phase 02 (inference) and the site is at phase 1; do without it until phase 01 is done and phase is 2 "
        "(docs/roadmap.md), or list inference in early_features"
    ]


def test_fails_when_a_phase_2_site_serves_no_models():
    site = at_phase(2)
    del site["inference"]
    assert config_errors(site) == [
        "fab-platform:site.inference: is required from phase 02 (inference) on, and the site is at phase 2: add the "
        "inference section, or set phase: 1 while the GPU base is brought up"
    ]


def test_fails_when_a_phase_1_node_serves_inference():
    site = at_phase(1)
    site["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["pool"] = "inference"
    assert config_errors(site) == [
        "fab-platform:site.gpu.gpu.nodes.gpu-inf-1.pool: 'inference' but the site serves no models (no inference section): "
        "use pool training until it does"
    ]


def test_fails_when_a_phase_1_flow_table_opens_the_gateway():
    site = at_phase(1)
    write_flow_table(site)
    assert config_errors(site) == [
        "fab-platform:site.flows.inference: opens the inference gateway's port, but the site serves no models (no inference "
        "section); remove the flow until the site serves models"
    ]


def test_fails_when_training_quotas_come_before_phase_3():
    site = at_phase(2)
    site["training"] = {"quotas": {"yield": {"gpu": {"gpus": 8}}}}
    assert config_errors(site) == [
        "fab-platform:site.training.quotas.yield: gives yield GPU quota on gpu: teams' GPU training quotas comes in phase 03 "
        "(training pipeline) and the site is at phase 2; do without it until phase 02 is done and phase is 3 "
        "(docs/roadmap.md), or list training-quotas in early_features"
    ]


def test_fails_when_profiles_come_before_phase_4():
    site = at_phase(3)
    site["profiles"] = {"night": {"description": "nights"}}
    assert config_errors(site) == [
        "fab-platform:site.profiles: defines night: fleet profiles (the day/night switch) comes in phase 04 (operations) and "
        "the site is at phase 3; do without it until phase 03 is done and phase is 4 (docs/roadmap.md), or list profiles "
        "in early_features"
    ]


def test_fails_when_multikueue_comes_before_phase_5():
    site = at_phase(4)
    site["training"] = {"multikueue": {"enabled": True, "workers": ["gpu"]}}
    assert config_errors(site) == [
        "fab-platform:site.training.multikueue.enabled: true makes compute a MultiKueue manager: MultiKueue dispatch comes "
        "in phase 05 (scale-out) and the site is at phase 4; do without it until phase 04 is done and phase is 5 "
        "(docs/roadmap.md), or list multikueue in early_features"
    ]


def test_fails_when_a_second_gpu_cluster_comes_before_phase_5():
    site = at_phase(3)
    add_gpu_cluster(site, "gpu-train")
    assert config_errors(site) == [
        "fab-platform:site.clusters.gpu-train.role: 'gpu-train' adds GPU cluster gpu-train to gpu: a second GPU cluster "
        "comes in phase 05 (scale-out) and the site is at phase 3; do without it until phases 03-04 are done and phase is "
        "5 (docs/roadmap.md), or list more-gpu-clusters in early_features"
    ]


def test_fails_when_weights_load_over_infiniband_before_phase_5():
    site = at_phase(4)
    add_weights_over_ib(site)
    assert config_errors(site) == [
        "fab-platform:site.gpu.gpu.infiniband.inference_weights_over_ib: true loads model weights over "
        "InfiniBand: storage traffic over InfiniBand comes in phase 05 (scale-out) and the site is at phase 4; do without "
        "it until phase 04 is done and phase is 5 (docs/roadmap.md), or list storage-over-ib in early_features"
    ]


def test_fails_when_remote_training_comes_before_phase_5():
    site = at_phase(4)
    site["storage"]["buckets"]["site-t-gold"] = {"class": "gold"}
    site["federation"] = {"consumers": {"site-u": {"remote_training_teams": ["yield"]}}, "ranges": {"site-u": ["172.20.0.0/16"]}}
    assert config_errors(site) == [
        "fab-platform:site.federation.consumers.site-u.remote_training_teams: lets yield train on site-u's GPUs: GPU "
        "training across sites comes in phase 05 (scale-out) and the site is at phase 4; do without it until phase 04 is "
        "done and phase is 5 (docs/roadmap.md), or list remote-training in early_features"
    ]


def test_a_feature_listed_in_early_features_is_allowed_ahead_of_its_phase():
    site = at_phase(3)
    site["training"] = {"multikueue": {"enabled": True, "workers": ["gpu"]}}
    site["early_features"] = ["multikueue"]
    assert parse_site(site).training.multikueue.enabled


def test_fails_when_an_early_feature_is_in_the_phase_already():
    site = at_phase(4)
    site["profiles"] = {"night": {"description": "nights"}}
    site["early_features"] = ["profiles"]
    assert config_errors(site) == [
        "fab-platform:site.early_features[0]: 'profiles' is a phase 04 (operations) feature, which phase 4 includes: remove it"
    ]


def test_fails_when_an_early_feature_is_enabled_nowhere():
    site = at_phase(3)
    site["early_features"] = ["multikueue"]
    assert config_errors(site) == ["fab-platform:site.early_features[0]: 'multikueue' is enabled nowhere in this site: remove it"]


@pytest.fixture(scope="module")
def phase_1_plan():
    return render_small(at_phase(1))


def test_a_phase_1_site_serves_nothing(phase_1_plan):
    assert [r for r in phase_1_plan.resources if r["type"] == "fab:inference:InferencePool"] == []
    assert (phase_1_plan.outputs["serving"], phase_1_plan.outputs["capacity"]) == (None, {})


def test_a_phase_1_site_opens_no_gateway_flow(phase_1_plan):
    flows = {p["metadata"]["labels"]["fab.internal/flow"] for p in phase_1_plan.objects("CiliumClusterwideNetworkPolicy")
             if "fab.internal/flow" in p["metadata"].get("labels", {})}
    assert flows and "inference" not in flows


def test_a_phase_1_site_submits_training_to_its_gpu_cluster(phase_1_plan):
    assert phase_1_plan.outputs["training"]["submission"]["yield"]["cluster"] == "site-t-gpu"


def test_a_phase_1_site_passes_the_policy_pack(phase_1_plan):
    assert analyze_in_process(phase_1_plan) == []


def test_scaling_out_keeps_the_serving_url_and_each_teams_namespace_and_queue():
    before = render_small(small_site(teams=("yield", "fdc")))
    after = render_small(small_site(teams=("yield", "fdc"), gpu_clusters=2, multikueue=True))
    assert after.outputs["serving"] == before.outputs["serving"]
    kept = lambda plan: {team: (s["namespace"], s["local_queue"]) for team, s in plan.outputs["training"]["submission"].items()}
    assert kept(before) and kept(after) == kept(before)


def test_fails_when_hosting_a_peers_team_comes_before_phase_5():
    site = at_phase(4)
    site["federation"] = {"peers": {"site-u": {"remote_training": {"yield": {"gpu": {"gpus": 8}}}}},
                          "ranges": {"site-u": ["172.20.0.0/16"]}}
    assert config_errors(site) == [
        "fab-platform:site.federation.peers.site-u.remote_training: gives site-u's yield GPU quota here: GPU training across "
        "sites comes in phase 05 (scale-out) and the site is at phase 4; do without it until phase 04 is done and phase is "
        "5 (docs/roadmap.md), or list remote-training in early_features"
    ]
