"""fab-no-gpu-outside-gpu-clusters counts shares of a GPU as GPUs (issue 20, item 3): a time-slice
(nvidia.com/gpu.shared) or a MIG slice (nvidia.com/mig-<profile>) asked for on compute is refused like a whole GPU."""

from __future__ import annotations

from policy_fixtures import SAFE, check, kube, pod
from rules.gpu import no_gpu_outside_gpu_clusters


def notebook(resource: str) -> dict:
    return pod("Deployment", "notebook", "jupyterhub", {**SAFE, "resources": {"limits": {resource: "1"}}})


def test_a_time_slice_on_a_gpu_cluster_passes():
    assert check(no_gpu_outside_gpu_clusters, [kube(notebook("nvidia.com/gpu.shared"), "site-a-gpu", gpu=True)]) == []


def test_fails_when_a_compute_pod_asks_for_a_time_slice():
    assert check(no_gpu_outside_gpu_clusters, [kube(notebook("nvidia.com/gpu.shared"), "site-a-compute")]) == [
        "Deployment jupyterhub/notebook requests nvidia.com/gpu.shared on site-a-compute, which is not a GPU cluster"
    ]


def test_fails_when_a_compute_pod_asks_for_a_mig_slice():
    assert check(no_gpu_outside_gpu_clusters, [kube(notebook("nvidia.com/mig-1g.10gb"), "site-a-compute")]) == [
        "Deployment jupyterhub/notebook requests nvidia.com/mig-1g.10gb on site-a-compute, which is not a GPU cluster"
    ]
