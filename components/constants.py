"""Contracts between components: namespaces, ports and Secret keys that more than one module names.

Each value is written here once and imported; a component that owns the object and another that reaches
it (a kubeconfig delivered into Airflow's namespace, a route to the gateway's namespace) read the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pulumi
    import pulumi_kubernetes as k8s

AIRFLOW_NAMESPACE = "airflow"
"""Airflow's namespace on compute: ComputeCluster creates it, TrainingPool delivers the GPU kubeconfigs into it."""
CNPG_NAMESPACE = "cnpg-system"
"""Where the CloudNativePG operator runs, on every cluster that has Postgres databases."""
KUEUE_NAMESPACE = "kueue-system"
"""Kueue's namespace on GPU clusters and on the MultiKueue manager."""
GPU_OPERATOR_NAMESPACE = "gpu-operator"
"""The NVIDIA GPU Operator's namespace on every GPU cluster, Pod Security privileged (drivers, device plugins, DCGM)."""
NETWORK_OPERATOR_NAMESPACE = "nvidia-network-operator"
"""The NVIDIA Network Operator's namespace on every GPU cluster, Pod Security privileged (NIC drivers, RDMA plugins)."""
ARGOCD_NAMESPACE = "argocd"
"""Argo CD's namespace on compute (the engine's), whose application controller reaches the serving clusters' API servers."""
GATEWAY_NAMESPACE = "envoy-gateway-system"
"""Envoy Gateway's namespace, which also holds every Gateway's Envoy proxies and their Services."""
MONITORING_NAMESPACE = "monitoring"
"""The metrics stack's namespace on every cluster (Prometheus, its operator, Alertmanager, kube-state-metrics, Grafana on
compute); ServiceMonitors, PodMonitors and PrometheusRules may live anywhere, dashboard ConfigMaps live here."""
NODE_EXPORTER_NAMESPACE = "node-exporter"
"""node-exporter's namespace on every cluster: Pod Security privileged, and on every cluster's host-access allow-list,
since it reads the node's network, processes and filesystems (host network, host PID, the root filesystem)."""

HTTPS_PORT = 443
"""The port users and compute applications call on every gateway."""
ENVOY_HTTPS_TARGET_PORT = 10443
"""Envoy Gateway maps a listener port below 1024 to port + 10000 on its proxy pods; flows admit this one."""
KUBE_APISERVER_PORT = 6443
PROMETHEUS_PORT = 9090
"""Prometheus's HTTP port: queries, and the remote-write receiver of compute's Prometheus (the flow `metrics`)."""
APP_LABEL = "app.kubernetes.io/name"
VLLM_APP = "vllm"
"""vLLM pods' APP_LABEL (components/serving.py); the metrics stack's PodMonitor selects it."""
MODEL_LABEL = "fab.internal/model"
"""On a stable vLLM pod: its model's config key (the metrics label `model`)."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The GPU Operator's extended resource: what pods request, Kueue quotas count (label `resource` of its metrics)."""

HOSTNAME_ANNOTATION = "external-dns.alpha.kubernetes.io/hostname"
"""The DNS name a LoadBalancer Service is reached by (external-dns publishes it where it runs); the policy pack reads
it on the Polaris endpoint to know which catalog URIs reach Polaris."""

ENVOY_PROXY_LABELS = {"app.kubernetes.io/name": "envoy"}
"""Labels Envoy Gateway puts on every proxy pod, which flows to a gateway select."""
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}
"""Labels the Prometheus operator puts on every Prometheus pod, which the flow `metrics` admits and selects."""
GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")
"""Label (key, value) of a ConfigMap whose dashboards Grafana's sidecar loads, in the monitoring namespace on compute."""
KUEUE_CONTROLLER_LABELS = {"control-plane": "controller-manager"}
"""Labels of Kueue's controller pods (the chart's), the MultiKueue manager's client of the workers' API servers."""
ARGOCD_CONTROLLER_LABELS = {"app.kubernetes.io/name": "argocd-application-controller"}
"""Labels of Argo CD's application controller pods (the chart's), its client of the serving clusters' API servers."""

ENGINE_LABEL = "fab.internal/engine"
"""On a credential Secret StorageCluster delivers (`s3-<engine>`, `polaris-<engine>`): whose it is. On a namespace, or on an
object that reads such a Secret: the engine whose workloads run there, which may read its own credential Secrets only."""
TRAINING = "training"
"""The grantee of a team's own Secrets, `s3-training` and `polaris-training` (its MinIO user and Polaris principal,
components/data_access.py), in each namespace that runs as the team: its training namespaces, its Spark Connect's."""
TEAM_LABEL = "fab.internal/team"
"""On a team's namespaces, and on the training credential Secrets delivered into them: the team they belong to."""

