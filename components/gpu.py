"""GpuCluster: NVIDIA GPU and Network Operators, GPU node pools, priorities and local NVMe (DESIGN section 2).

One per gpu and gpu-train cluster. The operators run from their pinned charts; the program owns
their custom resources (ClusterPolicy, NicClusterPolicy, IPoIBNetwork) so that every field is
previewed and checked against the CRDs. Node pools are labels and taints that node-feature-discovery
(deployed by the GPU Operator) puts on the listed nodes from one NodeFeatureRule: no Node object is
Pulumi's, so taints set by the kubelet, the node lifecycle controller or a drain are never touched.
Every operand of both operators tolerates the pool taints; system pods run on the untainted system nodes.
The notebooks pool's GPUs are shared, never whole: time-sliced by the device plugin (nvidia.com/gpu.shared) or split by
the MIG manager (nvidia.com/mig-<profile>), per node by a label of the same rule (`sharing.mode`).
InfiniBand carries NCCL on training nodes (its service level is what `nccl_env` hands TrainingPool); only
where inference loads weights over it does an IPoIB network exist, for inference nodes, on the storage
partition's child interface, its pool keeping the object store's IPoIB address free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import AdoptConfig, GpuClusterConfig
from components.config.schema.gpu import MIG_PROFILES, GpuType
from components.constants import GPU_OPERATOR_NAMESPACE, NETWORK_OPERATOR_NAMESPACE
from components.kube import Adoption, Priority, cache_storage_class, helm_release, namespace, priority_classes
from components.providers import ClusterRef
from components.registry import UPSTREAM, Registry

POOL_LABEL = "fab.internal/gpu-pool"
"""Node label and taint key of the GPU pools: inference or training."""
GPU_TYPE_LABEL = "fab.internal/gpu-type"
INFERENCE_NAMESPACE = "inference"
SERVING_PRIORITY = "fab-serving"
TRAINING_PRIORITY = "fab-training"
PRIORITY_CLASSES = {
    SERVING_PRIORITY: Priority("serving", 1_000_000, "PreemptLowerPriority", "Resident inference: never preempted by training."),
    TRAINING_PRIORITY: Priority("training", 1_000, "Never", "Training and batch: preemptible, and never preempts anything itself."),
}
NVME_STORAGE_CLASS = "local-nvme-cache"
RDMA_RESOURCE = "rdma/rdma_shared_ib"
"""Extended resource the RDMA shared device plugin advertises; pods request it to use InfiniBand."""
IPOIB_NETWORK = "ipoib-weights"
NCCL_CONFIG = "nccl"
"""The ConfigMap of NCCL settings in every team namespace of a GPU cluster; training jobs load it with envFrom."""
POSTRENDER = "components/helm/drop_clusterpolicy.py"
"""Helm post-renderer (path from the project root, where Pulumi runs the program) removing the chart's ClusterPolicy."""

PRIVILEGED_REASON = "GPU and NIC drivers, device plugins and DCGM need host access (kernel modules, /dev, host PID)"


