"""Spark Connect on compute: notebooks' heavy queries run on Spark (DESIGN section 1, "engineer ad-hoc exploration:
JupyterLab, Trino / Spark Connect"), while `compute.spark.connect` is on.

One server per team, in the team's namespace `spark-team-<team>`: a long-running Spark driver with the Connect endpoint
(`start-connect-server.sh`, in the foreground), on the interactive pool and in YuniKorn's interactive queue: a notebook waits
on it, and every session of the team lives in it. The executors it starts (dynamic allocation, from none), the heavy part
of a query, run in the pool `compute.spark.connect_executors_pool` names, by default batch (the batch pool, its
PriorityClass and YuniKorn's batch queue), as the design delegates notebooks' heavy queries (their pod template, labelled
with its pool, is what the policy pack checks). It and its executors read the catalog and S3 as the team's own
principal (`s3-training`, `polaris-training`: the team's MinIO user and Polaris principal), never the Spark engine's:
a query, or a UDF reading its executor's environment, gets what a member of the team may have anyway.

Spark 3.5's Connect server authenticates nobody (no token check ships; `spark.connect.grpc.interceptor.classes` takes
only custom interceptors, and PySpark sends a `token` as a Bearer header over TLS only, which the server does not
serve): who reaches it is the network's to decide. A Cilium deny rule turns away every pod of the cluster but the
JupyterHub user servers of the team's members (marked `fab.internal/member-of-<team>` by the hub, from the user's
Keycloak groups: components/engines/jupyterhub.py) and the server's own executors (the site's default-deny already
refuses other clusters and outside). A Deployment rather than the operator's SparkConnect resource: that kind is
v1alpha1 and not among the CRDs the program validates against.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.config import names
from components.constants import ENGINE_LABEL, TEAM_LABEL, TRAINING, polaris_secret, s3_secret
from components.engines import _spark_packages as packages
from components.engines import _spark_trust as jvm_trust
from components.engines._spark_trust import SparkTrust
from components.engines._base import BATCH, INTERACTIVE, POOL_LABEL, POOLS, EngineScope, Pool
from components.kube import WORKLOAD_SKIPS, checkov_skips, restricted_container, restricted_pod_security_context
from components.providers import NamespaceRef
from components.registry import UPSTREAM, Registry

NAME = "spark-connect"
PORT = 15002
"""Spark Connect's gRPC port (Spark's default `spark.connect.grpc.binding.port`)."""
CREDENTIALS = TRAINING
"""Whose Secrets the server and its executors read in the team's namespace: the team's own (`s3-training`,
`polaris-training`), delivered by `StorageCluster.training_grants`."""


def namespace_of(team: str) -> str:
    """A team's Spark Connect namespace: interactive (the Spark engine's is batch: the server's pool; the executors' is
    their template's), labelled as the team's, whose credentials it reads."""
    return names.SPARK_CONNECT_NAMESPACE(team)


def url(team: str) -> str:
    """What a member's notebook connects to: JupyterHub sets it as SPARK_REMOTE in the servers of the team's members."""
    return f"sc://{NAME}.{namespace_of(team)}.svc.cluster.local:{PORT}"


REMOTE_ENV = "SPARK_REMOTE"
"""The variable PySpark's `SparkSession.builder.getOrCreate()` takes the Connect URL from."""
QUEUE = "root.interactive"
"""The server's YuniKorn queue."""
QUEUE_ANNOTATION = "yunikorn.apache.org/queue"


def queue(pool: Pool) -> str:
    """The YuniKorn queue of a pool's Spark pods (spark.py `yunikorn_queues`: `root.batch`, `root.interactive`)."""
    return f"root.{pool.name}"


def executors_pool(spark: Any) -> Pool:
    """The pool of the executors of the `compute.spark` section `spark` (`connect_executors_pool`)."""
    return {pool.name: pool for pool in POOLS}[spark.connect_executors_pool]


