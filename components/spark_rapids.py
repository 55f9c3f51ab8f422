"""SparkRapids: Spark with the RAPIDS Accelerator on a GPU cluster, submitted by method B (DESIGN section 1: FDC
backfills "Spark RAPIDS, method B"; docs/architecture.md, "Spark RAPIDS").

MultiKueue cannot dispatch a SparkApplication, so Airflow on compute creates it straight in a team namespace of the
GPU cluster named by `gpu.<cluster>.spark_rapids`, through that cluster's submitter ServiceAccount. The Spark operator
there watches exactly the team namespaces; Kueue's SparkApplication integration admits each whole application (driver
and every executor) against the team's training quota, at training priority, on training nodes. Drivers and executors
read the team's own S3 keys and Polaris principal (`s3-training`, `polaris-training`); the exported application
template carries the catalog and the RAPIDS plugin sized from config in its `sparkConf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.config import AdoptConfig, SparkRapidsConfig
from components.constants import polaris_secret, s3_secret
from components.data_access import TRAINING
from components.engines import _spark_packages as packages
from components.engines import _spark_trust as jvm_trust
from components.engines._spark_trust import SparkTrust
from components.engines.spark import OPERATOR_CHART, SERVICE_ACCOUNT, registry_fields, spark_conf
from components.gpu import POOL_LABEL, TRAINING_PRIORITY, GpuCluster, toleration
from components.kube import Adoption, helm_release, namespace, restricted_pod_security_context, restricted_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, team_namespace
from components.registry import UPSTREAM, Registry
from components.training import ACCESS_NAMESPACE, SUBMITTER

OPERATOR_NAMESPACE = "spark-operator"
SUBMITTER_ROLE = "fab-airflow-submitter-spark"
SUBMITTER_RULES = [
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications"], "verbs": ["create", "delete", "get", "list", "watch"]},
]
"""What Airflow's submitter may add on a Spark RAPIDS cluster, in team namespaces only: create, watch and delete
SparkApplications (never ScheduledSparkApplications: Airflow schedules)."""
SPARK_USER = 185
"""The uid the apache/spark images run as."""
DISCOVERY_SCRIPT = "/opt/spark/examples/src/main/scripts/getGpusResources.sh"
"""Spark's GPU discovery script, shipped in the apache/spark images."""


def rapids_conf(spec: SparkRapidsConfig) -> dict[str, str]:
    """The RAPIDS plugin's Spark configuration for executors of `spec`'s size (the RAPIDS Accelerator's Kubernetes guide)."""
    return {
        "spark.jars.packages": versions.SPARK_RAPIDS,
        "spark.plugins": "com.nvidia.spark.SQLPlugin",
        "spark.rapids.sql.enabled": "true",
        "spark.rapids.sql.concurrentGpuTasks": str(spec.concurrent_gpu_tasks),
        "spark.rapids.memory.pinnedPool.size": f"{spec.pinned_pool_gib}g",
        "spark.executor.resource.gpu.amount": str(spec.executor_gpus),
        "spark.executor.resource.gpu.vendor": "nvidia.com",
        "spark.executor.resource.gpu.discoveryScript": DISCOVERY_SCRIPT,
        # Every task slot of an executor shares its GPUs; concurrentGpuTasks bounds how many run on them at once.
        "spark.task.resource.gpu.amount": f"{spec.executor_gpus / spec.executor_cores:.4g}",
        # Kueue admits a fixed size: it refuses dynamic allocation.
        "spark.dynamicAllocation.enabled": "false",
    }


def overhead_gib(spec: SparkRapidsConfig) -> int:
    """An executor's memory beyond its heap: the RAPIDS pinned pool (off-heap) and Spark's own overhead."""
    return spec.pinned_pool_gib + 4