POOLS = ("inference", "training", "notebooks")
NOTEBOOKS_POOL = "notebooks"
"""The pool whose GPUs GPU notebooks share (time-slices or MIG instances), never handed out whole."""
DEVICE_PLUGIN_CONFIG = "fab-device-plugin"
"""The device plugin's ConfigMap: one config per node kind, chosen by the node label DEVICE_PLUGIN_CONFIG_LABEL."""
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
WHOLE_GPUS = "whole"
"""The device plugin config of every node but the notebooks pool's: whole GPUs (the ClusterPolicy's default)."""
SHARED_GPUS = "notebooks"
MIG_PARTED_CONFIG = "fab-mig-parted"
"""The MIG manager's ConfigMap (key config.yaml): all-disabled, and the notebooks pool's split per GPU type."""
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_DISABLED = "all-disabled"
NODE_POOLS_RULE = "fab-gpu-pools"
"""The NodeFeatureRule that labels and taints every GPU node with its pool and GPU type."""
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
"""The operators' own toleration, which a tolerations list of theirs replaces rather than extends."""
NFD_WORKER_DEFAULT_TOLERATIONS = [
    {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    GPU_TOLERATION,
]
"""The GPU Operator chart's default tolerations of the node-feature-discovery worker (a list value replaces them)."""
NICS_READY = "jsonpath={.status.appliedStates[?(@.name=='state-nv-ipam-cni')].state}=ready"
"""Pulumi waits for this on the NicClusterPolicy: the Network Operator installs the nv-ipam CRDs in that state."""


def taint(pool: str) -> dict[str, str]:
    return {"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}


def toleration(pool: str) -> dict[str, str]:
    return {"key": POOL_LABEL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}


def pool_tolerations() -> list[dict[str, str]]:
    """What a pod that must reach every GPU node (a node agent, a driver) tolerates: both pools."""
    return [toleration(pool) for pool in POOLS]


@dataclass(frozen=True)
class GpuClusterArgs:
    cluster: ClusterRef
    """The gpu or gpu-train cluster."""
    config: GpuClusterConfig
    """Its section of `gpu`: nodes, operators' settings, InfiniBand."""
    node_pools: dict[str, str]
    """The pool (inference or training) each of its nodes serves under the active profile."""
    serves_inference: bool
    """Whether it is the site's inference cluster (`inference.cluster`), whose pods may load weights over IPoIB."""
    adopt: AdoptConfig
    """Declares the operators' namespaces and releases that exist already."""
    gpu_types: dict[str, GpuType] = field(default_factory=dict)
    """The site's GPU types by key (`gpu_types` and the defaults): the product a MIG split of the notebooks pool is for."""


class GpuCluster(pulumi.ComponentResource):
    """The GPU software stack and node pools of one GPU cluster."""

    pools: pulumi.Output[dict[str, Any]]
    """Per pool (inference, training, and notebooks where it has nodes): nodes and GPUs."""
    infiniband: pulumi.Output[dict[str, Any]]
    """What the fabric's subnet manager must hold for this cluster: NCCL's service level and, where weights load over
    InfiniBand, the storage partition (key, service level, IPoIB range, the object store's IPoIB address)."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "fab:gpu:GpuCluster", name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.cluster.provider]))
        )
        self._name = name
        self._adopt = Adoption(args.adopt, args.cluster.key)
        spec = args.config
        self.cluster = args.cluster
        """The cluster this is the GPU stack of."""
        self.serves_inference = args.serves_inference
        self.ipoib = ipoib_enabled(spec, args.serves_inference)
        """Whether its inference pods load weights over IPoIB (the IPoIB network exists)."""
        ib = spec.infiniband
        self.s3_ipoib_address = str(ib.s3_ipoib_address) if self.ipoib else None
        """The object store's address on the IPoIB network, which the weight sync resolves the S3 host name to, or None."""
        self.nccl_env = nccl_env(spec)
        """The NCCL settings training jobs on this cluster load (ConfigMap `nccl` in each team namespace)."""
        self.gpu_types = gpu_types(spec)
        """The GPU types of its nodes."""
        child = pulumi.ResourceOptions(parent=self)

        self.priority_classes = priority_classes(name, PRIORITY_CLASSES, child)
        self.storage_class = cache_storage_class(
            f"{name}-nvme", NVME_STORAGE_CLASS, spec.nvme_provisioner,
            "model cache and scratch only; AIStor holds everything that must survive", child,
        )
        gpu_ns = self._privileged_namespace(GPU_OPERATOR_NAMESPACE)
        # The chart installs into its namespace.
        self.gpu_operator = helm_release(
            f"{name}-gpu-operator", versions.GPU_OPERATOR, name="gpu-operator", namespace=GPU_OPERATOR_NAMESPACE,
            values=gpu_operator_values(), postrender=POSTRENDER, opts=pulumi.ResourceOptions(parent=self, depends_on=[gpu_ns]),
            adopt=self._adopt, registry=self.cluster.registry,
        )
        # Pools follow the active profile: switching profiles changes this rule, and NFD re-labels and
        # re-taints the nodes that move. Its CRD comes with the GPU Operator chart's node-feature-discovery.
        self.node_pools = k8s.apiextensions.CustomResource(
            f"{name}-node-pools",
            api_version=versions.NFD_API,
            kind="NodeFeatureRule",
            metadata={"name": NODE_POOLS_RULE},
            spec=node_pools_rule_spec(spec, args.node_pools),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.gpu_operator]),
        )
        configs = [
            # The namespace must exist before the ConfigMap is created in it.
            k8s.core.v1.ConfigMap(f"{name}-{config}", metadata={"name": config, "namespace": GPU_OPERATOR_NAMESPACE}, data=data,
                                  opts=pulumi.ResourceOptions(parent=self, depends_on=[gpu_ns]))
            for config, data in sharing_configs(spec, args.gpu_types).items()
        ]
        # The GPU Operator chart installs the ClusterPolicy CRD; the policy names the sharing ConfigMaps, which its device
        # plugin or MIG manager reads as it starts.
        self.cluster_policy = k8s.apiextensions.CustomResource(
            f"{name}-cluster-policy",
            api_version=versions.NVIDIA_API,
            kind="ClusterPolicy",
            metadata={"name": "cluster-policy"},
            spec=cluster_policy_spec(spec, self.cluster.registry),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.gpu_operator, *configs]),
        )

        nic_ns = self._privileged_namespace(NETWORK_OPERATOR_NAMESPACE)
        # The chart installs into its namespace, and its NodeFeatureRules (NIC labels) need the NFD CRDs the GPU Operator's
        # chart installs.
        self.network_operator = helm_release(
            f"{name}-network-operator", versions.NETWORK_OPERATOR, name="network-operator", namespace=NETWORK_OPERATOR_NAMESPACE,
            values={"nfd": {"enabled": False}},  # the GPU Operator's node-feature-discovery serves both
            opts=pulumi.ResourceOptions(parent=self, depends_on=[nic_ns, self.gpu_operator]), registry=self.cluster.registry,
            adopt=self._adopt,
        )
        # The Network Operator chart installs the NicClusterPolicy and IPoIBNetwork CRDs.
        nic_opts = pulumi.ResourceOptions(parent=self, depends_on=[self.network_operator])
        nic_policy = k8s.apiextensions.CustomResource(
            f"{name}-nic-cluster-policy",
            api_version=versions.MELLANOX_API,
            kind="NicClusterPolicy",
            # The operator applies the nv-ipam CRDs only when it reconciles this policy: Pulumi waits for
            # that state before the IPPool below is created.
            metadata={"name": "nic-cluster-policy", "annotations": {"pulumi.com/waitFor": NICS_READY}},
            spec=nic_cluster_policy_spec(spec, self.cluster.registry),
            opts=pulumi.ResourceOptions.merge(nic_opts, pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create="30m"))),
        )
        # What a serving pod needs of this cluster to be admitted, scheduled and started: its PriorityClass, its NVMe cache's
        # StorageClass, the pool labels and taints NFD applies, GPUs the operator's device plugin advertises, and with
        # IPoIB the NIC operands, the address pool and the network its pods attach to. Not the rest of the GPU stack.
        self.serving_needs: list[pulumi.Resource] = [*self.priority_classes.values(), self.storage_class, self.node_pools,
                                                     self.cluster_policy]
        """What the inference pool's vLLM Deployments wait for (components/inference.py)."""
        if self.ipoib:
            ipoib_pool = k8s.apiextensions.CustomResource(
                f"{name}-ipoib-pool",
                api_version=versions.NV_IPAM_API,
                kind="IPPool",
                metadata={"name": IPOIB_NETWORK, "namespace": NETWORK_OPERATOR_NAMESPACE},
                spec=ipoib_pool_spec(spec),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[nic_policy]),
            )
            ipoib_network = k8s.apiextensions.CustomResource(
                f"{name}-ipoib-network",
                api_version=versions.MELLANOX_API,
                kind="IPoIBNetwork",
                metadata={"name": IPOIB_NETWORK},
                spec={
                    "networkNamespace": INFERENCE_NAMESPACE,
                    # The partition's child interface: pods' IPoIB links are in the storage partition, not the default one.
                    "master": ib.partition_interface,
                    "ipam": json.dumps({"type": "nv-ipam", "poolName": IPOIB_NETWORK}),
                },
                opts=nic_opts,
            )
            self.serving_needs += [nic_policy, ipoib_pool, ipoib_network]

        members = {pool: sorted(node for node, in_pool in args.node_pools.items() if in_pool == pool) for pool in POOLS}
        if not members[NOTEBOOKS_POOL]:
            del members[NOTEBOOKS_POOL]
        self.pools = pulumi.Output.from_input(
            {pool: {"nodes": nodes, "gpus": sum(spec.nodes[node].gpus for node in nodes)} for pool, nodes in members.items()}
        )
        self.infiniband = pulumi.Output.from_input(infiniband_contract(spec, self.ipoib))
        self.register_outputs({"pools": self.pools, "infiniband": self.infiniband})

    def _privileged_namespace(self, name: str) -> k8s.core.v1.Namespace:
        return namespace(f"{self._name}-ns-{name}", name, pulumi.ResourceOptions(parent=self), privileged_reason=PRIVILEGED_REASON,
                         adopt=self._adopt, registry=self.cluster.registry)