EXECUTOR_LABEL = "fab.internal/spark-connect"
"""Marks the server's own executors, the only other pods of its namespace that may reach it (its driver and block
manager ports)."""
TEMPLATE_CONFIG_MAP = "spark-connect-executor"
SPARK_USER = 10185
"""A high uid (the image's own is 185). It has no passwd entry, so Spark and Hadoop take the user name from
SPARK_USER and HADOOP_USER_NAME (`USER_ENV`)."""
USER_ENV = [{"name": "SPARK_USER", "value": "spark"}, {"name": "HADOOP_USER_NAME", "value": "spark"}]
DRIVER_PORT, BLOCK_MANAGER_PORT = 7078, 7079
JUPYTER_NAMESPACE = "jupyterhub"
"""JupyterHub's namespace (engines/jupyterhub.py ENGINE.namespace)."""
SINGLE_USER_LABEL = ("component", "singleuser-server")
"""The label z2jh's KubeSpawner gives every single-user server pod."""
SCRATCH = {"/tmp": "tmp", "/opt/spark/work-dir": "work"}
"""Writable emptyDirs of the Spark containers (read-only root filesystems): ivy cache, logs, fetched files."""
DRIVER_RESOURCES = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
EXECUTOR_CORES, EXECUTOR_MEMORY = 4, "16g"
EXECUTOR_MEMORY_WITH_OVERHEAD_GIB = 18
"""An executor's memory request: its heap and Spark's overhead (10 %, at least 384 MiB), rounded up."""


def _scratch() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes = [{"name": name, "emptyDir": {}} for name in SCRATCH.values()]
    mounts = [{"name": name, "mountPath": path} for path, name in SCRATCH.items()]
    return volumes, mounts


def _credentials() -> list[dict[str, Any]]:
    return [{"secretRef": {"name": s3_secret(CREDENTIALS)}}, {"secretRef": {"name": polaris_secret(CREDENTIALS)}}]


def executor_template(registry: Registry = UPSTREAM, trust: SparkTrust = jvm_trust.NONE, pool: Pool = BATCH) -> dict[str, Any]:
    """The executors' pod template: `pool`'s node selector, tolerations, PriorityClass and YuniKorn queue, restricted, the team's credentials, the Spark image
    from `registry` (and its pull Secret), with `trust` the site's CA in the JVM (engines/_spark_trust.py)."""
    volumes, mounts = _scratch()
    volumes, mounts = [*volumes, *jvm_trust.volumes(trust)], [*mounts, *jvm_trust.volume_mounts(trust)]
    env = [*USER_ENV, *(jvm_trust.java_env(trust, registry) if trust.needed else [])]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # The queue is the executors' own: they carry `spark-app-selector` (the Spark application's id), so YuniKorn
        # schedules them as an application of their own, apart from the server's pod.
        "metadata": {"labels": {EXECUTOR_LABEL: "executor"}, "annotations": {QUEUE_ANNOTATION: queue(pool)}},
        "spec": {
            # Only here: Spark adds `spark.kubernetes.{,executor.}node.selector.*` to the template's node selector, and
            # neither `server_conf` nor spark-defaults sets one; tolerations and PriorityClass have no Spark setting.
            **pool.placement(),
            "securityContext": restricted_pod_security_context(runAsUser=SPARK_USER, fsGroup=SPARK_USER),
            # Spark sets the container's requests and limits (spark.executor.cores, .memory, .limit.cores).
            "containers": [restricted_container("spark-executor", registry.image(versions.SPARK_IMAGE), SPARK_USER, env=env,
                                                envFrom=_credentials(), volumeMounts=mounts, resources={})],
            "volumes": volumes,
            **registry.pod_fields(),
        },
    }


def server_conf(max_executors: int, namespace_: str, registry: Registry = UPSTREAM) -> dict[str, str]:
    """The server's Spark configuration beyond `spark-defaults`: Kubernetes executors in its namespace `namespace_` and the
    scheduler, the Spark image and the packages from `registry` (the executors' pool and queue are their pod template's)."""
    return {
        "spark.master": "k8s://https://kubernetes.default.svc:443",
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": namespace_,
        "spark.kubernetes.container.image": registry.image(versions.SPARK_IMAGE),
        "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
        "spark.driver.host": "$(POD_IP)",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.connect.grpc.binding.port": str(PORT),
        "spark.jars.packages": ",".join(versions.SPARK_PACKAGES),
        "spark.jars.ivy": "/tmp/ivy",
        "spark.kubernetes.scheduler.name": "yunikorn",
        "spark.kubernetes.executor.podTemplateFile": "/etc/spark-templates/executor.yaml",
        "spark.kubernetes.executor.podTemplateContainerName": "spark-executor",
        "spark.executor.cores": str(EXECUTOR_CORES),
        "spark.executor.memory": EXECUTOR_MEMORY,
        # Spark sets the memory limit to the request; the CPU limit only when asked.
        "spark.kubernetes.executor.limit.cores": str(EXECUTOR_CORES),
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "0",
        "spark.dynamicAllocation.maxExecutors": str(max_executors),
        **packages.spark_conf(registry),
    }


