"""Image values of the charts of the gpu part of the platform (components/airgap).

The GPU and Network Operators' operands are not here: the program owns their ClusterPolicy and NicClusterPolicy
(components/gpu.py, `cluster_policy_spec` and `nic_cluster_policy_spec`), which name every operand's image from the
registry. These values move what the charts themselves run: the operators, the images an operator reads from its own
environment (the GPU Operator's driver manager, the Network Operator's DOCA driver init container), the bundled
subcharts' controllers (node-feature-discovery, JobSet) and the charts' hook Jobs, with the site's pull Secret.
"""

from __future__ import annotations

from typing import Any

from components import versions
from components.registry import Registry

GPU_OPERATOR_REPOSITORY = "nvcr.io/nvidia"
"""The GPU Operator's own image (`operator.repository`, image gpu-operator at the chart's appVersion)."""
GPU_NFD_REPOSITORY = "registry.k8s.io/nfd/node-feature-discovery"
"""node-feature-discovery v0.18.2, the GPU Operator chart's subchart (master, worker, gc and its post-delete Job)."""
NETWORK_OPERATOR_REPOSITORY = "nvcr.io/nvidia/cloud-native"
"""The Network Operator's own image (`operator.repository`; its Deployment and both hook Jobs run it)."""
DOCA_INIT_REPOSITORY = "nvcr.io/nvidia/mellanox"
"""network-operator-init-container (`operator.ofedDriver.initContainer`): the operator reads it from its environment
(OFED_INIT_CONTAINER_IMAGE) for the DOCA driver DaemonSet's init container."""
KUEUE_REPOSITORY = "registry.k8s.io/kueue/kueue"
"""Kueue's controller manager, which also serves the visibility API and the webhooks (the chart runs no kube-rbac-proxy)."""
TRAINER_REPOSITORY = "ghcr.io/kubeflow/trainer/trainer-controller-manager"
"""Kubeflow Trainer's controller (the chart's `image.registry` + `image.repository`, tagged with the chart's version)."""
JOBSET_REPOSITORY = "registry.k8s.io/jobset/jobset"
"""The JobSet controller of the subchart Kubeflow Trainer bundles (`jobset.image`)."""
KUBERAY_REPOSITORY = "quay.io/kuberay/operator"


def _mirrored(registry: Registry, repository: str) -> str:
    """A source repository (registry host and path, no tag) as the site registry holds it."""
    ref = registry.ref(repository)
    return f"{ref.registry}/{ref.repository}"


def _secret_names(registry: Registry) -> list[str]:
    """`imagePullSecrets` as the NVIDIA charts take it: Secret names, which their templates wrap (the other charts copy
    `registry.pull_secrets`, `[{name: ...}]`, into the pod spec as it is)."""
    return [secret["name"] for secret in registry.pull_secrets]


def _gpu_operator(registry: Registry) -> dict[str, Any]:
    """The GPU Operator chart (v25.10.1): the operator (its Deployment and its CRD upgrade and cleanup Jobs), the driver
    manager it reads from its environment, and the node-feature-discovery subchart."""
    return {
        "operator": {"repository": _mirrored(registry, GPU_OPERATOR_REPOSITORY), "imagePullSecrets": _secret_names(registry)},
        "driver": {"manager": {"repository": registry.operand(versions.GPU_DRIVER_MANAGER).repository}},
        "node-feature-discovery": {
            "image": {"repository": _mirrored(registry, GPU_NFD_REPOSITORY)},
            "imagePullSecrets": registry.pull_secrets,
        },
    }


def _network_operator(registry: Registry) -> dict[str, Any]:
    """The Network Operator chart (26.4.1): the operator (Deployment, CRD upgrade and keep-policy hook Jobs) and the DOCA
    driver's init container it reads from its environment. Its node-feature-discovery, SR-IOV and maintenance operator
    subcharts are off (the GPU Operator's node-feature-discovery serves both: components/gpu.py)."""
    return {
        "operator": {
            "repository": _mirrored(registry, NETWORK_OPERATOR_REPOSITORY),
            "ofedDriver": {"initContainer": {"repository": _mirrored(registry, DOCA_INIT_REPOSITORY)}},
        },
        "imagePullSecrets": _secret_names(registry),
    }


def _kueue(registry: Registry) -> dict[str, Any]:
    """The Kueue chart (0.19.2): its controller manager, the one image it runs (KueueViz is off)."""
    return {
        "controllerManager": {
            "manager": {"image": {"repository": _mirrored(registry, KUEUE_REPOSITORY)}},
            "imagePullSecrets": registry.pull_secrets,
        },
    }


def _kubeflow_trainer(registry: Registry) -> dict[str, Any]:
    """The Kubeflow Trainer chart (2.3.0): its controller and the bundled JobSet controller. It installs no runtime (the
    platform ships its own, components/runtimes.py), so neither the runtime installer Job nor any runtime or
    initializer image is rendered; its LeaderWorkerSet subchart (data cache) is off."""
    trainer = registry.ref(TRAINER_REPOSITORY)
    return {
        "image": {"registry": trainer.registry, "repository": trainer.repository, "pullSecrets": registry.pull_secrets},
        "jobset": {"image": {"repository": _mirrored(registry, JOBSET_REPOSITORY), "pullSecrets": registry.pull_secrets}},
    }


def _kuberay_operator(registry: Registry) -> dict[str, Any]:
    """The KubeRay operator chart (1.7.0). The operator starts no image of its own: a Ray cluster's pods, its autoscaler
    and a RayJob's submitter run the images of the RayCluster spec (components/ray.py names them)."""
    return {
        "image": {"repository": _mirrored(registry, KUBERAY_REPOSITORY)},
        "imagePullSecrets": registry.pull_secrets,
    }


VALUES: dict[str, Any] = {
    "gpu-operator": _gpu_operator,
    "network-operator": _network_operator,
    "kueue": _kueue,
    "kubeflow-trainer": _kubeflow_trainer,
    "kuberay-operator": _kuberay_operator,
}