def gpu_types(config: GpuClusterConfig) -> list[str]:
    """The GPU types of a cluster's nodes (its training flavors), whatever pool they serve."""
    return sorted({node.gpu_type for node in config.nodes.values()})


def ipoib_enabled(config: GpuClusterConfig, serves_inference: bool) -> bool:
    """Whether the cluster's inference pods load weights over IPoIB (independent of the profile in force)."""
    return config.infiniband.inference_weights_over_ib and serves_inference


def nccl_env(config: GpuClusterConfig) -> dict[str, str]:
    """NCCL's settings on the cluster: the InfiniBand service level and traffic class of its traffic, apart from storage's, and the HCAs it
    may use where the site names them (`=` makes NCCL match the names exactly, not as prefixes)."""
    ib = config.infiniband
    env = {"NCCL_IB_SL": str(ib.nccl_service_level), "NCCL_IB_TC": str(ib.nccl_traffic_class)}
    if ib.nccl_hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(ib.nccl_hcas)
    return env


def ipoib_pool_spec(config: GpuClusterConfig) -> dict[str, Any]:
    """The nv-ipam pool of the IPoIB network: inference nodes only, never the object store's own IPoIB address."""
    ib = config.infiniband
    address = str(ib.s3_ipoib_address)
    return {
        "subnet": str(ib.ipoib_range),
        "perNodeBlockSize": 32,
        "exclusions": [{"startIP": address, "endIP": address}],
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": POOL_LABEL, "operator": "In", "values": ["inference"]}
        ]}]},
    }