def server_container(max_executors: int, namespace_: str, registry: Registry = UPSTREAM,
                     trust: SparkTrust = jvm_trust.NONE) -> dict[str, Any]:
    _, mounts = _scratch()
    conf = [arg for key, value in server_conf(max_executors, namespace_, registry).items() for arg in ("--conf", f"{key}={value}")]
    return restricted_container(
        "spark-connect", registry.image(versions.SPARK_IMAGE), SPARK_USER,
        command=["/opt/spark/sbin/start-connect-server.sh"],
        args=conf,
        env=[
            # In the foreground (spark-daemon.sh), its pid and log files on the scratch volume.
            {"name": "SPARK_NO_DAEMONIZE", "value": "true"},
            {"name": "SPARK_LOG_DIR", "value": "/tmp/logs"},
            {"name": "SPARK_PID_DIR", "value": "/tmp"},
            {"name": "SPARK_CONF_DIR", "value": "/etc/spark"},
            {"name": "HOME", "value": "/tmp"},
            *USER_ENV,
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *jvm_trust.java_env(trust, registry),
        ],
        envFrom=_credentials(),
        ports=[{"name": "connect", "containerPort": PORT}, {"name": "driver", "containerPort": DRIVER_PORT},
               {"name": "blocks", "containerPort": BLOCK_MANAGER_PORT}],
        # Up to ten minutes to start: the jars are resolved first.
        startupProbe={"tcpSocket": {"port": PORT}, "periodSeconds": 10, "failureThreshold": 60},
        readinessProbe={"tcpSocket": {"port": PORT}, "periodSeconds": 10},
        livenessProbe={"tcpSocket": {"port": PORT}, "periodSeconds": 20, "failureThreshold": 3},
        resources=DRIVER_RESOURCES,
        volumeMounts=[*mounts, {"name": "conf", "mountPath": "/etc/spark", "readOnly": True},
                      {"name": "templates", "mountPath": "/etc/spark-templates", "readOnly": True},
                      *packages.volume_mounts(registry), *jvm_trust.volume_mounts(trust)],
    )


def ingress_deny_policy(team: str) -> dict[str, Any]:
    """Every pod of the cluster but the JupyterHub user servers of `team`'s members and the server's own executors is
    refused: a pod of another namespace, a pod of JupyterHub's that is no user server or whose user is not in the team
    (no `fab.internal/member-of-<team>`), a pod of its namespace that is not one of its executors."""
    ns_key, own = "k8s:io.kubernetes.pod.namespace", namespace_of(team)
    label_key, label_value = SINGLE_USER_LABEL
    member = f"k8s:{names.team_member_label(team)}"
    return {
        "description": f"Spark Connect of team {team}: only the JupyterHub servers of its members (and the server's own "
                       "executors) reach it.",
        "endpointSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
        "ingressDeny": [
            {"fromEndpoints": [{"matchExpressions": [
                {"key": ns_key, "operator": "Exists"},
                {"key": ns_key, "operator": "NotIn", "values": [JUPYTER_NAMESPACE, own]},
            ]}]},
            {"fromEndpoints": [{"matchLabels": {ns_key: JUPYTER_NAMESPACE},
                                "matchExpressions": [{"key": f"k8s:{label_key}", "operator": "NotIn", "values": [label_value]}]}]},
            {"fromEndpoints": [{"matchLabels": {ns_key: JUPYTER_NAMESPACE},
                                "matchExpressions": [{"key": member, "operator": "NotIn", "values": [names.TEAM_MEMBER]}]}]},
            {"fromEndpoints": [{"matchLabels": {ns_key: own},
                                "matchExpressions": [{"key": f"k8s:{EXECUTOR_LABEL}", "operator": "NotIn", "values": ["executor"]}]}]},
        ],
    }