def spark_rapids_application(spec: SparkRapidsConfig, catalog_uri: str, executors: int = 2,
                             registry: Registry = UPSTREAM, trust: SparkTrust = jvm_trust.NONE) -> dict[str, Any]:
    """A SparkApplication as Airflow submits it to a team namespace: queued by Kueue on the team's LocalQueue at training
    priority, driver and executors on training nodes with the team's credentials, executors with `spec`'s GPUs. A job
    adds its name, type, mainApplicationFile (and image, if it needs more than Spark and the RAPIDS jar).

    Every setting is in `sparkConf`: the operator's `sparkConfigMap` mounts a spark-defaults.conf that Spark 3.5 drivers
    never read (they start with `--properties-file`; kubeflow/spark-operator#1183, #691). The RAPIDS jar resolves into
    /tmp (`registry_fields`, spark.SCRATCH); on a site with a registry the image comes from it, and the jar from its Maven
    repository only."""
    def pod() -> dict[str, Any]:
        credentials = [{"secretRef": {"name": s3_secret(TRAINING)}}, {"secretRef": {"name": polaris_secret(TRAINING)}}]
        return {
            "nodeSelector": {POOL_LABEL: "training"},
            "tolerations": [toleration("training")],
            "priorityClassName": TRAINING_PRIORITY,
            "envFrom": credentials,
            "podSecurityContext": restricted_pod_security_context(runAsUser=SPARK_USER, fsGroup=SPARK_USER),
            "securityContext": restricted_security_context(SPARK_USER) | {"readOnlyRootFilesystem": False},
        }

    site, driver, executor = registry_fields(registry, trust)
    return {
        "apiVersion": versions.SPARK_OPERATOR_API,
        "kind": "SparkApplication",
        "metadata": {"labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}},
        "spec": {
            "mode": "cluster",
            "sparkVersion": versions.SPARK_VERSION,
            "image": registry.image(versions.SPARK_IMAGE),
            **site,
            "sparkConf": {**spark_conf(catalog_uri), **rapids_conf(spec), **site.get("sparkConf", {})},
            "restartPolicy": {"type": "Never"},
            "dynamicAllocation": {"enabled": False},
            "driver": {"serviceAccount": SERVICE_ACCOUNT, "cores": 2, "memory": "8g", **pod(), **driver},
            "executor": {
                "instances": executors,
                "cores": spec.executor_cores,
                "memory": f"{spec.executor_memory_gib}g",
                "memoryOverhead": f"{overhead_gib(spec)}g",
                "gpu": {"name": "nvidia.com/gpu", "quantity": spec.executor_gpus},
                **pod(),
                **executor,
            },
        },
    }


@dataclass(frozen=True)
class SparkRapidsArgs:
    gpu: GpuCluster
    """The GPU cluster Spark RAPIDS runs on (its training nodes)."""
    config: SparkRapidsConfig
    """Its `gpu.<cluster>.spark_rapids` section: executor size and RAPIDS settings."""
    team_namespaces: dict[str, k8s.core.v1.Namespace]
    """The team namespaces on that cluster (TrainingPool's), by team: the operator's job namespaces."""
    kueue: pulumi.Resource
    """Kueue on that cluster, whose webhook admits SparkApplications once the operator's CRD exists."""
    catalog_uri: pulumi.Input[str]
    """The Polaris catalog's URI, written into each namespace's Spark defaults."""
    adopt: AdoptConfig
    trust: SparkTrust = jvm_trust.NONE
    """The site's CA when it issued S3's certificate: every driver and executor trusts it (engines/_spark_trust.py)."""


class SparkRapids(pulumi.ComponentResource):
    """The Spark operator on a GPU cluster, its team namespaces' Spark defaults and Airflow's right to submit there."""

    operator: k8s.helm.v3.Release
    """The Spark operator release (and its CRDs)."""
    application_template: pulumi.Output[str]
    """The SparkApplication Airflow submits, without a job's name, type and main file."""

    def __init__(self, name: str, args: SparkRapidsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:spark:SparkRapids", name, None,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(provider=args.gpu.cluster.provider)))
        child = pulumi.ResourceOptions(parent=self)
        adopt = Adoption(args.adopt, args.gpu.cluster.key)
        teams = sorted(args.team_namespaces)
        job_namespaces = [team_namespace(team) for team in teams]
        registry = args.gpu.cluster.registry
        ns = namespace(f"{name}-ns-{OPERATOR_NAMESPACE}", OPERATOR_NAMESPACE, child, adopt=adopt, registry=registry)
        # On a site with a Maven repository the controller's spark-submit and the drivers read its ivysettings.xml.
        maven = [self._packages_config_map(name, ns_name, after, registry)
                 for ns_name, after in ((OPERATOR_NAMESPACE, ns), *((team_namespace(t), args.team_namespaces[t]) for t in teams))
                 ] if packages.resolves_from_site(registry) else []
        # Where the site's CA issued S3's certificate, the team namespaces' drivers and executors trust it.
        maven += [self._trust_config_map(name, team_namespace(t), args.team_namespaces[t], registry, args.trust)
                  for t in teams] if args.trust.needed else []
        self.operator = helm_release(
            f"{name}-spark-operator", versions.SPARK_OPERATOR, name="spark-operator", namespace=OPERATOR_NAMESPACE,
            values={
                # The chart makes the drivers' ServiceAccount and Role in each of these namespaces.
                "spark": {"jobNamespaces": job_namespaces, "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
                # Kueue, not a batch scheduler, gangs applications here (docs/architecture.md, "Spark RAPIDS").
                "controller": {"batchScheduler": {"enable": False}, **packages.operator_controller_values(registry)},
                # Drivers' and executors' tolerations, priority and envFrom are set by the operator's webhook.
                "webhook": {"enable": True},
            },
            # Its namespace and the team namespaces (the chart's Roles go in them), `spark-maven` for the controller and its
            # drivers, and Kueue, whose webhook must suspend each SparkApplication before the operator can run it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns, args.kueue, *args.team_namespaces.values(), *maven]),
            adopt=adopt, registry=registry, images=OPERATOR_CHART.images,
        )
        role = k8s.rbac.v1.ClusterRole(f"{name}-submitter-role", metadata={"name": SUBMITTER_ROLE}, rules=SUBMITTER_RULES, opts=child)
        for team in teams:
            ns_name = team_namespace(team)
            team_ns = args.team_namespaces[team]
            k8s.rbac.v1.RoleBinding(
                f"{name}-{ns_name}-submitter",
                metadata={"name": "airflow-submitter-spark", "namespace": ns_name},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SUBMITTER_ROLE},
                subjects=[{"kind": "ServiceAccount", "name": SUBMITTER, "namespace": ACCESS_NAMESPACE}],
                # the team namespace, and the ClusterRole: binding a role the API server cannot resolve takes the `bind` verb
                opts=pulumi.ResourceOptions(parent=self, depends_on=[role, team_ns]),
            )
        self.application_template = pulumi.Output.from_input(args.catalog_uri).apply(
            lambda uri: yamltext.dump(spark_rapids_application(args.config, uri, registry=registry, trust=args.trust)))
        self.register_outputs({"application_template": self.application_template})

    def _trust_config_map(self, name: str, namespace_: str, after: pulumi.Resource, registry: Registry,
                          trust: SparkTrust) -> k8s.core.v1.ConfigMap:
        """The ConfigMap `spark-trust` (engines/_spark_trust.py) in `namespace_`."""
        return k8s.core.v1.ConfigMap(f"{name}-{jvm_trust.CONFIG_MAP}-{namespace_}",
                                     metadata={"name": jvm_trust.CONFIG_MAP, "namespace": namespace_},
                                     binary_data=jvm_trust.config_map_binary(trust, registry),
                                     # `after` is the namespace it goes in, which must exist first
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[after]))

    def _packages_config_map(self, name: str, namespace_: str, after: pulumi.Resource, registry: Registry) -> k8s.core.v1.ConfigMap:
        """The ConfigMap `spark-maven` (engines/_spark_packages.py) in `namespace_`."""
        data, binary = packages.config_map_data(registry)
        return k8s.core.v1.ConfigMap(f"{name}-{packages.CONFIG_MAP}-{namespace_}",
                                     metadata={"name": packages.CONFIG_MAP, "namespace": namespace_},
                                     data=data, binary_data=binary or None,
                                     # `after` is the namespace it goes in, which must exist first
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[after]))