# Keys of the Secrets StorageCluster delivers (s3-<engine>, polaris-<engine>); engines read them as environment.
S3_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
S3_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
S3_ENDPOINT = "AWS_ENDPOINT_URL_S3"
S3_REGION = "AWS_REGION"
POLARIS_CLIENT_ID = "POLARIS_CLIENT_ID"
POLARIS_CLIENT_SECRET = "POLARIS_CLIENT_SECRET"
POLARIS_CREDENTIAL = "POLARIS_CREDENTIAL"
"""`<client id>:<client secret>` in one value: Iceberg's REST catalog resolves a whole option `env:NAME` only
(EnvironmentUtil.resolveAll), so Spark's `credential` names this one variable."""
POLARIS_URI = "POLARIS_URI"
POLARIS_WAREHOUSE = "POLARIS_WAREHOUSE"
POLARIS_SCOPE = "POLARIS_SCOPE"
# Keys only a training team's `s3-training` holds: the prefixes of the checkpoint and model buckets it may write.
TRAINING_CHECKPOINT_URI = "CHECKPOINT_URI"
TRAINING_MODEL_URI = "MODEL_URI"
# Keys of each UI's OIDC client Secret (<ui>-oidc).
OIDC_CLIENT_ID = "OIDC_CLIENT_ID"
OIDC_CLIENT_SECRET = "OIDC_CLIENT_SECRET"
OIDC_ISSUER = "OIDC_ISSUER"


def submitter_connection_id(cluster: str) -> str:
    """The Airflow connection of a GPU cluster's submitter: Airflow reads `AIRFLOW_CONN_<ID upper-cased>`, so the id has
    no '-' (`gpu_gpu_train` for the cluster gpu-train)."""
    return f"gpu_{cluster.replace('-', '_')}"


IN_CLUSTER_CONNECTION = "kubernetes_default"
"""The Airflow connection of the cluster Airflow runs on: the provider's default, which uses the pod's ServiceAccount."""
TRAINING_SUBMISSION_CONFIG_MAP = "training-submission"
"""The ConfigMap in Airflow's namespace with the training-submission contract (key `submission.json`): TrainingPool writes
it, Airflow mounts it at `TRAINING_SUBMISSION_DIR`, the serving-loop DAG reads it."""
TRAINING_SUBMISSION_DIR = "/opt/airflow/platform/training"


def s3_secret(principal: str) -> str:
    """The Secret StorageCluster delivers with a principal's S3 keys and the internal endpoint."""
    return f"s3-{principal}"


def polaris_secret(principal: str) -> str:
    """The Secret StorageCluster delivers with a principal's Polaris client and the catalog."""
    return f"polaris-{principal}"


def credentials(engine: str = "spark") -> list[dict[str, Any]]:
    """The engine's S3 keys and Polaris principal as the environment the references of Spark's `sparkConf` read
    (components/engines/spark.py `spark_conf`; Secret references only)."""
    return [{"secretRef": {"name": s3_secret(engine)}}, {"secretRef": {"name": polaris_secret(engine)}}]


CATALOG_CONF = "spark.sql.catalog.fab"
"""The prefix of the Polaris catalog's Spark settings."""

TRAINING_POOL_TYPE = "fab:training:TrainingPool"
"""TrainingPool's type token: the Airflow namespace's alias names its first parent by it."""

AISTOR_METRICS_TOKEN_SECRET = "aistor-metrics-token"
"""Secret in the object store's namespace whose key `token` is the bearer token (JWT) AIStor's metrics accept: written by
the storage component for its metrics principal, presented by the PodMonitor `aistor` (components/monitors.py). AIStor
refuses unauthenticated scrapes by default, which stays so."""
AISTOR_METRICS_TOKEN_KEY = "token"

GPU_NOTEBOOKS = "gpu-notebooks"
"""GPU notebooks' name everywhere: the hub's namespace and release on the GPU cluster, its route's namespace on compute, its
UI host (`gpu-notebooks.<domain>`), its Keycloak client and its flow."""
NOTEBOOKS_PROXY_LABELS = {"app.kubernetes.io/name": "jupyterhub", "app.kubernetes.io/component": "proxy"}
"""The labels of the JupyterHub chart's proxy pods (chart 4.4.0), which the compute ingress reaches."""
NOTEBOOKS_PROXY_PORT = 80
"""Port of the notebooks hub's proxy Service (proxy-public, http)."""
NOTEBOOKS_PROXY_TARGET_PORT = 8000
"""Port configurable-http-proxy listens on in its pods (the chart's `http` container port)."""
RAY_TOKEN_KEY = "auth_token"
"""The key of a team's Ray token in its Secrets: KubeRay's `authOptions.secretName` reads this key (components/ray.py),
and Jupyter servers find the token in a file of this name (components/engines/jupyterhub.py)."""