def namespace(scope: EngineScope, spark: Any, team: str) -> k8s.core.v1.Namespace:
    """The team's namespace, in the interactive pool and labelled as the team's (whose credentials it holds), with a quota
    for the server and `spark.connect_max_executors` executors (and zero GPUs, as every compute namespace)."""
    name = namespace_of(team)
    ns = scope.plain_namespace(name, labels={ENGINE_LABEL: CREDENTIALS, TEAM_LABEL: names.TEAM_LABEL(team),
                                             POOL_LABEL: INTERACTIVE.name})
    cpu = int(DRIVER_RESOURCES["requests"]["cpu"]) + EXECUTOR_CORES * spark.connect_max_executors
    memory_gib = 8 + EXECUTOR_MEMORY_WITH_OVERHEAD_GIB * spark.connect_max_executors
    k8s.core.v1.ResourceQuota(
        f"{scope.prefix}-quota-{name}",
        metadata={"name": "compute", "namespace": name},
        spec={"hard": {"requests.cpu": str(cpu), "requests.memory": f"{memory_gib}Gi", "requests.nvidia.com/gpu": "0"}},
        # the namespace must exist before anything is created in it
        opts=scope.after(ns),
    )
    return ns


DRIVER_RULES = [{
    "apiGroups": [""], "resources": ["pods", "configmaps", "persistentvolumeclaims", "services"],
    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
}]
"""What the server, a Spark driver, does in its namespace: start, watch and remove its executors and what they mount (the
rules the Spark operator chart gives its drivers' ServiceAccount)."""


def _service_account(scope: EngineScope, prefix: str, namespace_: str, ns: pulumi.Resource) -> pulumi.Resource:
    """The server's own ServiceAccount, with DRIVER_RULES in its namespace only."""
    meta = {"name": NAME, "namespace": namespace_}
    # the namespace must exist before the account and the Role are created in it
    account = k8s.core.v1.ServiceAccount(f"{prefix}-sa", metadata=meta, opts=scope.after(ns))
    role = k8s.rbac.v1.Role(f"{prefix}-role", metadata=meta, rules=DRIVER_RULES, opts=scope.after(ns))
    return k8s.rbac.v1.RoleBinding(
        f"{prefix}-binding", metadata=meta,
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": namespace_}],
        # the Role first: binding a Role the API server cannot resolve takes the `bind` verb
        opts=scope.after(account, role),
    )


def site_trust(scope: EngineScope) -> SparkTrust:
    """What Spark's JVMs on this cluster trust beyond the registry (engines/_spark_trust.py)."""
    return SparkTrust(scope.storage.s3_ca_pem)


def trust_config_map(scope: EngineScope, namespace_: str, ns: pulumi.Resource) -> k8s.core.v1.ConfigMap:
    """The ConfigMap `spark-trust` (engines/_spark_trust.py) in `namespace_`, while the site's CA issued S3's certificate."""
    binary = jvm_trust.config_map_binary(site_trust(scope), scope.cluster.registry)
    return k8s.core.v1.ConfigMap(f"{scope.prefix}-{jvm_trust.CONFIG_MAP}-{namespace_}",
                                 metadata={"name": jvm_trust.CONFIG_MAP, "namespace": namespace_},
                                 # the namespace must exist before anything is created in it
                                 binary_data=binary, opts=scope.after(ns))


def packages_config_map(scope: EngineScope, namespace_: str, ns: pulumi.Resource) -> k8s.core.v1.ConfigMap:
    """The ConfigMap `spark-maven` (engines/_spark_packages.py) in `namespace_`, while the site has a Maven repository."""
    data, binary = packages.config_map_data(scope.cluster.registry)
    return k8s.core.v1.ConfigMap(f"{scope.prefix}-{packages.CONFIG_MAP}-{namespace_}",
                                 metadata={"name": packages.CONFIG_MAP, "namespace": namespace_},
                                 # the namespace must exist before anything is created in it
                                 data=data, binary_data=binary or None, opts=scope.after(ns))


