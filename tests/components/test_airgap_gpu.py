"""The GPU side of an air-gapped site (config `registry`, components/airgap/gpu.py): the GPU Operator, Network Operator,
Kueue, Kubeflow Trainer and KubeRay charts run every image from the site registry with its pull Secret (proved through
the pinned chart packages), the operators' policies name every operand from it, and the program's own GPU workloads
and the templates teams copy (vLLM, the endpoint picker, the PyTorch runtime, Ray, batch inference, the profile
switch) pull from it; without a registry nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from airgap_cases import FILES, MIRROR, PULL_SECRET, SECRETS, pinned_release, rendered, site_registry, with_registry
from helpers import render_small
from small_site import add_profile_schedule, small_site

from components import versions
from components.airgap import chart_values
from components.config import parse_site
from components.gpu import POSTRENDER, cluster_policy_spec, gpu_operator_values, nic_cluster_policy_spec
from components.kueue import kueue_values
from components.ray import example_ray_job, operator_values
from components.registry import UPSTREAM, merge_values
from components.runtimes import trainer_values
from fabctl.check.mirror import image_references, pod_specs

SITE_REGISTRY = site_registry(files=FILES)

CHARTS = {
    "gpu-operator": (versions.GPU_OPERATOR, "gpu-operator", gpu_operator_values(), POSTRENDER),
    "network-operator": (versions.NETWORK_OPERATOR, "nvidia-network-operator", {"nfd": {"enabled": False}}, None),
    "kueue": (versions.KUEUE, "kueue-system", kueue_values(False, frozenset()), None),
    "kubeflow-trainer": (versions.KUBEFLOW_TRAINER, "kubeflow-system", trainer_values(), None),
    "kuberay-operator": (versions.KUBERAY, "kuberay-system", operator_values(["team-yield"]), None),
}
"""Each chart of the group as the program installs it: pinned chart, namespace, the component's values, post-renderer."""


def outside(node: Any) -> list[str]:
    """The image references of `node` that are not under the mirror."""
    return [f"{path} {ref}" for path, ref in image_references(node) if not ref.startswith(f"{MIRROR}/")]


def without_pull_secret(node: Any) -> list[str]:
    """The pod specs of `node` that do not name the site's pull Secret."""
    return [path for path, spec in pod_specs(node) if {"name": PULL_SECRET} not in (spec.get("imagePullSecrets") or [])]


