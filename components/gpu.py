"""GpuCluster: NVIDIA GPU and Network Operators, GPU node pools, priorities and local NVMe (DESIGN section 2).

One per gpu and gpu-train cluster. The operators run from their pinned charts; the program owns
their custom resources (ClusterPolicy, NicClusterPolicy, IPoIBNetwork) so that every field is
previewed and checked against the CRDs. Node pools are labels and taints patched onto the listed
nodes; serving outranks training and is never preempted by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import SiteConfig
from components.kube import namespace
from components.providers import SiteProviders

POOL_LABEL = "fab.internal/gpu-pool"
"""Node label and taint key of the GPU pools: inference or training."""
GPU_TYPE_LABEL = "fab.internal/gpu-type"
GPU_OPERATOR_NAMESPACE = "gpu-operator"
NETWORK_OPERATOR_NAMESPACE = "nvidia-network-operator"
INFERENCE_NAMESPACE = "inference"
SERVING_PRIORITY = "fab-serving"
TRAINING_PRIORITY = "fab-training"
NVME_STORAGE_CLASS = "local-nvme-cache"
RDMA_RESOURCE = "rdma/rdma_shared_ib"
"""Extended resource the RDMA shared device plugin advertises; pods request it to use InfiniBand."""
IPOIB_NETWORK = "ipoib-weights"
POSTRENDER = "components/helm/drop_clusterpolicy.py"
"""Helm post-renderer (path from the project root, where Pulumi runs the program) removing the chart's ClusterPolicy."""

PRIVILEGED_REASON = "GPU and NIC drivers, device plugins and DCGM need host access (kernel modules, /dev, host PID)"