def deploy(scope: EngineScope, spark: Any, team: str, ns: pulumi.Resource, operator: pulumi.Resource,
           scheduler: pulumi.Resource, defaults: pulumi.Input[str], defaults_config_map: str) -> None:
    """`team`'s Connect server (after the operator's chart, which makes the ServiceAccount its executors run as, and
    YuniKorn's, `scheduler`: it and its executors are scheduled by YuniKorn, it in the interactive queue, they in their
    pool's), running as its own
    ServiceAccount, with the team's credentials and Spark defaults, its Service and its ingress rule; `spark` is the
    `compute.spark` section."""
    labels = {"app.kubernetes.io/name": NAME}
    name, prefix = namespace_of(team), f"{scope.prefix}-{NAME}-{team}"
    access = _service_account(scope, prefix, name, ns)
    grants = scope.storage.training_grants(team, NamespaceRef(scope.cluster, name, ns))
    conf = k8s.core.v1.ConfigMap(f"{prefix}-defaults", metadata={"name": defaults_config_map, "namespace": name},
                                 # the namespace must exist before anything is created in it
                                 data={"spark-defaults.conf": defaults}, opts=scope.after(ns))
    registry = scope.cluster.registry
    pool = executors_pool(spark)
    template = k8s.core.v1.ConfigMap(
        # Labelled with the pool its pods run in, as a namespace is: the policy pack checks the template against it.
        f"{prefix}-executor", metadata={"name": TEMPLATE_CONFIG_MAP, "namespace": name, "labels": {POOL_LABEL: pool.name}},
        data={"executor.yaml": yamltext.dump(executor_template(registry, site_trust(scope), pool))},
        # the namespace must exist before anything is created in it
        opts=scope.after(ns),
    )
    maven = [packages_config_map(scope, name, ns)] if packages.resolves_from_site(registry) else []
    maven += [trust_config_map(scope, name, ns)] if site_trust(scope).needed else []
    volumes, _ = _scratch()
    k8s.apps.v1.Deployment(
        prefix,
        metadata={"name": NAME, "namespace": name, "labels": labels, "annotations": checkov_skips(*WORKLOAD_SKIPS, "CKV_K8S_38")},
        spec={
            # One driver: a session lives in it, so a second replica would split sessions across servers.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {QUEUE_ANNOTATION: QUEUE}},
                "spec": {
                    **INTERACTIVE.placement(),
                    "serviceAccountName": NAME,
                    # The driver starts and deletes its executors through the API server.
                    "automountServiceAccountToken": True,
                    "securityContext": restricted_pod_security_context(runAsUser=SPARK_USER, fsGroup=SPARK_USER),
                    "containers": [server_container(spark.connect_max_executors, name, registry, site_trust(scope))],
                    "volumes": [*volumes, {"name": "conf", "configMap": {"name": defaults_config_map}},
                                {"name": "templates", "configMap": {"name": TEMPLATE_CONFIG_MAP}}, *packages.volumes(registry),
                                *jvm_trust.volumes(site_trust(scope))],
                    **registry.pod_fields(),
                },
            },
        },
        # It runs as `access`'s account with its rights, mounts `conf`, `template` (and `spark-maven`) and reads the team's
        # keys (`grants`) when it starts.
        # YuniKorn schedules its pods and places them in their queue.
        # The operator's chart makes the ServiceAccount `spark` here (each team's Connect namespace is one of its job
        # namespaces), which the executors run as: neither the template nor `server_conf` names one, so Spark falls back
        # to the driver's account of spark-defaults (`spark.kubernetes.authenticate.driver.serviceAccountName`). Without
        # it, the API server refuses the executor pods of the first session.
        opts=scope.after(operator, scheduler, access, conf, template, *grants, *maven),
    )
    k8s.core.v1.Service(
        f"{prefix}-service",
        metadata={"name": NAME, "namespace": name, "labels": labels},
        spec={"type": "ClusterIP", "selector": labels, "ports": [{"name": "grpc", "port": PORT, "targetPort": "connect", "appProtocol": "grpc"}]},
        # the namespace must exist before anything is created in it
        opts=scope.after(ns),
    )
    k8s.apiextensions.CustomResource(
        f"{prefix}-ingress",
        api_version=versions.CILIUM_API,
        kind="CiliumNetworkPolicy",
        metadata={"name": NAME, "namespace": name},
        spec=ingress_deny_policy(team),
        # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD
        opts=scope.after(ns, *([scope.cilium] if scope.cilium else [])),
    )