def helm_objects(chart: str, chart_dir, helm) -> list[dict[str, Any]]:
    pinned, namespace, values, postrender = CHARTS[chart]
    release = pinned_release(chart, pinned, namespace, merge_values(values, chart_values(pinned, SITE_REGISTRY)), postrender)
    return rendered(release, chart_dir, helm)


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_the_chart_runs_every_image_from_the_registry(chart, chart_dir, helm):
    objects = [{k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
               for obj in helm_objects(chart, chart_dir, helm) if obj["kind"] != "CustomResourceDefinition"]
    assert [ref for obj in objects for _, ref in image_references(obj)], f"{chart} renders no image"
    assert [found for obj in objects for found in outside(obj)] == []


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_every_pod_of_the_chart_names_the_pull_secret(chart, chart_dir, helm):
    objects = [obj for obj in helm_objects(chart, chart_dir, helm) if obj["kind"] != "CustomResourceDefinition"]
    assert [path for obj in objects for path, _ in pod_specs(obj.get("spec") or {})], f"{chart} renders no pod"
    assert [f"{obj['kind']}/{obj['metadata']['name']} {path}" for obj in objects
            for path in without_pull_secret(obj.get("spec") or {})] == []


def test_the_gpu_operator_hands_its_operator_the_mirrored_driver_manager(chart_dir, helm):
    (operator,) = [obj for obj in helm_objects("gpu-operator", chart_dir, helm)
                   if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "gpu-operator"]
    env = {e["name"]: e.get("value") for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DRIVER_MANAGER_IMAGE"] == f"{MIRROR}/{versions.GPU_DRIVER_MANAGER.ref}"


def test_without_a_registry_no_chart_gets_image_values():
    assert {chart: chart_values(pinned, UPSTREAM) for chart, (pinned, *_) in CHARTS.items()} == {chart: {} for chart in CHARTS}


def gpu_config():
    return parse_site(small_site()).gpu["gpu"]


def test_the_cluster_policy_names_every_enabled_operand_from_the_registry_with_the_pull_secret():
    spec = cluster_policy_spec(gpu_config(), SITE_REGISTRY)
    operands = {key: spec[key] for key in ("driver", "toolkit", "devicePlugin", "gfd", "dcgmExporter", "validator", "migManager")}
    operands["driver.manager"] = spec["driver"]["manager"]
    assert {key: (f"{o['repository']}/{o['image']}:{o['version']}", o["imagePullSecrets"]) for key, o in operands.items()} == {
        "driver": (f"{MIRROR}/{versions.GPU_DRIVER.ref}", [PULL_SECRET]),
        "driver.manager": (f"{MIRROR}/{versions.GPU_DRIVER_MANAGER.ref}", [PULL_SECRET]),
        "toolkit": (f"{MIRROR}/{versions.GPU_TOOLKIT.ref}", [PULL_SECRET]),
        "devicePlugin": (f"{MIRROR}/{versions.GPU_DEVICE_PLUGIN.ref}", [PULL_SECRET]),
        "gfd": (f"{MIRROR}/{versions.GPU_DEVICE_PLUGIN.ref}", [PULL_SECRET]),
        "dcgmExporter": (f"{MIRROR}/{versions.GPU_DCGM_EXPORTER.ref}", [PULL_SECRET]),
        "validator": (f"{MIRROR}/{versions.GPU_VALIDATOR.ref}", [PULL_SECRET]),
        "migManager": (f"{MIRROR}/{versions.GPU_MIG_MANAGER.ref}", [PULL_SECRET]),
    }


def test_the_cluster_policy_with_a_registry_is_valid(crd_dir):
    from schemas import CrdSchemas, schema_errors

    policy = {"apiVersion": versions.NVIDIA_API, "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": cluster_policy_spec(gpu_config(), SITE_REGISTRY)}
    assert schema_errors(policy, CrdSchemas(crd_dir)) == []


def test_without_a_registry_the_cluster_policy_names_the_upstream_operands_alone():
    spec = cluster_policy_spec(gpu_config())
    assert (spec["driver"].get("manager"), [key for key, value in spec.items() if "imagePullSecrets" in value],
            spec["toolkit"]) == (None, [], {**versions.GPU_TOOLKIT.fields(), "enabled": True})


def test_the_nic_cluster_policy_names_every_operand_from_the_registry_with_the_pull_secret():
    spec = nic_cluster_policy_spec(gpu_config(), SITE_REGISTRY)
    operands = {"ofedDriver": spec["ofedDriver"], "rdmaSharedDevicePlugin": spec["rdmaSharedDevicePlugin"], "nvIpam": spec["nvIpam"],
                **{f"secondaryNetwork.{k}": v for k, v in spec["secondaryNetwork"].items()}}
    assert len(operands) == 6
    assert {key: (o["repository"].startswith(f"{MIRROR}/nvcr.io/"), o["imagePullSecrets"]) for key, o in operands.items()} == {
        key: (True, [PULL_SECRET]) for key in operands}


def test_the_nic_cluster_policy_with_a_registry_is_valid(crd_dir):
    from schemas import CrdSchemas, schema_errors

    policy = {"apiVersion": versions.MELLANOX_API, "kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"},
              "spec": nic_cluster_policy_spec(gpu_config(), SITE_REGISTRY)}
    assert schema_errors(policy, CrdSchemas(crd_dir)) == []


# --- the program's own GPU workloads, on a site with a registry --------------------------------------------------------

@pytest.fixture(scope="module")
def mirrored():
    """The smallest site with a registry, model-aware routing and scheduled profile switches."""
    site = small_site()
    site["inference"]["routing"] = "inference-extension"
    add_profile_schedule(site)
    return render_small(with_registry(site, files=FILES), secrets=SECRETS)


def program_objects(plan, kind: str, prefix: str) -> list[dict[str, Any]]:
    found = [obj for obj in plan.objects(kind) if obj["metadata"]["name"].startswith(prefix)]
    assert found, f"no {kind} {prefix}*"
    return found


def test_the_served_models_and_their_endpoint_pickers_pull_from_the_registry(mirrored):
    deployments = [*program_objects(mirrored, "Deployment", "vllm-"), *program_objects(mirrored, "Deployment", "epp-")]
    assert ([found for d in deployments for found in outside(d["spec"])],
            [path for d in deployments for path in without_pull_secret(d["spec"])]) == ([], [])


def test_the_pytorch_runtime_pulls_from_the_registry(mirrored):
    runtimes = program_objects(mirrored, "ClusterTrainingRuntime", "fab-torch")
    assert ([found for r in runtimes for found in outside(r["spec"])],
            [path for r in runtimes for path in without_pull_secret(r["spec"])]) == ([], [])


def test_the_profile_switch_pulls_kubectl_from_the_registry(mirrored):
    switches = program_objects(mirrored, "CronJob", "")
    assert ([found for s in switches for found in outside(s["spec"])],
            [path for s in switches for path in without_pull_secret(s["spec"])]) == ([], [])


@pytest.mark.parametrize(("config_map", "key_suffix"), [("ray-cluster-template", "raycluster.yaml"), ("batch-inference", ".yaml")])
def test_the_templates_teams_copy_name_the_mirrored_images(mirrored, config_map, key_suffix):
    templates = [yaml.safe_load(text) for cm in program_objects(mirrored, "ConfigMap", config_map)
                 for key, text in cm["data"].items() if key.endswith(key_suffix)]
    assert templates
    assert ([found for t in templates for found in outside(t["spec"])],
            [path for t in templates for path in without_pull_secret(t["spec"])]) == ([], [])


def test_the_inference_extension_crds_come_from_the_registrys_files(mirrored):
    (crds,) = mirrored.of_type("kubernetes:yaml/v2:ConfigFile")
    assert crds["inputs"]["file"] == f"{FILES}/{versions.INFERENCE_EXTENSION_CRDS.split('://', 1)[1]}"


def test_the_example_ray_job_names_the_mirrored_ray_image():
    job = example_ray_job(SITE_REGISTRY)
    assert ({ref for _, ref in image_references(job["spec"])}, without_pull_secret(job["spec"])) == (
        {f"{MIRROR}/docker.io/{versions.RAY_IMAGE}"}, [])
