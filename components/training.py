"""TrainingPool: Kueue quotas and preemption, topology-aware placement, MultiKueue dispatch (DESIGN sections 1, 2).

Kueue (`kueue.x-k8s.io/v1beta2` objects only) on every GPU cluster and, with MultiKueue, on the compute
cluster as manager. Per team: a namespace with a LocalQueue and a RoleBinding for the team's Keycloak
group on every Kueue cluster, and a ClusterQueue in the site's cohort whose GPU quota comes from
config; the manager's quotas are the sum of its workers' (computed, never typed twice). Resident
inference is not Kueue-managed: training flavors select training nodes only, and every Kueue cluster (the manager
too) has the site's Topology, which every training flavor names for topology-aware placement. Airflow on compute
submits through a ServiceAccount per GPU cluster that may only create, watch and delete jobs in team
namespaces; its kubeconfig arrives as a Secret in compute's `airflow` namespace, and the submission contract as the
ConfigMap `training-submission` there (with the MultiKueue manager on compute, Airflow submits to it in-cluster). Every team namespace on a GPU
cluster holds the ConfigMap `nccl` with that cluster's NCCL settings (NCCL_IB_SL), which jobs load with envFrom.

A linked peer's team that trains here (`federation.peers.<peer>.remote_training`; DESIGN section 2:
remote-site GPUs are used only for data replicated there) gets the same queue in `remote-<peer>-<team>`,
confined to the clusters its quotas name, a Keycloak group of that name, and S3 keys from SiteFederation
for the peer's replica and its checkpoint prefix only; no catalog, and no Airflow submitter of this site.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.config import AdoptConfig, Flow, RemoteTeam, SiteConfig, TeamQuota, TrainingConfig, names
from components.config.views import MULTIKUEUE_FLOW
from components.constants import (
    AIRFLOW_NAMESPACE,
    ENGINE_LABEL,
    IN_CLUSTER_CONNECTION,
    KUBE_APISERVER_PORT,
    KUEUE_CONTROLLER_LABELS,
    KUEUE_NAMESPACE,
    TEAM_LABEL,
    TRAINING_SUBMISSION_CONFIG_MAP,
    submitter_connection_id,
)
from components.data_access import TRAINING
from components.federation import SiteFederation
from components.gpu import (
    GPU_TYPE_LABEL,
    NCCL_CONFIG,
    POOL_LABEL,
    PRIORITY_CLASSES,
    TRAINING_PRIORITY,
    GpuCluster,
    toleration,
)
from components.identity import SiteIdentity
from components.kube import (
    Adoption,
    FlatCustomResource,
    helm_release,
    namespace,
    priority_classes,
)
from components.kueue import (
    ADMISSION_CHECK,
    LOCAL_QUEUE,
    MANAGED_LABEL,
    MULTIKUEUE_CONFIG,
    PRIORITIES,
    RESERVED_PRIORITY_CLASSES,
    RESERVED_QUOTA,
    TEAM_WORKLOADS_POLICY,
    TOPOLOGY,
    kueue_values,
    queue_flavors,
    team_namespace,
    team_queue_spec,
    team_workloads_policy,
)
from components.providers import ClusterRef, NamespaceRef, SiteRef
from components.runtimes import (
    TRAINER,
    TRAINER_NAMESPACE,
    multikueue_rules,
    multikueue_watch_rules,
    submitter_rules,
    team_rules,
    torch_runtime,
    trainer_values,
)
from components.storage import StorageCluster
from components.training_submission import airflow_submission, example_job, kubeconfig

ACCESS_NAMESPACE = "fab-access"
"""Where the ServiceAccounts that other clusters act as live, with their tokens."""
TEAM_ROLE = "fab-team-member"
SUBMITTER = "airflow-submitter"
MULTIKUEUE_SA = "multikueue"
REMOTE_TEAM_LABEL = "fab.internal/remote-team"
"""On a peer's team's namespace: the team, as its site names it (with REMOTE_SITE_LABEL, the peer)."""
REMOTE_SITE_LABEL = "fab.internal/remote-site"


def tenant_labels(teams: list[str], remote_teams: dict[str, RemoteTeam]) -> dict[str, dict[str, str]]:
    """The site's tenants, by name, with the namespace labels that mark their namespaces (the network keeps them apart,
    components/network_policies.py `tenant_isolation_policy`): each team by TEAM_LABEL (its namespaces here and its notebooks'),
    each linked peer's team that trains here by REMOTE_TEAM_LABEL and REMOTE_SITE_LABEL (named by its namespace)."""
    return {**{team: {TEAM_LABEL: names.TEAM_LABEL(team)} for team in sorted(teams)},
            **{ns_name: {REMOTE_TEAM_LABEL: remote.team, REMOTE_SITE_LABEL: remote.peer} for ns_name, remote in sorted(remote_teams.items())}}


@dataclass(frozen=True)
class TrainingPoolArgs:
    site: SiteRef
    """The site, whose name is the Kueue cohort of every team's queue."""
    config: TrainingConfig
    """The `training` section: topology levels, the API servers' group prefix, MultiKueue."""
    teams: list[str]
    """The teams, each of which gets a namespace and queue on every Kueue cluster."""
    team_quotas: dict[str, dict[str, TeamQuota]]
    """Team -> GPU cluster -> quota under the active profile."""
    gpus: dict[str, GpuCluster]
    """Every GPU cluster's stack, by key: Kueue runs on each, its GPU types are the training flavors, and the one that
    serves inference takes the teams' submissions unless MultiKueue is on."""
    api_servers: dict[str, str]
    """The URL of each cluster's API server, by key: the kubeconfigs given to other clusters name the GPU clusters'."""
    compute: ClusterRef
    """The compute cluster, where Airflow submits from."""
    manager: ClusterRef | None
    """The MultiKueue manager (`training.multikueue`), or None without MultiKueue."""
    adopt: AdoptConfig
    """Declares the namespaces and Kueue releases that exist already."""
    storage: StorageCluster
    """Gives each team namespace on the workers its own team's S3 keys and Polaris principal (`training_grants()`)."""
    airflow_namespace: k8s.core.v1.Namespace
    """Compute's Airflow namespace (ComputeCluster's), which receives the submitter kubeconfigs."""
    remote_teams: dict[str, RemoteTeam]
    """Linked peers' teams that train here, by namespace: a queue like a team's, confined to their clusters."""
    federation: SiteFederation
    """Gives a peer's team its S3 keys (the peer's replica, its checkpoint prefix) once the peer consents."""
    identity: SiteIdentity
    """Holds the Keycloak group of each peer's team, which its RoleBindings name."""
    runtimes: frozenset[str] = frozenset()
    """The training runtimes installed beside Kueue (components/runtimes.py RUNTIME_KINDS): Kubeflow Trainer with
    `training.runtimes`. Kueue admits, and teams, Airflow and MultiKueue handle, Jobs and these runtimes' kinds only."""
    spark_clusters: frozenset[str] = frozenset()
    """The GPU clusters that run Spark RAPIDS (`gpu.<cluster>.spark_rapids`): their Kueue admits SparkApplications."""


class TrainingPool(pulumi.ComponentResource):
    """Kueue on every GPU cluster (and the MultiKueue manager), team quotas and job submission."""

    submission: pulumi.Output[dict[str, Any]]
    """The training-submission contract, per team: cluster, namespace and LocalQueue."""
    remote_submission: pulumi.Output[dict[str, Any]]
    """The same for peers' teams that train here, per peer and team."""
    example_job: pulumi.Output[str]
    """A suspended Job that pins an Iceberg table and snapshot id, labelled for its LocalQueue."""

    def __init__(self, name: str, args: TrainingPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:training:TrainingPool", name, None, opts)
        self._name, self._site, self._config, self._storage = name, args.site, args.config, args.storage
        self._teams, self._gpus, self._api_servers, self._adopt = sorted(args.teams), args.gpus, args.api_servers, args.adopt
        self._remote_teams, self._federation = args.remote_teams, args.federation
        self._spark_clusters = args.spark_clusters
        for ns_name, remote in sorted(args.remote_teams.items()):
            args.identity.group(remote.group, f"Members of {remote.peer}'s team {remote.team}, who train in {ns_name} on this site")
        self._clusters = {key: gpu.cluster for key, gpu in args.gpus.items()} | {args.compute.key: args.compute}
        self._access_namespaces: dict[str, k8s.core.v1.Namespace] = {}
        self._team_namespaces: dict[tuple[str, str], k8s.core.v1.Namespace] = {}
        self._hosted_namespaces: dict[tuple[str, str], k8s.core.v1.Namespace] = {}
        """(cluster, namespace) -> the namespace of a peer's team that trains here."""
        manager = args.manager
        self._manager = manager.key if manager else None
        if manager:
            self._clusters[manager.key] = manager

        self._runtimes = set(args.runtimes)
        self._site_ca = False
        self.trainer: dict[str, k8s.helm.v3.Release] = {}
        """Kubeflow Trainer's release per cluster, where `training.runtimes` installs it."""
        self.kueue: dict[str, k8s.helm.v3.Release] = {}
        kueue_clusters = sorted({*args.gpus, *([self._manager] if self._manager else [])})
        for cluster in kueue_clusters:
            if TRAINER in self._runtimes:
                self.trainer[cluster] = self._trainer(cluster)
            self.kueue[cluster] = self._kueue(cluster)
            self._queues(cluster, args.team_quotas)
        if TRAINER in self._runtimes:
            # On the MultiKueue manager too: Kueue there reads a TrainJob's runtime to size its workload.
            for cluster in kueue_clusters:
                self._torch_runtime(cluster)

        for cluster in sorted(args.gpus):
            self._submitter(cluster, args.compute.key, args.airflow_namespace)
        if self._manager:
            self._multikueue(self._manager, args.config.multikueue.workers)
            if self._manager == args.compute.key:
                self._in_cluster_submitter(self._manager)

        # Teams submit to the MultiKueue manager, which dispatches to its workers; without it, to the site's main GPU
        # cluster, the one that serves inference (a configured key, so adding a GPU cluster moves no team's submissions),
        # or before the site serves models (phase 1, a single GPU cluster) its first gpu cluster.
        submit = manager or next(
            (gpu.cluster for gpu in args.gpus.values() if gpu.serves_inference),
            next(gpu.cluster for _, gpu in sorted(args.gpus.items()) if gpu.cluster.role == "gpu"),
        )
        self.submission = pulumi.Output.from_input(
            {
                team: {"cluster": submit.name, "namespace": team_namespace(team), "local_queue": LOCAL_QUEUE}
                for team in self._teams
            }
        )
        self.remote_submission = pulumi.Output.from_input({
            peer: {remote.team: {"cluster": submit.name, "namespace": ns_name, "local_queue": LOCAL_QUEUE}
                   for ns_name, remote in sorted(args.remote_teams.items()) if remote.peer == peer}
            for peer in sorted({remote.peer for remote in args.remote_teams.values()})
        })
        # The same contract for Airflow's DAGs (the serving loop, docs/mlops.md), with the Airflow connection that reaches
        # each team's submission cluster and what a job of the contract names (the shape of `example_job`).
        connections = {gpu: submitter_connection_id(gpu) for gpu in args.gpus}
        if self._manager == args.compute.key:
            connections[self._manager] = IN_CLUSTER_CONNECTION
        k8s.core.v1.ConfigMap(
            f"{self._name}-{args.compute.key}-airflow-submission",
            metadata={"name": TRAINING_SUBMISSION_CONFIG_MAP, "namespace": AIRFLOW_NAMESPACE},
            data={"submission.json": json.dumps(airflow_submission(
                {team: (submit.name, team_namespace(team), connections.get(submit.key)) for team in self._teams}), indent=2, sort_keys=True)},
            # Airflow's namespace must exist before anything is created in it
            opts=self._on(args.compute.key, [args.airflow_namespace]),
        )
        self.example_job = pulumi.Output.all(args.storage.catalog_uri, args.storage.warehouse).apply(
            lambda catalog: yamltext.dump(example_job(catalog[0], catalog[1]))
        )
        self.register_outputs({"submission": self.submission, "remote_submission": self.remote_submission, "example_job": self.example_job})

    def team_namespaces(self) -> dict[tuple[str, str], NamespaceRef]:
        """(GPU cluster, team) -> the team's namespace on each GPU cluster, where its jobs run (not the manager's), and where
        other components add what a team's jobs there need."""
        return {(cluster, team): NamespaceRef(self._clusters[cluster], team_namespace(team), ns)
                for (cluster, team), ns in sorted(self._team_namespaces.items()) if cluster in self._gpus}

    def _on(self, cluster: str, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._clusters[cluster].provider, depends_on=depends_on or [])

    def _kueue(self, cluster: str) -> k8s.helm.v3.Release:
        ns = self._namespace(cluster, KUEUE_NAMESPACE)
        # After its namespace and the runtimes' CRDs: Kueue sets up the integration of a kind whose CRD it finds.
        return helm_release(
            f"{self._name}-{cluster}-kueue", versions.KUEUE, name="kueue", namespace=KUEUE_NAMESPACE,
            values=kueue_values(cluster == self._manager, self._runtimes, spark=cluster in self._spark_clusters),
            opts=self._on(cluster, [ns, *([self.trainer[cluster]] if cluster in self.trainer else [])]),
            registry=self._clusters[cluster].registry,
            adopt=Adoption(self._adopt, cluster),
        )

    def _trainer(self, cluster: str) -> k8s.helm.v3.Release:
        """Kubeflow Trainer and the JobSet controller it bundles. On the MultiKueue manager they only validate: Kueue sets
        `managedBy` on the TrainJobs and JobSets there, which their controllers leave to the workers' copies."""
        ns = self._namespace(cluster, TRAINER_NAMESPACE)
        return helm_release(
            f"{self._name}-{cluster}-trainer", versions.KUBEFLOW_TRAINER, name="kubeflow-trainer", namespace=TRAINER_NAMESPACE,
            # the chart's objects go in its namespace, which must exist first
            values=trainer_values(), opts=self._on(cluster, [ns]), adopt=Adoption(self._adopt, cluster),
            registry=self._clusters[cluster].registry,
        )

    def _torch_runtime(self, cluster: str) -> None:
        """The platform's PyTorch ClusterTrainingRuntime, the same on every cluster (Kueue's MultiKueue guide: on the
        manager and every worker)."""
        runtime = torch_runtime(self._config.checkpoint_cache_gib, self._site_ca, self._clusters[cluster].registry)
        needs: list[pulumi.Resource] = [self.trainer[cluster]]
        if cluster not in self._gpus:
            # Kueue on the manager takes a TrainJob's priority from its pods' PriorityClass when it names no
            # WorkloadPriorityClass, so the class the runtime names exists there too (GpuCluster makes it on the workers).
            needs.extend(priority_classes(f"{self._name}-{cluster}", {TRAINING_PRIORITY: PRIORITY_CLASSES[TRAINING_PRIORITY]},
                                          self._on(cluster)).values())
        k8s.apiextensions.CustomResource(
            f"{self._name}-{cluster}-runtime-{runtime['metadata']['name']}",
            api_version=runtime["apiVersion"], kind=runtime["kind"], metadata=runtime["metadata"], spec=runtime["spec"],
            # Trainer's chart installs the ClusterTrainingRuntime CRD (and its webhook, which validates it).
            opts=self._on(cluster, needs),
        )

    def _namespace(self, cluster: str, name: str, labels: dict[str, str] | None = None) -> k8s.core.v1.Namespace:
        return namespace(f"{self._name}-{cluster}-ns-{name}", name, self._on(cluster), labels=labels,
                         adopt=Adoption(self._adopt, cluster), registry=self._clusters[cluster].registry)

    def _cr(self, cluster: str, logical: str, kind: str, metadata: dict[str, Any], spec: dict[str, Any],
            depends_on: list[pulumi.Resource] | None = None) -> k8s.apiextensions.CustomResource:
        """A Kueue object on `cluster`, applied once Kueue (and its CRDs) is installed there."""
        return k8s.apiextensions.CustomResource(
            f"{self._name}-{cluster}-{logical}",
            api_version=versions.KUEUE_API,
            kind=kind,
            metadata=metadata,
            spec=spec,
            opts=self._on(cluster, [self.kueue[cluster], *(depends_on or [])]),
        )

    def _flavors(self, cluster: str) -> dict[str, list[str]]:
        """Training flavors of a cluster, each with the clusters whose quotas it holds (`queue_flavors`)."""
        gpu_types = {key: gpu.gpu_types for key, gpu in self._gpus.items()}
        return queue_flavors(cluster, self._manager, self._config.multikueue.workers, gpu_types)

    def _queues(self, cluster: str, quotas: dict[str, dict[str, TeamQuota]]) -> None:
        site, config = self._site, self._config
        is_manager = cluster == self._manager
        for wpc, value in PRIORITIES.items():
            FlatCustomResource(
                f"{self._name}-{cluster}-priority-{wpc}", versions.KUEUE_API, "WorkloadPriorityClass", {"name": wpc},
                {"value": value, "description": f"{wpc.split('-')[1].capitalize()} training work."},
                # the Kueue chart installs the WorkloadPriorityClass CRD
                opts=self._on(cluster, [self.kueue[cluster]]),
            )
        # The manager needs the Topology and topology-aware flavors as well: Kueue admits a workload that asks for a
        # topology only on such a flavor, and with MultiKueue it leaves the placement itself to the worker.
        self._cr(cluster, "topology", "Topology", {"name": TOPOLOGY},
                 {"levels": [{"nodeLabel": label} for label in config.topology_levels]})
        flavors = self._flavors(cluster)
        for flavor in flavors:
            self._cr(cluster, f"flavor-{flavor}", "ResourceFlavor", {"name": flavor}, {
                "nodeLabels": {POOL_LABEL: "training", GPU_TYPE_LABEL: flavor.removeprefix("training-")},
                "tolerations": [toleration("training")],
                "topologyName": TOPOLOGY,
            })
        self._cr(cluster, "cohort", "Cohort", {"name": site.name}, {})
        guard = self._team_workloads_guard(cluster)
        k8s.rbac.v1.ClusterRole(
            f"{self._name}-{cluster}-team-role", metadata={"name": TEAM_ROLE}, rules=team_rules(self._runtimes),
            # no rights before the guard of what they create is in force
            opts=self._on(cluster, [guard]),
        )
        for team in self._teams:
            ns_name = team_namespace(team)
            # Training jobs of the team run here: they read the training credentials, the team's own.
            ns = self._team_queue(cluster, ns_name, {**tenant_labels([team], {})[team], ENGINE_LABEL: TRAINING}, names.TEAM_GROUP(team),
                                  quotas.get(team, {}), flavors, (f"queue-{team}", f"localqueue-{team}"))
            self._team_namespaces[cluster, team] = ns
            if not is_manager:  # pods run on workers: data by reference, read with the team's own training keys
                team_ns = NamespaceRef(self._clusters[cluster], ns_name, ns)
                self._storage.training_grants(team, team_ns)
                self._nccl_settings(cluster, ns_name, team, ns)
                if TRAINER in self._runtimes:  # the PyTorch runtime's checkpoint upload trusts the site CA
                    self._site_ca = self._storage.site_ca(team_ns).secret is not None
        for ns_name, remote in sorted(self._remote_teams.items()):
            # A peer's team: quota on the clusters its peer entry names only, and no catalog, no bucket of this site but
            # the peer's replica and its own checkpoint prefix (SiteFederation's keys, once the peer consents).
            ns = self._team_queue(cluster, ns_name, tenant_labels([], {ns_name: remote})[ns_name], remote.group,
                                  remote.quotas, flavors, (f"hosted-queue-{ns_name}", f"hosted-localqueue-{ns_name}"), confined=True)
            self._hosted_namespaces[cluster, ns_name] = ns
            if not is_manager:
                self._federation.remote_grant(ns_name, NamespaceRef(self._clusters[cluster], ns_name, ns))
                self._nccl_settings(cluster, ns_name, remote.team, ns)

    def _team_workloads_guard(self, cluster: str) -> k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding:
        """TEAM_WORKLOADS_POLICY on `cluster`, in force once its binding exists."""
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{self._name}-{cluster}-team-workloads", metadata={"name": TEAM_WORKLOADS_POLICY}, spec=team_workloads_policy(),
            opts=self._on(cluster),
        )
        return k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{self._name}-{cluster}-team-workloads-binding", metadata={"name": TEAM_WORKLOADS_POLICY},
            spec={"policyName": TEAM_WORKLOADS_POLICY, "validationActions": ["Deny"]},
            # the binding puts the guard in force only once the policy it names exists
            opts=self._on(cluster, [policy]),
        )

    def _nccl_settings(self, cluster: str, ns_name: str, team: str, ns: k8s.core.v1.Namespace) -> None:
        """The cluster's NCCL settings (its fabric's service level) in a namespace where jobs train, wherever MultiKueue
        places a job."""
        k8s.core.v1.ConfigMap(
            f"{self._name}-{cluster}-{ns_name}-nccl",
            metadata={"name": NCCL_CONFIG, "namespace": ns_name, "labels": {"fab.internal/team": team}},
            data=self._gpus[cluster].nccl_env,
            # the namespace must exist before anything is created in it
            opts=self._on(cluster, [ns]),
        )

    def _team_queue(self, cluster: str, ns_name: str, labels: dict[str, str], group: str, team_quotas: dict[str, TeamQuota],
                    flavors: dict[str, list[str]], logical: tuple[str, str], confined: bool = False) -> k8s.core.v1.Namespace:
        """A team's namespace on `cluster`, its members' RoleBinding, its ClusterQueue (named as the namespace) in the site's
        cohort with its quota, and its LocalQueue. A `confined` team has no quota, not even borrowed, on the clusters its
        quotas do not name."""
        config, is_manager = self._config, cluster == self._manager
        ns = self._namespace(cluster, ns_name, labels={**labels, MANAGED_LABEL: "true"})
        k8s.rbac.v1.RoleBinding(
            f"{self._name}-{cluster}-{ns_name}-members",
            metadata={"name": "team-members", "namespace": ns_name},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TEAM_ROLE},
            subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"{config.group_prefix}{group}"}],
            # the namespace must exist before anything is created in it
            opts=self._on(cluster, [ns]),
        )
        # Kubernetes' own way to keep critical classes out of a namespace (the Priority admission plugin lets any namespace
        # name them): a quota of no pods at those classes, beside TEAM_WORKLOADS_POLICY.
        k8s.core.v1.ResourceQuota(
            f"{self._name}-{cluster}-{ns_name}-reserved-priorities",
            metadata={"name": RESERVED_QUOTA, "namespace": ns_name},
            spec={"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": list(RESERVED_PRIORITY_CLASSES)}]}},
            # the namespace must exist before anything is created in it
            opts=self._on(cluster, [ns]),
        )
        queue, local_queue = logical
        self._cr(cluster, queue, "ClusterQueue", {"name": ns_name},
                 team_queue_spec(self._site.name, ns_name, flavors, team_quotas, is_manager, confined))
        # a LocalQueue lives in the team namespace, which must exist first
        self._cr(cluster, local_queue, "LocalQueue", {"name": LOCAL_QUEUE, "namespace": ns_name}, {"clusterQueue": ns_name}, depends_on=[ns])
        return ns

    def _access_namespace(self, cluster: str) -> k8s.core.v1.Namespace:
        if cluster not in self._access_namespaces:
            self._access_namespaces[cluster] = self._namespace(cluster, ACCESS_NAMESPACE)
        return self._access_namespaces[cluster]

    def _service_account(self, cluster: str, account: str, rules: list[dict[str, Any]],
                         namespaces: dict[str, k8s.core.v1.Namespace], watch_rules: list[dict[str, Any]] | None = None,
                         ) -> k8s.core.v1.Secret:
        """A ServiceAccount on `cluster` with exactly `rules` in each of `namespaces` (RoleBindings), and `watch_rules`
        (reads only) cluster-wide, and its token Secret."""
        ns = self._access_namespace(cluster)
        sa = k8s.core.v1.ServiceAccount(
            f"{self._name}-{cluster}-sa-{account}",
            metadata={"name": account, "namespace": ACCESS_NAMESPACE},
            automount_service_account_token=False,
            # the namespace must exist before anything is created in it
            opts=self._on(cluster, [ns]),
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{self._name}-{cluster}-role-{account}", metadata={"name": f"fab-{account}"}, rules=rules, opts=self._on(cluster)
        )
        subject = [{"kind": "ServiceAccount", "name": account, "namespace": ACCESS_NAMESPACE}]
        role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"fab-{account}"}
        for ns_name, team_ns in sorted(namespaces.items()):
            k8s.rbac.v1.RoleBinding(
                f"{self._name}-{cluster}-{ns_name}-{account}",
                metadata={"name": account, "namespace": ns_name},
                # the namespace, and the ClusterRole: binding a role the API server cannot resolve takes the `bind` verb
                role_ref=role_ref, subjects=subject, opts=self._on(cluster, [role, sa, team_ns]),
            )
        if watch_rules is not None:
            watch = k8s.rbac.v1.ClusterRole(
                f"{self._name}-{cluster}-role-{account}-watch", metadata={"name": f"fab-{account}-watch"}, rules=watch_rules,
                opts=self._on(cluster),
            )
            k8s.rbac.v1.ClusterRoleBinding(
                f"{self._name}-{cluster}-binding-{account}-watch", metadata={"name": f"fab-{account}-watch"},
                role_ref={**role_ref, "name": f"fab-{account}-watch"}, subjects=subject,
                # the ClusterRole first: binding a role the API server cannot resolve takes the `bind` verb
                opts=self._on(cluster, [watch, sa]),
            )
        return k8s.core.v1.Secret(
            f"{self._name}-{cluster}-token-{account}",
            metadata={"name": f"{account}-token", "namespace": ACCESS_NAMESPACE, "annotations": {"kubernetes.io/service-account.name": account}},
            type="kubernetes.io/service-account-token",
            # The token controller fills the Secret only for an existing ServiceAccount (and deletes it otherwise).
            opts=pulumi.ResourceOptions.merge(self._on(cluster, [sa]), pulumi.ResourceOptions(additional_secret_outputs=["data"])),
        )

    def _kubeconfig_secret(self, logical: str, target: str, token: k8s.core.v1.Secret, into: str, namespace: str,
                           secret_name: str, key: str, depends_on: list[pulumi.Resource], default_ns: str | None) -> k8s.core.v1.Secret:
        """The kubeconfig of a ServiceAccount of `target`, as a Secret on cluster `into` (a Pulumi secret throughout)."""
        server, cluster_name = self._api_servers[target], self._clusters[target].name
        content = pulumi.Output.secret(token.data).apply(
            lambda data: kubeconfig(cluster_name, server, data["ca.crt"], base64.b64decode(data["token"]).decode(), default_ns)
        )
        return k8s.core.v1.Secret(
            f"{self._name}-{logical}",
            metadata={"name": secret_name, "namespace": namespace},
            type="Opaque",
            string_data={key: content},
            # `depends_on`: the namespace it goes in must exist (Airflow's; Kueue's, which the Kueue release waits for)
            opts=self._on(into, depends_on),
        )

    def _submitter(self, cluster: str, compute: str, airflow_ns: k8s.core.v1.Namespace) -> None:
        # Airflow submits for this site's teams only (a peer's team submits through its own site).
        teams = {team_namespace(team): self._team_namespaces[cluster, team] for team in self._teams}
        token = self._service_account(cluster, SUBMITTER, submitter_rules(self._runtimes), teams)
        self._kubeconfig_secret(
            f"{compute}-airflow-kubeconfig-{cluster}", cluster, token, compute, AIRFLOW_NAMESPACE,
            # Airflow acts for every team: no default namespace, so a DAG names its team's (the submission contract's).
            names.SUBMITTER_KUBECONFIG(cluster), "kubeconfig", [airflow_ns], None,
        )

    def _in_cluster_submitter(self, manager: str) -> None:
        """With the MultiKueue manager on compute, Airflow submits there in-cluster: its pods' ServiceAccounts get the
        submitter's rules (no Secrets) in every team namespace of the manager, and nothing elsewhere."""
        role = k8s.rbac.v1.ClusterRole(
            f"{self._name}-{manager}-role-{SUBMITTER}", metadata={"name": f"fab-{SUBMITTER}"}, rules=submitter_rules(self._runtimes),
            opts=self._on(manager),
        )
        for team in self._teams:
            k8s.rbac.v1.RoleBinding(
                f"{self._name}-{manager}-{team_namespace(team)}-{SUBMITTER}",
                metadata={"name": SUBMITTER, "namespace": team_namespace(team)},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"fab-{SUBMITTER}"},
                # Every Airflow pod holds the GPU clusters' submitter kubeconfigs already (they are mounted in all of
                # them), so the group of Airflow's ServiceAccounts is granted no more than Airflow has elsewhere.
                subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                           "name": f"system:serviceaccounts:{AIRFLOW_NAMESPACE}"}],
                # the team namespace, and the ClusterRole: binding a role the API server cannot resolve takes the `bind` verb
                opts=self._on(manager, [role, self._team_namespaces[manager, team]]),
            )

    def _multikueue(self, manager: str, workers: list[str]) -> None:
        clusters = []
        for worker in workers:
            # It writes where the manager has queues (every team's namespace, and every hosted peer team's: Kueue creates a
            # workload's copies in the namespace it has on the manager), never in the operators' or system namespaces.
            queues = {**{team_namespace(team): self._team_namespaces[worker, team] for team in self._teams},
                      **{ns_name: ns for (c, ns_name), ns in self._hosted_namespaces.items() if c == worker}}
            token = self._service_account(worker, MULTIKUEUE_SA, multikueue_rules(self._runtimes), queues,
                                          watch_rules=multikueue_watch_rules(self._runtimes))
            secret = self._kubeconfig_secret(
                f"{manager}-multikueue-kubeconfig-{worker}", worker, token, manager, KUEUE_NAMESPACE,
                names.MULTIKUEUE_KUBECONFIG(worker), "kubeconfig", [self.kueue[manager]], "default",
            )
            clusters.append(
                self._cr(manager, f"multikueue-cluster-{worker}", "MultiKueueCluster", {"name": worker},
                         {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": names.MULTIKUEUE_KUBECONFIG(worker)}}},
                         # Kueue connects to the worker with the kubeconfig in `secret`.
                         depends_on=[secret])
            )
        config = self._cr(manager, "multikueue-config", "MultiKueueConfig", {"name": MULTIKUEUE_CONFIG},
                          # The clusters it lists: the admission check stays inactive while one of them is missing.
                          {"clusters": sorted(workers)}, depends_on=clusters)
        self._cr(manager, "admission-check", "AdmissionCheck", {"name": ADMISSION_CHECK},
                 {"controllerName": "kueue.x-k8s.io/multikueue",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}},
                 # Its parameters name the MultiKueueConfig.
                 depends_on=[config])


def multikueue_flow(site: SiteConfig) -> Flow:
    """The manager's Kueue controller to every worker's API server."""
    workers = sorted(site.training.multikueue.workers)
    ports = {site.clusters[w].api_server_port for w in workers if w in site.clusters} or {KUBE_APISERVER_PORT}
    return Flow(
        description="The MultiKueue manager dispatches workloads to its workers' API servers.",
        sources=[site.multikueue_manager()], to=workers, port=min(ports), target="kube-apiserver",
        from_namespace=KUEUE_NAMESPACE, from_labels=KUEUE_CONTROLLER_LABELS,
    )


def multikueue_flows(site: SiteConfig) -> dict[str, Flow]:
    """The manager-to-worker flow, while MultiKueue is on."""
    return {MULTIKUEUE_FLOW: multikueue_flow(site)} if site.training.multikueue.enabled else {}