GLOBAL_SERVICE_ANNOTATION = "service.cilium.io/global"
"""Cilium ClusterMesh: a Service of this name and namespace in every cluster that carries `"true"` is one global service,
load-balanced across the backends of every cluster that shares them (Cilium docs, "Load-balancing with Global Services")."""
SHARED_SERVICE_ANNOTATION = "service.cilium.io/shared"
"""`"false"`: the cluster's own backends of a global service are not offered to the other clusters (consumers set it)."""
AFFINITY_SERVICE_ANNOTATION = "service.cilium.io/affinity"
"""`"local"`: the cluster's load balancer prefers its own healthy backends of a global service, remote ones only when none
is (Cilium docs, "Service Affinity")."""
POLARIS_SERVICE = "polaris-rest"
"""Polaris's REST endpoint Service in Polaris's namespace: the LoadBalancer at its VIP on storage and, with global services,
a ClusterMesh global service whose namespace and name every client cluster repeats (`polaris-rest.<namespace>.svc`)."""
POLARIS_PORT_NAME = "rest"
"""The name of that Service's port, the same on every cluster: Cilium pairs a global service's backends by port name."""
INFERENCE_GATEWAY_SERVICE = "inference-gateway"
"""With global services, the ClusterIP Service selecting the inference gateway's Envoy pods in GATEWAY_NAMESPACE on the
serving cluster (beside Envoy Gateway's own LoadBalancer Service) and the same-named consumer Service on compute."""
ENVOY_HTTPS_PORT_NAME = f"https-{HTTPS_PORT}"
"""How Envoy Gateway names the Service port of an HTTPS listener (`<protocol>-<port>`)."""

MAINTENANCE_PRINCIPAL = "iceberg-maintenance"
"""The Iceberg maintenance principal (compute.iceberg_maintenance): the Polaris principal and MinIO user
`fab-iceberg-maintenance`, delivered into MAINTENANCE_NAMESPACE as `s3-iceberg-maintenance` and `polaris-iceberg-maintenance`."""
MAINTENANCE_NAMESPACE = "iceberg-maintenance"
"""Where the maintenance SparkApplications run and its Secrets are, apart from Spark's namespace: no other Spark job (nor
its driver, which may create pods in its namespace) can mount them."""

SITE_CA_SECRET = "fab-site-ca"
"""The Secret holding the site's CA bundle (config `ca_bundle`) in each namespace whose pods call the site's endpoints
(`StorageCluster.site_ca`)."""
SITE_CA_KEY = "ca.crt"
SITE_CA_DIR = "/etc/fab/site-ca"
"""Where a pod that reads the site CA as a file mounts that Secret (OIDC clients: Grafana, JupyterHub)."""
SITE_CA_FILE = f"{SITE_CA_DIR}/{SITE_CA_KEY}"

MC_CA_DIR = "/work/.mc/certs/CAs"
"""Where the MinIO client (with MC_CONFIG_DIR=/work/.mc) looks for the CAs it trusts besides the system's."""


def site_ca_volumes(delivered: bool) -> list[dict[str, Any]]:
    """A pod's volume of the site CA bundle (the Secret `fab-site-ca`), where the site has one."""
    return [{"name": "site-ca", "secret": {"secretName": SITE_CA_SECRET}}] if delivered else []


def site_ca_mounts(delivered: bool, path: str) -> list[dict[str, Any]]:
    """A container's mount of the site CA bundle at `path`, where the site has one."""
    return [{"name": "site-ca", "mountPath": path, "readOnly": True}] if delivered else []


@dataclass(frozen=True)
class SiteCa:
    """The site CA bundle delivered to one namespace (as the Secret `fab-site-ca`), or nothing without a bundle."""

    secret: k8s.core.v1.Secret | None

    def volumes(self) -> list[dict[str, Any]]:
        return site_ca_volumes(self.secret is not None)

    def mounts(self, path: str) -> list[dict[str, Any]]:
        return site_ca_mounts(self.secret is not None, path)

    def resources(self) -> list[pulumi.Resource]:
        return [self.secret] if self.secret else []