def infiniband_contract(config: GpuClusterConfig, ipoib: bool) -> dict[str, Any]:
    """What the subnet manager (outside Kubernetes) must hold for the cluster: NCCL's service level and traffic class, and
    the storage partition with its own service level (and bandwidth share, where set) where weights load over IPoIB."""
    ib = config.infiniband
    contract: dict[str, Any] = {"nccl_service_level": ib.nccl_service_level, "nccl_traffic_class": ib.nccl_traffic_class}
    if ipoib:
        contract["storage_partition"] = {
            "partition_key": ib.ipoib_partition_key,
            "interface": ib.partition_interface,
            "service_level": ib.storage_qos_service_level,
            "ipoib_range": str(ib.ipoib_range),
            "s3_ipoib_address": str(ib.s3_ipoib_address),
        }
        if ib.storage_bandwidth_percent is not None:
            contract["storage_partition"]["bandwidth_percent"] = ib.storage_bandwidth_percent
            contract["storage_partition"]["opensm_qos"] = opensm_qos(ib.storage_qos_service_level, ib.storage_bandwidth_percent)
    return contract


def opensm_qos(storage_level: int, percent: int) -> str:
    """OpenSM's QoS lines (opensm.conf) that give storage's service level a virtual lane of its own (VL1, every other
    service level, NCCL's among them, on VL0) and `percent` of a port under contention: low-priority VL arbitration
    weights in that ratio (units of 64 bytes, at most 255 each), the high-priority table empty."""
    sl2vl = ",".join("1" if level == storage_level else "0" for level in range(16))
    return (f"qos TRUE\nqos_max_vls 2\nqos_sl2vl {sl2vl}\nqos_vlarb_high 0:0,1:0\n"
            f"qos_vlarb_low 0:{2 * (100 - percent)},1:{2 * percent}\n")