def taint(pool: str) -> dict[str, str]:
    return {"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}


def toleration(pool: str) -> dict[str, str]:
    return {"key": POOL_LABEL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}


@dataclass(frozen=True)
class GpuClusterArgs:
    site: SiteConfig
    cluster: str
    """Key of the gpu or gpu-train cluster."""
    providers: SiteProviders


class GpuCluster(pulumi.ComponentResource):
    """The GPU software stack and node pools of one GPU cluster."""

    pools: pulumi.Output[dict[str, Any]]
    """Per pool (inference, training): nodes and GPUs."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None):
        site, key = args.site, args.cluster
        provider = args.providers.for_cluster(key)
        super().__init__(
            "fab:gpu:GpuCluster", name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[provider]))
        )
        self._name, self._site, self._key = name, site, key
        spec = site.gpu[key]
        child = pulumi.ResourceOptions(parent=self)

        self.priority_classes = {
            SERVING_PRIORITY: k8s.scheduling.v1.PriorityClass(
                f"{name}-priority-serving",
                metadata={"name": SERVING_PRIORITY},
                value=1_000_000,
                preemption_policy="PreemptLowerPriority",
                description="Resident inference: never preempted by training.",
                opts=child,
            ),
            TRAINING_PRIORITY: k8s.scheduling.v1.PriorityClass(
                f"{name}-priority-training",
                metadata={"name": TRAINING_PRIORITY},
                value=1_000,
                preemption_policy="Never",
                description="Training and batch: preemptible, and never preempts anything itself.",
                opts=child,
            ),
        }
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-nvme",
            metadata={
                "name": NVME_STORAGE_CLASS,
                "labels": {"fab.internal/durability": "cache"},
                "annotations": {"fab.internal/purpose": "model cache and scratch only; AIStor holds everything that must survive"},
            },
            provisioner=spec.nvme_provisioner,
            reclaim_policy="Delete",
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=False,
            opts=child,
        )
        # Pools follow the active profile: switching profiles re-labels and re-taints nodes, nothing else here.
        self.node_patches = [
            self._node_patch(node_name, site.node_pool(key, node_name), node.gpu_type) for node_name, node in sorted(spec.nodes.items())
        ]

        gpu_ns = self._privileged_namespace(GPU_OPERATOR_NAMESPACE)
        self.gpu_operator = k8s.helm.v3.Release(
            f"{name}-gpu-operator",
            name="gpu-operator",
            chart=versions.GPU_OPERATOR.chart,
            version=versions.GPU_OPERATOR.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.GPU_OPERATOR.repo),
            namespace=GPU_OPERATOR_NAMESPACE,
            values={"nfd": {"enabled": True}, "psa": {"enabled": False}},
            postrender=POSTRENDER,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gpu_ns]),
        )
        self.cluster_policy = k8s.apiextensions.CustomResource(
            f"{name}-cluster-policy",
            api_version=versions.NVIDIA_API,
            kind="ClusterPolicy",
            metadata={"name": "cluster-policy"},
            spec=cluster_policy_spec(site, key),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.gpu_operator]),
        )

        nic_ns = self._privileged_namespace(NETWORK_OPERATOR_NAMESPACE)
        self.network_operator = k8s.helm.v3.Release(
            f"{name}-network-operator",
            name="network-operator",
            chart=versions.NETWORK_OPERATOR.chart,
            version=versions.NETWORK_OPERATOR.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.NETWORK_OPERATOR.repo),
            namespace=NETWORK_OPERATOR_NAMESPACE,
            values={"nfd": {"enabled": False}},  # the GPU Operator's node-feature-discovery serves both
            opts=pulumi.ResourceOptions(parent=self, depends_on=[nic_ns, self.gpu_operator]),
        )
        nic_opts = pulumi.ResourceOptions(parent=self, depends_on=[self.network_operator])
        k8s.apiextensions.CustomResource(
            f"{name}-nic-cluster-policy",
            api_version=versions.MELLANOX_API,
            kind="NicClusterPolicy",
            metadata={"name": "nic-cluster-policy"},
            spec=nic_cluster_policy_spec(site, key),
            opts=nic_opts,
        )
        if ipoib_enabled(site, key):
            k8s.apiextensions.CustomResource(
                f"{name}-ipoib-pool",
                api_version=versions.NV_IPAM_API,
                kind="IPPool",
                metadata={"name": IPOIB_NETWORK, "namespace": NETWORK_OPERATOR_NAMESPACE},
                spec={
                    "subnet": str(spec.infiniband.ipoib_range),
                    "perNodeBlockSize": 32,
                    "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": POOL_LABEL, "operator": "In", "values": ["inference"]}
                    ]}]},
                },
                opts=nic_opts,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-ipoib-network",
                api_version=versions.MELLANOX_API,
                kind="IPoIBNetwork",
                metadata={"name": IPOIB_NETWORK},
                spec={
                    "networkNamespace": INFERENCE_NAMESPACE,
                    "master": spec.infiniband.ipoib_master,
                    "ipam": json.dumps({"type": "nv-ipam", "poolName": IPOIB_NETWORK}),
                },
                opts=nic_opts,
            )

        self.pools = pulumi.Output.from_input(
            {
                pool: {
                    "nodes": sorted(site.pool_nodes(key, pool)),
                    "gpus": sum(n.gpus for n in site.pool_nodes(key, pool).values()),
                }
                for pool in ("inference", "training")
            }
        )
        self.register_outputs({"pools": self.pools})

    def _privileged_namespace(self, name: str) -> k8s.core.v1.Namespace:
        return namespace(f"{self._name}-ns-{name}", name, pulumi.ResourceOptions(parent=self), privileged_reason=PRIVILEGED_REASON)

    def _node_patch(self, node: str, pool: str, gpu_type: str) -> k8s.core.v1.NodePatch:
        """Labels and the pool taint of one node.

        A Node's taints are one atomic list for server-side apply: the patch owns the whole list, and it
        fails (rather than overwrite) while another manager, such as the node lifecycle controller, owns it.
        """
        return k8s.core.v1.NodePatch(
            f"{self._name}-node-{node}",
            metadata={"name": node, "labels": {POOL_LABEL: pool, GPU_TYPE_LABEL: gpu_type}},
            spec={"taints": [taint(pool)]},
            opts=pulumi.ResourceOptions(parent=self),
        )


def ipoib_enabled(site: SiteConfig, key: str) -> bool:
    """Whether the cluster's inference pods load weights over IPoIB (independent of the profile in force)."""
    return site.gpu[key].infiniband.inference_weights_over_ib and key == site.inference.cluster


def cluster_policy_spec(site: SiteConfig, key: str) -> dict[str, Any]:
    """The GPU Operator ClusterPolicy: driver with GPUDirect RDMA, toolkit, device plugin, GFD, DCGM exporter, MIG."""
    mig = site.gpu[key].mig_strategy
    return {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {
            "priorityClassName": "system-node-critical",
            "tolerations": [toleration("inference"), toleration("training"), {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        # The Network Operator provides the NIC driver; the GPU driver loads nvidia-peermem against it for NCCL.
        "driver": {**versions.GPU_DRIVER.fields(), "enabled": True, "rdma": {"enabled": True, "useHostMofed": False}},
        "toolkit": {**versions.GPU_TOOLKIT.fields(), "enabled": True},
        "devicePlugin": {**versions.GPU_DEVICE_PLUGIN.fields(), "enabled": True},
        "gfd": {**versions.GPU_DEVICE_PLUGIN.fields(), "enabled": True},
        "dcgm": {"enabled": False},
        "dcgmExporter": {
            **versions.GPU_DCGM_EXPORTER.fields(),
            "enabled": True,
            "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": False},
        },
        "nodeStatusExporter": {"enabled": False},
        "validator": versions.GPU_VALIDATOR.fields(),
        "mig": {"strategy": "single" if mig == "none" else mig},
        "migManager": {**versions.GPU_MIG_MANAGER.fields(), "enabled": mig != "none"},
        "cdi": {"enabled": True},
    }


def nic_cluster_policy_spec(site: SiteConfig, key: str) -> dict[str, Any]:
    """The Network Operator NicClusterPolicy: NIC driver, RDMA shared device plugin, Multus, IPoIB CNI, nv-ipam."""
    ib = site.gpu[key].infiniband
    rdma_config = {
        "configList": [
            {
                "resourceName": RDMA_RESOURCE.split("/", 1)[1],
                "rdmaHcaMax": ib.rdma_hca_max,
                "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]},
            }
        ]
    }
    return {
        "ofedDriver": {
            **versions.NIC_OFED_DRIVER.fields(),
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300}},
        },
        "rdmaSharedDevicePlugin": {**versions.NIC_RDMA_SHARED_DP.fields(), "config": json.dumps(rdma_config, sort_keys=True)},
        "nvIpam": {**versions.NIC_NV_IPAM.fields(), "enableWebhook": False},
        "secondaryNetwork": {
            "cniPlugins": versions.NIC_CNI_PLUGINS.fields(),
            "multus": versions.NIC_MULTUS.fields(),
            "ipoib": versions.NIC_IPOIB.fields(),
        },
    }
