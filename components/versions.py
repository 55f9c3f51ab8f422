"""Every pinned Helm chart, API version and Kubernetes target of the platform, in one table (DESIGN section 4).

Components import from here; no chart version or API version is written anywhere else. Bumping a
version is a one-line change in this file, reviewed in the pull-request preview.
"""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES_VERSION = "1.34"
"""The Kubernetes minor version the manifests are written and validated for."""


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to an exact version in a named repository (`oci://...` for an OCI registry)."""

    chart: str
    version: str
    repo: str
    timeout_sec: int = 600
    """How long `pulumi up` waits for an install or upgrade to be ready (Pulumi's own default is 300 s):
    image pulls, database migrations and first-time hooks on a new cluster take longer."""


CILIUM = HelmChart(chart="cilium", version="1.18.3", repo="https://helm.cilium.io/", timeout_sec=900)

# Custom resource API versions. Only the current, non-deprecated versions are used.
CILIUM_API = "cilium.io/v2"

CLOUDNATIVE_PG = HelmChart(chart="cloudnative-pg", version="0.29.0", repo="https://cloudnative-pg.github.io/charts")
"""The CloudNativePG operator chart; 0.29.0 ships operator 1.30.0."""
POLARIS = HelmChart(chart="polaris", version="1.7.0", repo="https://downloads.apache.org/polaris/helm-chart")
AISTOR_OPERATOR = HelmChart(chart="aistor-operator", version="5.10.0", repo="https://helm.min.io/")
AISTOR_OBJECTSTORE = HelmChart(chart="aistor-objectstore", version="1.0.16", repo="https://helm.min.io/", timeout_sec=1200)

# Container images the program runs itself (charts pin their own).
POLARIS_ADMIN_TOOL_IMAGE = "apache/polaris-admin-tool:1.7.0"
POLARIS_SERVER_IMAGE = "apache/polaris:1.7.0"
SETUP_IMAGE = "python:3.13.9-slim-bookworm"
"""Runs the idempotent Polaris setup script (standard library only)."""

CNPG_API = "postgresql.cnpg.io/v1"
CNPG_POSTGRES_IMAGE = "ghcr.io/cloudnative-pg/postgresql:18.4-system-trixie"
"""The Postgres image CloudNativePG 1.30.0 runs a Cluster with when it names none (pkg/versions/versions.go
DefaultImageName at v1.30.0): on a site with a registry, the Polaris database's `imageName` and the operator's default
(`POSTGRES_IMAGE_NAME`), from the mirror. A `system` image: it carries the barman-cloud tools of the in-tree backups. Bump with
CLOUDNATIVE_PG."""

GPU_OPERATOR = HelmChart(chart="gpu-operator", version="v25.10.1", repo="https://helm.ngc.nvidia.com/nvidia", timeout_sec=900)
NETWORK_OPERATOR = HelmChart(chart="network-operator", version="26.4.1", repo="https://helm.ngc.nvidia.com/nvidia")
ENVOY_GATEWAY = HelmChart(chart="gateway-helm", version="v1.9.0", repo="oci://docker.io/envoyproxy")
"""Envoy Gateway; the chart also installs the Gateway API CRDs it was built with."""
ENVOY_GATEWAY_IMAGE = f"docker.io/envoyproxy/gateway:{ENVOY_GATEWAY.version}"
"""The Envoy Gateway controller, its certgen Job and the proxies' shutdown manager: the chart's
`global.images.envoyGateway.image` at v1.9.0 (the release's image, tagged with the chart version)."""
ENVOY_PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.39.0"
"""The Envoy proxies Envoy Gateway v1.9.0 launches for a Gateway, unless its EnvoyProxy names another:
`DefaultEnvoyProxyImage` compiled into the controller (api/v1alpha1/shared_types.go at v1.9.0)."""
ENVOY_RATELIMIT_IMAGE = "docker.io/envoyproxy/ratelimit:17b1956c"
"""The global rate limit service Envoy Gateway v1.9.0 launches: the chart's `global.images.ratelimit.image` at v1.9.0, the
same as the controller's compiled `DefaultRateLimitImage` (api/v1alpha1/shared_types.go)."""
RATE_LIMIT_STORE_IMAGE = "valkey/valkey:9.0.8-alpine"
"""The counter store of Envoy Gateway's global rate limit service (Redis protocol; BSD-licensed Valkey)."""


@dataclass(frozen=True)
class Image:
    """A container image split the way operator CRs want it: repository, image name, version."""

    repository: str
    image: str
    version: str

    @property
    def ref(self) -> str:
        return f"{self.repository}/{self.image}:{self.version}"

    def fields(self) -> dict[str, str]:
        return {"repository": self.repository, "image": self.image, "version": self.version}


# Operands of the GPU Operator v25.10.1 ClusterPolicy (its chart's defaults at that tag).
GPU_DRIVER = Image("nvcr.io/nvidia", "driver", "580.105.08")
GPU_TOOLKIT = Image("nvcr.io/nvidia/k8s", "container-toolkit", "v1.18.1")
GPU_DEVICE_PLUGIN = Image("nvcr.io/nvidia", "k8s-device-plugin", "v0.18.1")
GPU_DCGM_EXPORTER = Image("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.4.2-4.7.0-distroless")
GPU_MIG_MANAGER = Image("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.13.1")
GPU_VALIDATOR = Image("nvcr.io/nvidia/cloud-native", "gpu-operator-validator", "v25.10.1")
GPU_DRIVER_MANAGER = Image("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.9.1")
"""The driver DaemonSet's init container (`driver.manager`): the chart hands it to the operator as DRIVER_MANAGER_IMAGE,
which the operator uses where the ClusterPolicy names none; a site registry names it in the ClusterPolicy."""

# Operands of the Network Operator v26.4.1 NicClusterPolicy (its release manifest): one repository, and every operand
# but the DOCA driver tagged with the operator's release, so bumping NETWORK_OPERATOR moves them with it.
NIC_OPERANDS_RELEASE = f"network-operator-v{NETWORK_OPERATOR.version}"


def _nic_operand(image: str, version: str = NIC_OPERANDS_RELEASE) -> Image:
    return Image("nvcr.io/nvidia/mellanox", image, version)


NIC_OFED_DRIVER = _nic_operand("doca-driver", "doca3.4.1-26.04-1.1.0.0-1")

NODE_OS_TAGS = {
    f"{GPU_DRIVER.repository}/{GPU_DRIVER.image}": "{tag}-{os}",
    f"{NIC_OFED_DRIVER.repository}/{NIC_OFED_DRIVER.image}": "{tag}-{os}-{arch}",
}
"""Operands whose operator pulls the configured tag with the node's OS (and architecture) appended: the GPU Operator's
driver (`580.105.08-ubuntu24.04`, resolveDriverTag) and the Network Operator's DOCA driver (`<tag>-ubuntu24.04-amd64`).
Only those tags exist upstream, so `fabctl mirror` copies them for the nodes' OS (`--node-os`)."""
NIC_RDMA_SHARED_DP = _nic_operand("k8s-rdma-shared-dev-plugin")
NIC_NV_IPAM = _nic_operand("nvidia-k8s-ipam")
NIC_CNI_PLUGINS = _nic_operand("plugins")
NIC_MULTUS = _nic_operand("multus-cni")
NIC_IPOIB = _nic_operand("ipoib-cni")

KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"
"""Runs the scheduled profile switches (components/profiles.py): the Kubernetes project's kubectl image of the targeted
minor, which carries bash and coreutils for the switch's record."""
VLLM_IMAGE = "vllm/vllm-openai:v0.31.0"
WEIGHTS_SYNC_IMAGE = "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z"
"""Copies weights from the models bucket to the node's NVMe cache before vLLM starts."""

NV_IPAM_API = "nv-ipam.nvidia.com/v1alpha1"
NFD_API = "nfd.k8s-sigs.io/v1alpha1"
"""node-feature-discovery v0.18.2, bundled by the GPU Operator chart (its NodeFeatureRule CRD comes with it)."""
MELLANOX_API = "mellanox.com/v1alpha1"
NVIDIA_API = "nvidia.com/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
ENVOY_GATEWAY_API = "gateway.envoyproxy.io/v1alpha1"
INFERENCE_EXTENSION_VERSION = "v1.5.0"
"""Gateway API Inference Extension, for `inference.routing: inference-extension` (components/routing.py). v1.5.0, not
the design's 1.6.0: v1.5.0 is the last release with the endpoint picker and its inferencepool chart (v1.6.0 moved the EPP
to llm-d/llm-d-router); its InferencePool is inference.networking.k8s.io/v1, the API the v1.6.0 CRD serves too."""
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
INFERENCE_EXTENSION_CRDS = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/"
    f"{INFERENCE_EXTENSION_VERSION}/manifests.yaml"
)
"""The release's CRD manifest (InferencePool, InferenceObjective, InferenceModelRewrite), which the upstream guide applies;
no chart installs it (the inferencepool chart does not)."""
EPP_IMAGE = f"registry.k8s.io/gateway-api-inference-extension/epp:{INFERENCE_EXTENSION_VERSION}"
"""The endpoint picker, the image (and tag) the v1.5.0 inferencepool chart runs."""

KUEUE = HelmChart(chart="kueue", version="0.19.2", repo="oci://registry.k8s.io/kueue/charts")
KUEUE_API = "kueue.x-k8s.io/v1beta2"

KUBEFLOW_TRAINER = HelmChart(chart="kubeflow-trainer", version="2.3.0", repo="oci://ghcr.io/kubeflow/charts")
"""Kubeflow Trainer v2.3.0 (TrainJob, ClusterTrainingRuntime) with the JobSet 0.12.0 it bundles as a subchart (the JobSet
controller TrainJobs run on); its optional LeaderWorkerSet (data cache) is left off. Its CRDs are chart templates."""
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TORCH_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
"""The default image of the platform's PyTorch runtime (a TrainJob's `trainer.image` replaces it with the team's)."""
CHECKPOINT_UPLOAD_IMAGE = "amazon/aws-cli:2.27.0"
"""Uploads checkpoints from the NVMe cache to AIStor (`aws s3 sync`, which reads the `s3-training` keys as they are named)."""

SPARK_OPERATOR = HelmChart(chart="spark-operator", version="2.5.2", repo="https://kubeflow.github.io/spark-operator")
SPARK_OPERATOR_API = "sparkoperator.k8s.io/v1beta2"
YUNIKORN = HelmChart(chart="yunikorn", version="1.8.0", repo="https://apache.github.io/yunikorn-release")
"""1.8.0 is the release that supports Kubernetes 1.33 and 1.34."""
YUNIKORN_PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.7"
"""The image of YuniKorn's gang-scheduling placeholder pods, which the scheduler starts at run time: yunikorn-k8shim v1.8.0's
default (pkg/common/constants PlaceholderContainerImage), set explicitly (`service.placeholderImage`) on a site with a
registry."""
SPARK_VERSION = "3.5.7"
"""The Spark of the platform's own Spark pods (the Connect server) and of the Spark RAPIDS template: the newest 3.5, the
line the RAPIDS Accelerator's Scala 2.12 build supports."""
SPARK_IMAGE = f"apache/spark:{SPARK_VERSION}-scala2.12-java17-python3-ubuntu"
SPARK_PACKAGES = (
    f"org.apache.spark:spark-connect_2.12:{SPARK_VERSION}",
    "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0",
    "org.apache.iceberg:iceberg-aws-bundle:1.10.0",
)
"""Jars the Spark Connect server resolves at start (`spark.jars.packages`): Connect and Iceberg with its S3 client are
not in the Spark image."""
SPARK_RAPIDS = "com.nvidia:rapids-4-spark_2.12:26.04.2"
"""The RAPIDS Accelerator for Apache Spark (its Maven coordinate: one jar with cuDF and a shim per Spark release, 3.5.0
to 3.5.7 among them; the release on its download page)."""
AIRFLOW = HelmChart(chart="airflow", version="1.22.0", repo="https://airflow.apache.org", timeout_sec=1800)
"""Its database migration runs before the scheduler and API server become ready (a Job, not a hook: see compute.py)."""
TRINO = HelmChart(chart="trino", version="1.42.2", repo="https://trinodb.github.io/charts/", timeout_sec=900)
STARROCKS_OPERATOR = HelmChart(chart="operator", version="1.11.5", repo="https://starrocks.github.io/starrocks-kubernetes-operator")
SUPERSET = HelmChart(chart="superset", version="0.22.4", repo="https://apache.github.io/superset", timeout_sec=1200)
"""Its init hook (database migrations) runs after the web pods are ready, within the same timeout."""
JUPYTERHUB = HelmChart(chart="jupyterhub", version="4.4.0", repo="https://hub.jupyter.org/helm-chart/", timeout_sec=900)
ARGO_CD = HelmChart(chart="argo-cd", version="10.1.1", repo="https://argoproj.github.io/argo-helm")
"""Argo CD on compute, applying the serving manifests from Git (components/engines/argocd.py). Chart 10.1.1 ships Argo CD
v3.4.4, not the design's target 3.5.1: it is the chart the project has a package of (../shared/charts), and the CRDs the
custom resources are validated against (../shared/crds/argo-cd) are v3.5.1's. The chart installs its own (v3.4.4) CRDs;
the program's Application and AppProject validate against both (tests/components/test_argocd.py). Move to the chart
that ships 3.5.1 once it is mirrored."""
ARGOCD_API = "argoproj.io/v1alpha1"

STARROCKS_FE_IMAGE = "starrocks/fe-ubuntu:4.1.1"
STARROCKS_CN_IMAGE = "starrocks/cn-ubuntu:4.1.1"
MYSQL_CLIENT_IMAGE = "mysql:8.4.6"
"""Runs the StarRocks setup SQL (storage volume, Polaris catalog, root password) with the mysql client."""
STARROCKS_API = "starrocks.com/v1"

# Images of the acceptance jobs (`fabctl verify`, fabctl/verify/criteria/): none of them is deployed by Pulumi.
VERIFY_PROBE_IMAGE = SETUP_IMAGE
"""Runs the acceptance probes (fabctl/verify/probe.py: TCP, S3, the gateway, Prometheus), standard library only."""
VERIFY_GPU_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
"""Runs `nvidia-smi -L` on each GPU node (the container toolkit mounts nvidia-smi into it)."""
VERIFY_NCCL_IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"
"""nccl-tests built with MPI (HPC-X Open MPI), `/opt/nccl-tests/build/all_reduce_perf`, sshd for the MPI
launcher; CoreWeave's public build (coreweave/nccl-tests Dockerfile.ubuntu22 at 0708d2e: nccl-tests 2cbb968, v2.13.6-1,
whose table the NCCL check parses; Ubuntu 22.04's OpenSSH 8.9p1, which takes the run's ed25519 key pair), run by
phase 01's NCCL check as a launcher Job and an Indexed Job of workers (fabctl/verify/criteria/phase_01_nccl.py)."""
VERIFY_WARP_IMAGE = "quay.io/minio/aistor/warp:v1.8.2"
"""MinIO warp, the storage load beside the NCCL run."""

KUBE_PROMETHEUS_STACK = HelmChart(
    chart="kube-prometheus-stack", version="88.5.3", repo="https://prometheus-community.github.io/helm-charts", timeout_sec=900,
)
"""Prometheus operator v0.93.1, Prometheus, Alertmanager, node-exporter, kube-state-metrics and the Grafana subchart 12.11.1,
one release per cluster (components/observability.py). Its CRDs come with the chart (Helm installs them first)."""
PROMETHEUS_OPERATOR_API = "monitoring.coreos.com/v1"
"""ServiceMonitor, PodMonitor and PrometheusRule of the Prometheus operator v0.93.1 (the chart above)."""

KUBERAY = HelmChart(chart="kuberay-operator", version="1.7.0", repo="https://ray-project.github.io/kuberay-helm/")
"""The KubeRay operator (RayCluster, RayJob); the chart installs the CRDs (../shared/crds/kuberay)."""
RAY_API = "ray.io/v1"
RAY_IMAGE = "rayproject/ray:2.52.0-py312-gpu"
"""The image of the teams' Ray cluster template: Ray 2.52 is the first with token authentication (RAY_AUTH_MODE=token)."""

CHARTS: tuple[HelmChart, ...] = tuple(value for value in list(globals().values()) if isinstance(value, HelmChart))
"""Every pinned chart, with its upstream repository (what `fabctl mirror` copies into a site registry)."""


def upstream_chart(name: str, version: str) -> HelmChart | None:
    """The pinned chart of this name and version, with its upstream repository, if the program pins it."""
    return next((chart for chart in CHARTS if (chart.chart, chart.version) == (name, version)), None)