def gpu_operator_values() -> dict[str, Any]:
    """GPU Operator chart values: its node-feature-discovery reaches every GPU node and may taint nodes."""
    return {
        "nfd": {"enabled": True},
        "psa": {"enabled": False},
        "node-feature-discovery": {
            # nfd-master applies a NodeFeatureRule's taints only when told to (the pool taints).
            "master": {"config": {"enableTaints": True}},
            # The worker reports the features the rules match on, so it runs on every GPU node.
            "worker": {"tolerations": [*NFD_WORKER_DEFAULT_TOLERATIONS, *pool_tolerations()]},
        },
    }


def node_pools_rule_spec(config: GpuClusterConfig, node_pools: dict[str, str]) -> dict[str, Any]:
    """One NFD rule per pool and GPU type: its nodes (by name) get the pool and type labels and the pool taint."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node_name, node in sorted(config.nodes.items()):
        groups.setdefault((node_pools[node_name], node.gpu_type), []).append(node_name)
    return {
        "rules": [
            {
                "name": f"fab {pool} pool {gpu_type}",
                "labels": {POOL_LABEL: pool, GPU_TYPE_LABEL: gpu_type, **(sharing_labels(config, gpu_type) if pool == NOTEBOOKS_POOL else {})},
                "taints": [taint(pool)],
                "matchFeatures": [{"feature": "system.name", "matchExpressions": {"nodename": {"op": "In", "value": nodes}}}],
            }
            for (pool, gpu_type), nodes in sorted(groups.items())
        ]
    }


def shares_gpus(config: GpuClusterConfig) -> bool:
    """Whether any node of the cluster serves the notebooks pool (whatever the profile: the sharing configs stay in place)."""
    return any(node.pool == NOTEBOOKS_POOL for node in config.nodes.values())


def _device_plugin_config(mig_strategy: str, time_slices: int | None = None) -> str:
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if time_slices:
        # Renamed, shared GPUs are nvidia.com/gpu.shared: no training quota or vLLM pod asking for nvidia.com/gpu lands on
        # a time-slice, and a notebook asks for one slice at most.
        config["sharing"] = {"timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                                             "resources": [{"name": "nvidia.com/gpu", "replicas": time_slices}]}}
    return json.dumps(config, sort_keys=True)


def mig_config_name(gpu_type: str) -> str:
    """The MIG manager config splitting the notebooks pool's GPUs of one type."""
    return f"{SHARED_GPUS}-{gpu_type}"


def sharing_configs(config: GpuClusterConfig, gpu_types: dict[str, GpuType]) -> dict[str, dict[str, str]]:
    """The ConfigMaps (name -> data) that share the notebooks pool's GPUs: the device plugin's configs for time-slicing,
    or the MIG manager's for MIG (each GPU type split into as many `mig_profile` instances as it holds); none without
    notebooks-pool nodes."""
    if not shares_gpus(config):
        return {}
    sharing = config.sharing
    if sharing.mode == "time-slicing":
        return {DEVICE_PLUGIN_CONFIG: {WHOLE_GPUS: _device_plugin_config(config.mig_strategy),
                                       SHARED_GPUS: _device_plugin_config("none", sharing.replicas)}}
    mig_configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for gpu_type in sorted({node.gpu_type for node in config.nodes.values() if node.pool == NOTEBOOKS_POOL}):
        count = MIG_PROFILES[gpu_types[gpu_type].product][sharing.mig_profile]
        mig_configs[mig_config_name(gpu_type)] = [{"devices": "all", "mig-enabled": True, "mig-devices": {sharing.mig_profile: count}}]
    return {MIG_PARTED_CONFIG: {"config.yaml": json.dumps({"version": "v1", "mig-configs": mig_configs}, sort_keys=True)}}


def sharing_labels(config: GpuClusterConfig, gpu_type: str) -> dict[str, str]:
    """The label that puts a notebooks-pool node of the given GPU type under its sharing config."""
    if config.sharing.mode == "time-slicing":
        return {DEVICE_PLUGIN_CONFIG_LABEL: SHARED_GPUS}
    return {MIG_CONFIG_LABEL: mig_config_name(gpu_type)}


def _operand(image: versions.Image, registry: Registry) -> dict[str, Any]:
    """An operand's image in an operator's policy (repository, image, version): from the site registry where it has one,
    with its pull Secret, which the operator adds to the operand's pods."""
    fields: dict[str, Any] = registry.operand(image).fields()
    if registry.pull_secret:
        fields["imagePullSecrets"] = [registry.pull_secret]
    return fields


def cluster_policy_spec(config: GpuClusterConfig, registry: Registry = UPSTREAM) -> dict[str, Any]:
    """The GPU Operator ClusterPolicy: driver with GPUDirect RDMA, toolkit, device plugin, GFD, DCGM exporter, MIG.

    Every enabled operand names its image (`_operand`). With a site registry so does the driver manager, which the operator
    otherwise takes from its own environment; the operands left off (standalone DCGM, the node status exporter, GDS,
    GDRCopy and every sandbox or vGPU operand: `sandboxWorkloads` is off) are never started."""
    mig = config.mig_strategy
    shared = shares_gpus(config)
    time_slices = shared and config.sharing.mode == "time-slicing"
    mig_split = shared and config.sharing.mode == "mig"
    return {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {
            "priorityClassName": "system-node-critical",
            # Replaces every operand's own toleration list (driver, toolkit, device plugin, GFD, DCGM exporter,
            # MIG manager, validator), hence the operators' nvidia.com/gpu toleration as well.
            "tolerations": [*pool_tolerations(), GPU_TOLERATION],
        },
        # The Network Operator provides the NIC driver; the GPU driver loads nvidia-peermem against it for NCCL.
        "driver": {
            **_operand(versions.GPU_DRIVER, registry), "enabled": True, "rdma": {"enabled": True, "useHostMofed": False},
            **({"manager": _operand(versions.GPU_DRIVER_MANAGER, registry)} if registry.mirrored else {}),
        },
        "toolkit": {**_operand(versions.GPU_TOOLKIT, registry), "enabled": True},
        "devicePlugin": {
            **_operand(versions.GPU_DEVICE_PLUGIN, registry), "enabled": True,
            # Time-slicing: nodes labelled nvidia.com/device-plugin.config=notebooks share; every other node has whole GPUs.
            **({"config": {"name": DEVICE_PLUGIN_CONFIG, "default": WHOLE_GPUS}} if time_slices else {}),
        },
        "gfd": {**_operand(versions.GPU_DEVICE_PLUGIN, registry), "enabled": True},
        "dcgm": {"enabled": False},
        "dcgmExporter": {
            **_operand(versions.GPU_DCGM_EXPORTER, registry),
            "enabled": True,
            # Scraped through the program's own ServiceMonitor (components/monitors.py), which waits for the CRD.
            "serviceMonitor": {"enabled": False},
        },
        "nodeStatusExporter": {"enabled": False},
        "validator": _operand(versions.GPU_VALIDATOR, registry),
        "mig": {"strategy": "single" if mig == "none" else mig},
        "migManager": {
            **_operand(versions.GPU_MIG_MANAGER, registry), "enabled": mig != "none",
            # MIG sharing: nodes labelled nvidia.com/mig.config=notebooks-<gpu type> are split; the rest stay all-disabled.
            **({"config": {"name": MIG_PARTED_CONFIG, "default": MIG_DISABLED}} if mig_split else {}),
        },
        "cdi": {"enabled": True},
    }


def nic_cluster_policy_spec(config: GpuClusterConfig, registry: Registry = UPSTREAM) -> dict[str, Any]:
    """The Network Operator NicClusterPolicy: NIC driver, RDMA shared device plugin, Multus, IPoIB CNI, nv-ipam, each
    naming its image (`_operand`)."""
    ib = config.infiniband
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
        # Added to every operand DaemonSet (the operator appends nvidia.com/gpu); the NIC driver is only
        # deployed to nodes whose taints are all tolerated.
        "tolerations": pool_tolerations(),
        "ofedDriver": {
            **_operand(versions.NIC_OFED_DRIVER, registry),
            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300}},
        },
        "rdmaSharedDevicePlugin": {**_operand(versions.NIC_RDMA_SHARED_DP, registry), "config": json.dumps(rdma_config, sort_keys=True)},
        "nvIpam": {**_operand(versions.NIC_NV_IPAM, registry), "enableWebhook": False},
        "secondaryNetwork": {
            "cniPlugins": _operand(versions.NIC_CNI_PLUGINS, registry),
            "multus": _operand(versions.NIC_MULTUS, registry),
            "ipoib": _operand(versions.NIC_IPOIB, registry),
        },
    }
