"""Each roadmap phase's completion check (docs/roadmap.md) as acceptance jobs, built from the site's config
(docs/acceptance.md says what each criterion proves, its bound and what it needs on the site).

`criteria(site, phase)` is what `fabctl verify` runs; `not_applicable(site, phase)` is what it reports as skipped, with
the reason. Every object is labelled `fab.internal/verify: <criterion id>` and lives in the acceptance namespace
(`acceptance.namespace`) unless it must use a team's Secret, which only that team's namespace holds (then it is in the
team's namespace, labelled the same, and deleted with its step). Pods are Pod Security restricted (non-root, read-only
root filesystem with emptyDir scratch, no capabilities, RuntimeDefault seccomp, requests and limits) except the MPI
pods of the NCCL check (`MPI_EXCEPTION`). Jobs report figures as `FAB-RESULT key=value` lines (fabctl/verify/probe.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components import versions
from components.config import SiteConfig, names
from components.config.views import INFERENCE_FLOW, POLARIS_FLOW, S3_FLOW
from components.constants import (
    AIRFLOW_NAMESPACE,
    S3_ACCESS_KEY,
    S3_SECRET_KEY,
    TRAINING_SUBMISSION_CONFIG_MAP,
    s3_secret,
)
from components.data_access import TRAINING, s3_endpoint_internal, team_prefix
from components.gpu import INFERENCE_NAMESPACE, NOTEBOOKS_POOL, POOL_LABEL, RDMA_RESOURCE, nccl_env, pool_tolerations, toleration
from components.kube import SMALL_RESOURCES, restricted_container, restricted_pod_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, team_namespace
from components.monitors import target_namespace
from components.observability import PROMETHEUS_URL
from components.registry import Registry
from components.runtimes import TRAINER, TRAINER_STEP_LABEL, installed_runtimes
from components.serving import route_prefix, stable_labels
from fabctl.verify.model import Criterion, Judgement, Manifest, Step

PHASES = (1, 2, 3, 4, 5)
VERIFY_LABEL = "fab.internal/verify"
"""On every object of a criterion: its id (what the runner deletes, and what an operator finds left over)."""
PROBE_SCRIPT = Path(__file__).with_name("probe.py")
PROBE_DIR = "/probe"
PROBE_USER = 65532
"""The probes' user: any non-root id works, the probe writes nothing but its scratch directory."""
PROBE_TIMEOUT_SEC = 5
"""How long a TCP probe waits for a handshake: a flow's rule answers at once, a dropped packet never."""
KUBECTL_USER = 65532
MPI_OPERATOR = "Kubeflow Trainer (TrainJob trainer.kubeflow.org/v1alpha1, its MPI runtime), which `training.runtimes` installs"
MPI_SSH_SECRET_DIR = "/etc/fab-mpi-ssh"
"""Where Trainer's MPI plugin mounts the TrainJob's key pair (`sshAuthMountPath`; its Secret: id_rsa, id_rsa.pub,
authorized_keys, mode 0640, which ssh and sshd refuse for a private key of the user they run as)."""
MPI_SSH_DIR = "/root/.ssh"
"""Where the MPI pods copy the key pair at mode 0600 before ssh or sshd reads it (an emptyDir)."""
MPI_SSH_PORT = 2222
"""The port of the MPI operator's own base images (kubeflow/mpi-operator build/base/Dockerfile), kept for the NCCL
run: the nodes' headless Service names no port, so launcher and nodes only have to agree, which the step's ssh
ConfigMap makes them do."""
MPI_SSH_CONFIG_DIR = "/etc/fab-ssh"
"""Where the step's ssh ConfigMap (`sshd_config`, `ssh_config`) is mounted in the MPI pods."""
MPI_PRIVSEP_DIR = "/run/sshd"
"""sshd's privilege separation directory: an emptyDir (the root filesystem is read-only), which sshd refuses while it is
group or world writable as an emptyDir starts, hence the worker's chmod before sshd."""
MPI_EXCEPTION = {
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK", "SETUID", "SETGID", "SYS_CHROOT"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The one exception to the restricted pods: the NCCL TrainJob's MPI pods. Trainer's MPI launcher reaches its nodes over SSH
as the image's user (root in the nccl-tests image), whose sshd drops to the session with SETUID, SETGID and SYS_CHROOT;
NCCL pins its InfiniBand buffers, which needs IPC_LOCK. Nothing else: no host network, no privilege escalation."""
WARP_FOLDER = "fab-verify-load"
"""The folder of the team's checkpoint prefix that warp writes into, drained before and after the NCCL runs."""
MPI_REASON = "NCCL over InfiniBand: the MPI workers' sshd runs as root and NCCL pins memory (IPC_LOCK)"


def criteria(site: SiteConfig, phase: int) -> list[Criterion]:
    """The acceptance criteria of `phase` (1-5) that apply to the site, in report order."""
    return [c for c in _build(site, phase) if isinstance(c, Criterion)]


def not_applicable(site: SiteConfig, phase: int) -> list[tuple[str, str]]:
    """(criterion id, why it does not apply to the site) for the phase's criteria left out of `criteria`."""
    return [c for c in _build(site, phase) if not isinstance(c, Criterion)]


def _build(site: SiteConfig, phase: int) -> list[Criterion | tuple[str, str]]:
    if phase not in PHASES:
        raise ValueError(f"phase {phase} is not a roadmap phase; give one of {', '.join(map(str, PHASES))}")
    return PHASE_BUILDERS[phase](Site(site))


class Site:
    """The site as the builders read it: the config, and what every check derives from it the same way."""

    def __init__(self, config: SiteConfig):
        self.config = config
        self.acceptance = config.acceptance
        self.namespace = config.acceptance.namespace
        self.ca = config.ca_bundle_pem()
        self.registry = Registry.of(config.registry)
        """Where the jobs' pods pull their images from (the site registry, if the site has one) and the pull Secret they
        name: the team namespaces hold it (the program puts it there), the runner copies it into the others."""

    def team(self) -> str:
        return self.acceptance.team or min(self.config.teams)

    def other_team(self) -> str | None:
        others = [t for t in sorted(self.config.teams) if t != self.team()]
        return others[0] if others else None

    def gpu_clusters(self) -> list[str]:
        return sorted(k for k in self.config.keys_with_role("gpu", "gpu-train") if k in self.config.gpu)

    def compute(self) -> str:
        return self.config.keys_with_role("compute")[0]

    def bucket(self, data_class: str) -> str:
        return next(name for name, b in sorted(self.config.storage.buckets.items()) if b.data_class == data_class)

    def gateway_url(self, model: str) -> str:
        inference = self.config.inference
        assert inference is not None
        host = inference.gateway.hostname or names.GATEWAY_HOST(self.config.domain)
        return f"https://{host}{route_prefix(model)}"

    def token_url(self) -> str:
        return f"{self.config.keycloak.url.rstrip('/')}/realms/{self.config.identity.realm}/protocol/openid-connect/token"


# --- building blocks -----------------------------------------------------------------------------------------------

def _dns(*parts: str) -> str:
    """A name of at most 63 characters: the parts joined, or their start and a hash of the whole when longer."""
    name = "-".join(parts)
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def _meta(name: str, namespace: str | None, cid: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {VERIFY_LABEL: _dns(cid)}, **extra}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _account(site: Site, account: str, cid: str, grants: list[tuple[str | None, list[dict[str, Any]]]]) -> list[Manifest]:
    """A ServiceAccount of the acceptance namespace and, per (namespace, rules) grant, a Role and its RoleBinding there (a
    ClusterRole and ClusterRoleBinding where the namespace is None): the narrowest rights a check needs, deleted with it."""
    objects: list[Manifest] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(account, site.namespace, cid)}]
    role = _dns(account)
    for namespace, rules in grants:
        kind = "Role" if namespace is not None else "ClusterRole"
        objects += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(role, namespace, cid), "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": _meta(role, namespace, cid),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": site.namespace}]},
        ]
    return objects


def _probe_config(site: Site, name: str, namespace: str, cid: str) -> Manifest:
    """The probe script (and the site's CA bundle, where it has one) for the pods of one step."""
    data = {"probe.py": PROBE_SCRIPT.read_text()}
    if site.ca:
        data["ca.crt"] = site.ca
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace, cid), "data": data}


def _scratch(*mounts: tuple[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """emptyDir volumes and their mounts, (name, path) each: the only writable places of a read-only root."""
    return ([{"name": n, "emptyDir": {"sizeLimit": "1Gi"}} for n, _ in mounts],
            [{"name": n, "mountPath": p} for n, p in mounts])


def _job(name: str, namespace: str, cid: str, pod: dict[str, Any], timeout_sec: int, labels: dict[str, str] | None = None,
         suspend: bool = False) -> Manifest:
    """A Job that runs once (no retry: a failed probe is a result) and is stopped at the step's timeout."""
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": timeout_sec,
        "template": {"metadata": {"labels": {VERIFY_LABEL: _dns(cid)}}, "spec": {"restartPolicy": "Never", **pod}},
    }
    if suspend:
        spec["suspend"] = True
    meta = _meta(name, namespace, cid)
    meta["labels"].update(labels or {})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _probe_pod(site: Site, config_map: str, args: list[str], env: list[dict[str, Any]] | None = None,
               env_from: list[dict[str, Any]] | None = None, **placement: Any) -> dict[str, Any]:
    """A restricted pod running one probe command with the Python image, without an API token."""
    volumes, mounts = _scratch(("tmp", "/tmp"))
    container_env = [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, *(env or [])]
    if site.ca:
        container_env.append({"name": "FAB_CA_FILE", "value": f"{PROBE_DIR}/ca.crt"})
    container = restricted_container(
        "probe", site.registry.image(versions.VERIFY_PROBE_IMAGE), PROBE_USER, command=["python", f"{PROBE_DIR}/probe.py"],
        args=args,
        env=container_env, volumeMounts=[*mounts, {"name": "probe", "mountPath": PROBE_DIR, "readOnly": True}],
        **({"envFrom": env_from} if env_from else {}),
    )
    return {
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(),
        **site.registry.pod_fields(),
        "containers": [container],
        "volumes": [*volumes, {"name": "probe", "configMap": {"name": config_map}}],
        **placement,
    }


def _probe_step(site: Site, cluster: str, cid: str, name: str, args: list[str], namespace: str | None = None,
                timeout_sec: int | None = None, queued: bool = False, **pod: Any) -> Step:
    """One probe Job and its ConfigMap on `cluster`, in the acceptance namespace unless told otherwise; `queued`, submitted
    as a team's job is (`_queued`)."""
    namespace = namespace or site.namespace
    config_map = _dns(name, "probe")
    timeout = timeout_sec or site.acceptance.timeout_sec
    job = _job(name, namespace, cid, _probe_pod(site, config_map, args, **pod), timeout, **(_queued() if queued else {}))
    return Step(cluster, (_probe_config(site, config_map, namespace, cid), job), ("Job", name), timeout)


def _queued() -> dict[str, Any]:
    """What a Job in a team namespace carries (components/training_submission.py example_job): Kueue manages every job there
    (manageJobsWithoutQueueName) and admits it against the team's quota onto the training pool, the only GPU pool the
    ValidatingAdmissionPolicy fab-team-workloads lets a team's pods tolerate."""
    return {"labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}, "suspend": True}


def _team_probe_step(site: Site, cluster: str, cid: str, name: str, args: list[str], team: str) -> Step:
    """A probe with the team's S3 keys, in the team's namespace (only it holds them), as the team's own job: on the
    training pool, through the team's LocalQueue."""
    return _probe_step(site, cluster, cid, name, args, namespace=team_namespace(team), env_from=_team_s3_env(), queued=True,
                       **_training_placement())


def _no_training_nodes(site: Site, cluster: str, cid: str) -> tuple[str, str] | None:
    """Why a team probe cannot run on `cluster` (no training node under the active profile), or None."""
    if site.config.pool_nodes(cluster, "training"):
        return None
    return (cid, f"{cluster} has no training node under the active profile: a probe with a team's keys runs as the team's "
                 "job, which Kueue places on the training pool only")


def _team_s3_env() -> list[dict[str, Any]]:
    """The team's S3 keys, endpoint and region: its `s3-training` Secret, which only its namespaces hold."""
    return [{"secretRef": {"name": s3_secret(TRAINING)}}]


def _training_placement(pool: str = "training") -> dict[str, Any]:
    """A pod on the GPU nodes of `pool` (their label and taint), without GPUs of its own."""
    return {"nodeSelector": {POOL_LABEL: pool}, "tolerations": [toleration(pool)]}



def _figure(results: Mapping[str, str], key: str) -> float | None:
    try:
        return float(results[key])
    except (KeyError, ValueError):
        return None


def _ran(results: Mapping[str, str], step: int, what: str) -> str:
    """Why a step has no figures: it did not finish, or finished without reporting."""
    if results.get(f"{step}.succeeded") == "false":
        return f"{what} did not finish (its job failed or timed out)"
    return f"{what} reported no result"


# --- phase 01: GPU base --------------------------------------------------------------------------------------------

def phase_01(site: Site) -> list[Criterion | tuple[str, str]]:
    out: list[Criterion | tuple[str, str]] = []
    for cluster in site.gpu_clusters():
        out.extend(gpu_count(site, cluster, node) for node in sorted(site.config.gpu[cluster].nodes))
    for cluster in site.gpu_clusters():
        out.append(nccl_under_load(site, cluster))
    out.extend(s3_roundtrip(site, cluster) for cluster in site.gpu_clusters())
    out.extend(flow_probes(site))
    out.extend(denied_probes(site))
    return out


def gpu_count(site: Site, cluster: str, node: str) -> Criterion | tuple[str, str]:
    """`nvidia-smi -L` on the node, in a pod given every GPU the config says it has."""
    cid = _dns("01-gpus", cluster, node)
    spec = site.config.gpu[cluster].nodes[node]
    pool = site.config.node_pool(cluster, node)
    if pool == "inference" and site.config.inference is not None:
        return (cid, (f"{cluster}/{node} serves models (pool inference): its GPUs are vLLM's; run phase 01 before "
                      "inference, or with the node in pool training"))
    if pool == NOTEBOOKS_POOL:
        return shared_gpu_count(site, cluster, node)
    name = "gpu-count"
    volumes, mounts = _scratch(("tmp", "/tmp"))
    gpus = {"nvidia.com/gpu": str(spec.gpus)}
    container = restricted_container(
        "nvidia-smi", site.registry.image(versions.VERIFY_GPU_IMAGE), PROBE_USER, command=["/bin/sh", "-c"],
        # A failing nvidia-smi lists no GPU: the count is then 0, which is what the node recognises.
        args=['n=$(nvidia-smi -L | grep -c "^GPU "); echo "FAB-RESULT gpus=${n:-0}"'],
        env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}],
        resources={"requests": {**SMALL_RESOURCES["requests"], **gpus}, "limits": {**SMALL_RESOURCES["limits"], **gpus}},
        volumeMounts=mounts,
    )
    pod = {
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(),
        **site.registry.pod_fields(),
        "containers": [container],
        "volumes": volumes,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": pool_tolerations(),
    }
    job = _job(name, site.namespace, cid, pod, site.acceptance.timeout_sec)
    expected = spec.gpus

    def judge(results: Mapping[str, str]) -> Judgement:
        found = _figure(results, "0.gpus")
        if found is None:
            return False, f"{cluster}/{node}: " + _ran(results, 0, "nvidia-smi")
        if int(found) != expected:
            return False, f"{cluster}/{node} shows {int(found)} GPUs; gpu.{cluster}.nodes.{node}.gpus says {expected}"
        return True, f"{cluster}/{node} shows {expected} GPUs, as configured"

    return Criterion(1, cid, f"{cluster}/{node} recognises its {expected} GPUs", (Step(cluster, (job,), ("Job", name), site.acceptance.timeout_sec),),
                     judge, f"GPUs == {expected}")


def shared_gpu_count(site: Site, cluster: str, node: str) -> Criterion:
    """A notebooks-pool node's GPUs, counted as the device plugin advertises them: its whole GPUs are renamed away
    (time-slices are nvidia.com/gpu.shared, MIG instances nvidia.com/mig-<profile>, and a pod may take one at most), so
    no pod can be given them all; the node's allocatable count of the shared resource is its GPUs times the shares of
    each. Read with kubectl by an account that may get this node only."""
    cid = _dns("01-gpus", cluster, node)
    spec = site.config.gpu[cluster].nodes[node]
    sharing = site.config.gpu[cluster].sharing
    resource = sharing.resource()
    per_gpu = sharing.per_gpu(site.config.all_gpu_types()[spec.gpu_type].product)
    expected = spec.gpus * per_gpu
    account = _dns("fab-verify", "node", node)
    rbac = _account(site, account, cid, [(None, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": [node]}])])
    path = "{.status.allocatable." + resource.replace(".", "\\.") + "}"
    script = f"set -eu\nn=$(kubectl get node {node} -o jsonpath='{path}')\necho \"FAB-RESULT shared=${{n:-0}}\""
    job = _job("gpu-count", site.namespace, cid, _kubectl_pod(site, account, script), site.acceptance.timeout_sec)

    def judge(results: Mapping[str, str]) -> Judgement:
        found = _figure(results, "0.shared")
        if found is None:
            return False, f"{cluster}/{node}: " + _ran(results, 0, "kubectl get node")
        if int(found) != expected:
            return False, (f"{cluster}/{node} advertises {int(found)} {resource}; its {spec.gpus} GPUs "
                           f"(gpu.{cluster}.nodes.{node}.gpus) shared {per_gpu} ways (gpu.{cluster}.sharing) make {expected}")
        return True, f"{cluster}/{node} advertises {expected} {resource}: {spec.gpus} GPUs shared {per_gpu} ways, as configured"

    return Criterion(1, cid, f"{cluster}/{node} recognises its {spec.gpus} GPUs, shared {per_gpu} ways",
                     (Step(cluster, (*rbac, job), ("Job", "gpu-count"), site.acceptance.timeout_sec),), judge,
                     f"{resource} == {expected}")


def nccl_under_load(site: Site, cluster: str) -> Criterion | tuple[str, str]:
    """all_reduce_perf across two training nodes over InfiniBand, alone and then while warp writes to AIStor."""
    cid = _dns("01-nccl-under-load", cluster)
    if TRAINER not in installed_runtimes(site.config.training, site.config.phase):
        return (cid, "the NCCL run is a TrainJob of Kubeflow Trainer's MPI runtime, and training.runtimes leaves Trainer out")
    nodes = site.config.pool_nodes(cluster, "training")
    if len(nodes) < 2:
        return (cid, f"{cluster} has {len(nodes)} training node(s) under the active profile; multi-node NCCL needs two")
    pair = sorted(nodes)[:2]
    slots = min(nodes[n].gpus for n in pair)
    acceptance, team = site.acceptance, site.team()
    # warp writes under the team's prefix and keeps what it wrote (--noclear): a drain before the runs clears what an
    # earlier run left, the one after counts what this load wrote (none: warp did not run) and deletes it.
    load_uri = f"{team_prefix(site.bucket('checkpoints'), team)}{WARP_FOLDER}/"

    def drain(when: str) -> Step:
        return _team_probe_step(site, cluster, cid, _dns("drain", when), ["s3-drain", load_uri], team)

    steps = [drain("before")]
    for run in ("baseline", "load"):
        namespace = _dns(site.namespace, "nccl", run)
        objects: list[Manifest] = [_privileged_namespace(namespace, cid), _mpi_ssh_config(namespace, cid)]
        background: tuple[str, ...] = ()
        if run == "load":
            objects.extend(_warp(site, cluster, cid, team))
            background = ("warp-load",)
        name = _dns("nccl", run)
        objects.extend(_mpi_trainjob(site, cluster, name, namespace, cid, pair, slots))
        steps.append(Step(cluster, tuple(objects), ("TrainJob", name), acceptance.nccl_timeout_sec, background))
    steps.append(drain("after"))
    bound, floor = acceptance.nccl_max_reduction_percent, acceptance.nccl_min_busbw_gb_per_sec

    def judge(results: Mapping[str, str]) -> Judgement:
        figures = []
        for step, what in ((1, "the baseline run"), (2, "the run under storage load")):
            busbw = _figure(results, f"{step}.busbw_gb_per_sec")
            if busbw is None:
                return False, f"{cluster}: " + _ran(results, step, what)
            transport = results.get(f"{step}.transport", "none")
            if transport == "socket":
                return False, f"{cluster}: {what} did not use InfiniBand: NCCL fell back to sockets (via NET/Socket)"
            if transport != "ib":
                return False, f"{cluster}: {what} did not show InfiniBand: NCCL's log has no channel via NET/IB"
            figures.append(busbw)
        written = _figure(results, "3.objects")
        if not written:
            return False, (f"{cluster}: the storage load wrote nothing under {load_uri}: warp did not run beside NCCL (its "
                           f"Job warp-load in {team_namespace(team)})")
        alone, loaded = figures
        if floor is not None and alone < floor:
            return False, (f"{cluster}: baseline bus bandwidth {alone:.1f} GB/s is below the floor of {floor:g} GB/s "
                           "(acceptance.nccl_min_busbw_gb_per_sec)")
        reduction = max(0.0, (alone - loaded) / alone * 100) if alone > 0 else 100.0
        if reduction > bound:
            return False, (f"{cluster}: bus bandwidth fell {reduction:.1f} % under storage load ({alone:.1f} -> {loaded:.1f} "
                           f"GB/s), above the bound of {bound:g} % (acceptance.nccl_max_reduction_percent)")
        return True, (f"{cluster}: bus bandwidth {alone:.1f} GB/s alone, {loaded:.1f} GB/s under storage load: "
                      f"{reduction:.1f} % reduction, within {bound:g} %")

    shown = f"reduction <= {bound:g} %" + (f", baseline >= {floor:g} GB/s" if floor is not None else "")
    return Criterion(1, cid, f"NCCL all_reduce across {pair[0]} and {pair[1]} over InfiniBand keeps its bandwidth under storage load",
                     tuple(steps), judge, shown, needs=(MPI_OPERATOR,))


def _privileged_namespace(name: str, cid: str) -> Manifest:
    """The NCCL run's own namespace, at the Pod Security level its MPI pods need (MPI_EXCEPTION), deleted with its step."""
    return {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {VERIFY_LABEL: _dns(cid), "pod-security.kubernetes.io/enforce": "privileged",
                       "pod-security.kubernetes.io/warn": "privileged"},
            "annotations": {"fab.internal/privileged-reason": MPI_REASON},
        },
    }


MPI_SSH_CONFIG = "nccl-ssh"
"""The ConfigMap of the NCCL run's ssh settings, in the run's namespace."""
NCCL_LOG = "/tmp/nccl.log"


def _mpi_ssh_config(namespace: str, cid: str) -> Manifest:
    """sshd's and ssh's settings for the MPI pods, as the MPI operator's base images set them (build/base/Dockerfile,
    sshd_config), so that the launcher reaches its workers whatever the image's own ssh configuration: the operator's key
    pair is the host key and the only credential, its read-only Secret mount passes (StrictModes no), and the launcher
    neither asks about nor records the workers' host keys (StrictHostKeyChecking no, UserKnownHostsFile /dev/null)."""
    sshd = "\n".join([
        f"Port {MPI_SSH_PORT}",
        f"HostKey {MPI_SSH_DIR}/id_rsa",
        f"PidFile {MPI_PRIVSEP_DIR}/sshd.pid",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        f"AuthorizedKeysFile {MPI_SSH_DIR}/authorized_keys",
        "PasswordAuthentication no",
        "UsePAM no",
        "",
    ])
    ssh = "\n".join([
        "Host *",
        f"    Port {MPI_SSH_PORT}",
        f"    IdentityFile {MPI_SSH_DIR}/id_rsa",
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "    LogLevel ERROR",
        "",
    ])
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(MPI_SSH_CONFIG, namespace, cid),
            "data": {"sshd_config": sshd, "ssh_config": ssh}}


def nccl_transport_script(log: str) -> list[str]:
    """Shell lines that report the transport NCCL used between the nodes, from its NCCL_DEBUG=INFO log: `socket` when any
    rank fell back to sockets (`Using network Socket`, a channel `via NET/Socket`), `ib` when the channels run over
    InfiniBand (`Using network IB`, `via NET/IB`), else `none`. `NET/IB` alone would also match the fallback's
    `NET/IB : No device found.`"""
    return [
        f"if grep -Eq 'Using network Socket|via NET/Socket' {log}; then transport=socket",
        f"elif grep -Eq 'Using network IB|via NET/IB' {log}; then transport=ib",
        "else transport=none; fi",
        'echo "FAB-RESULT transport=$transport"',
    ]


def _mpi_trainjob(site: Site, cluster: str, name: str, namespace: str, cid: str, nodes: list[str], slots: int) -> list[Manifest]:
    """A TrainJob of Kubeflow Trainer's MPI runtime and its TrainingRuntime (in the run's namespace): one launcher, a
    node on each of `nodes` with `slots` GPUs and the RDMA resource, NCCL settings from the cluster's `nccl` settings
    (components/gpu.py nccl_env, as the team namespaces' ConfigMap holds them). Trainer's MPI plugin makes the key pair
    (Secret `<name>-mpi-ssh-auth` at `sshAuthMountPath`) and the launcher's hostfile; ssh between them is configured by
    the step's ConfigMap (`_mpi_ssh_config`): the launcher's /etc/ssh/ssh_config, the nodes' sshd_config. Both pods'
    container is named `node`, which is where the plugin mounts the keys and hostfile."""
    acceptance = site.acceptance
    env = nccl_env(site.config.gpu[cluster])
    exported = " ".join(f"-x {key}" for key in sorted(env))
    processes = slots * len(nodes)
    copy_keys = (f"install -m 0600 {MPI_SSH_SECRET_DIR}/id_rsa {MPI_SSH_DIR}/id_rsa && "
                 f"install -m 0600 {MPI_SSH_SECRET_DIR}/authorized_keys {MPI_SSH_DIR}/authorized_keys")
    script = "\n".join([
        "set -o pipefail",
        copy_keys,
        (f"mpirun -np {processes} --map-by ppr:{slots}:node --bind-to none -x NCCL_DEBUG=INFO {exported} "
         f"/opt/nccl-tests/build/all_reduce_perf -b {acceptance.nccl_min_message_mib}M -e {acceptance.nccl_max_message_mib}M "
         f"-f 2 -g 1 2>&1 | tee {NCCL_LOG}"),
        "rc=$?",
        f"busbw=$(awk '/Avg bus bandwidth/ {{print $NF}}' {NCCL_LOG})",
        'echo "FAB-RESULT busbw_gb_per_sec=${busbw:-none}"',
        *nccl_transport_script(NCCL_LOG),
        "exit $rc",
    ])
    small = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    volumes, mounts = _scratch(("tmp", "/tmp"), ("sshd", MPI_PRIVSEP_DIR), ("ssh-keys", MPI_SSH_DIR))
    volumes.append({"name": "ssh-config", "configMap": {"name": MPI_SSH_CONFIG}})
    env_list = [{"name": k, "value": v} for k, v in sorted(env.items())]
    image = site.registry.image(versions.VERIFY_NCCL_IMAGE)
    launcher = {
        "name": "node", "image": image, "imagePullPolicy": "Always",
        "securityContext": MPI_EXCEPTION, "command": ["bash", "-c"], "args": [script],
        "env": [{"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"}, {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"}, *env_list],
        "resources": small,
        # ssh reads /etc/ssh/ssh_config whatever starts it (mpirun's rsh launcher, any MPI implementation).
        "volumeMounts": [*mounts, {"name": "ssh-config", "mountPath": "/etc/ssh/ssh_config", "subPath": "ssh_config",
                                   "readOnly": True}],
    }
    gpus = {"nvidia.com/gpu": str(slots), RDMA_RESOURCE: "1"}
    shm = {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    worker = {
        "name": "node", "image": image, "imagePullPolicy": "Always",
        "securityContext": MPI_EXCEPTION, "command": ["bash", "-c"],
        "args": [f"chmod 0755 {MPI_PRIVSEP_DIR} && {copy_keys} && exec /usr/sbin/sshd -De -f {MPI_SSH_CONFIG_DIR}/sshd_config"],
        "env": env_list,
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", **gpus}, "limits": {"cpu": "16", "memory": "64Gi", **gpus}},
        "volumeMounts": [*mounts, {"name": "shm", "mountPath": "/dev/shm"},
                         {"name": "ssh-config", "mountPath": MPI_SSH_CONFIG_DIR, "readOnly": True}],
    }
    worker_labels = {VERIFY_LABEL: _dns(cid), "fab.internal/verify-role": "nccl-worker"}

    def template(container: dict[str, Any], extra_volumes: list[dict[str, Any]], labels: dict[str, str], **placement: Any) -> dict[str, Any]:
        return {"metadata": {"labels": labels}, "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, **site.registry.pod_fields(),
            "containers": [container], "volumes": [*volumes, *extra_volumes], **placement,
        }}

    worker_placement = {
        "tolerations": [toleration("training")],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}
            ]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": worker_labels}, "topologyKey": "kubernetes.io/hostname"}
            ]},
        },
    }

    def replicated(job: str, pod: dict[str, Any], labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        return {"name": job, **extra, "template": {**({"metadata": {"labels": labels}} if labels else {}),
                                                   "spec": {"backoffLimit": 0, "template": pod}}}

    runtime = {
        "apiVersion": versions.TRAINER_API, "kind": "TrainingRuntime", "metadata": _meta(name, namespace, cid),
        "spec": {
            "mlPolicy": {"numNodes": len(nodes), "mpi": {
                "numProcPerNode": slots, "mpiImplementation": "OpenMPI", "runLauncherAsNode": False,
                "sshAuthMountPath": MPI_SSH_SECRET_DIR,
            }},
            "template": {"spec": {
                # Done when the launcher is (the nodes' sshd never exits); nothing is restarted.
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "failurePolicy": {"maxRestarts": 0},
                "replicatedJobs": [
                    # The TrainJob's numNodes sizes the `node` job, Trainer's ancestor step `trainer`.
                    replicated("node", template(worker, [shm], worker_labels, **worker_placement), {TRAINER_STEP_LABEL: "trainer"}),
                    # mpirun starts once every node's sshd is up (the first replicated job may depend on none).
                    replicated("launcher", template(launcher, [], {VERIFY_LABEL: _dns(cid)}, **_training_placement()),
                               dependsOn=[{"name": "node", "status": "Ready"}]),
                ],
            }},
        },
    }
    trainjob = {
        "apiVersion": versions.TRAINER_API, "kind": "TrainJob", "metadata": _meta(name, namespace, cid),
        "spec": {
            "runtimeRef": {"apiGroup": versions.TRAINER_API.split("/")[0], "kind": "TrainingRuntime", "name": name},
            "trainer": {"numNodes": len(nodes), "numProcPerNode": slots},
            "activeDeadlineSeconds": acceptance.nccl_timeout_sec,
        },
    }
    return [runtime, trainjob]


def _warp(site: Site, cluster: str, cid: str, team: str) -> list[Manifest]:
    """warp writing checkpoint-sized objects to the team's checkpoint prefix from the training nodes' side, with the
    team's own keys: it runs in the team's namespace because only that namespace holds them (no key of wider reach is
    made for the check), and it can write nowhere but the team's prefixes."""
    acceptance, store = site.acceptance, site.config.storage.object_store
    namespace = team_namespace(team)
    endpoint = s3_endpoint_internal(site.config.domain, store).split("://", 1)[1]
    volumes, mounts = _scratch(("tmp", "/tmp"))
    env = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": s3_secret(TRAINING), "key": key}}} for key in (S3_ACCESS_KEY, S3_SECRET_KEY)
    ]
    objects: list[Manifest] = []
    if site.ca:
        objects.append(_probe_config(site, "warp-load-ca", namespace, cid))
        volumes.append({"name": "ca", "configMap": {"name": "warp-load-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        mounts.append({"name": "ca", "mountPath": "/etc/fab-ca", "readOnly": True})
        env.append({"name": "SSL_CERT_FILE", "value": "/etc/fab-ca/ca.crt"})
    container = restricted_container(
        "warp", site.registry.image(versions.VERIFY_WARP_IMAGE), PROBE_USER,
        args=["put", f"--host={endpoint}", *(["--tls"] if store.tls else []), f"--region={site.config.minio.region}",
              f"--access-key=$({S3_ACCESS_KEY})", f"--secret-key=$({S3_SECRET_KEY})",
              f"--bucket={site.bucket('checkpoints')}", f"--prefix={team}/{WARP_FOLDER}", "--noclear",
              f"--obj.size={acceptance.warp_object_size_mib}MiB", f"--concurrent={acceptance.warp_concurrency}",
              f"--duration={acceptance.warp_duration_sec}s", "--benchdata=/tmp/warp"],
        workingDir="/tmp", env=env, volumeMounts=mounts,
        resources={"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "8", "memory": "8Gi"}},
    )
    pod = {"automountServiceAccountToken": False, "securityContext": restricted_pod_security_context(),
           **site.registry.pod_fields(), "containers": [container], "volumes": volumes, **_training_placement()}
    objects.append(_job("warp-load", namespace, cid, pod, acceptance.warp_duration_sec + 300, **_queued()))
    return objects


def s3_roundtrip(site: Site, cluster: str) -> Criterion | tuple[str, str]:
    """Write, read back and delete an object under the team's checkpoint prefix from a pod on the training nodes, with
    the team's `s3-training` keys and the internal endpoint they name."""
    cid = _dns("01-s3-readwrite", cluster)
    team = site.team()
    uri = team_prefix(site.bucket("checkpoints"), team)
    if skipped := _no_training_nodes(site, cluster, cid):
        return skipped
    # The team's Secret is in its namespace only: the probe runs there (labelled, deleted with the step).
    step = _team_probe_step(site, cluster, cid, "s3-readwrite", ["s3-roundtrip", uri], team)

    internal = str(site.config.storage.s3.internal_vip)

    def judge(results: Mapping[str, str]) -> Judgement:
        if "0.put_status" not in results:
            return False, f"{cluster}: " + _ran(results, 0, "the S3 probe")
        if results.get("0.address") != internal:
            return False, (f"{cluster}: the S3 endpoint of team {team}'s Secret resolved to {results.get('0.address')}, not the "
                           f"internal VIP {internal}")
        put, get, match = results["0.put_status"], results.get("0.get_status"), results.get("0.match")
        if put != "200" or get != "200" or match != "true":
            return False, f"{cluster}: writing {uri} as team {team} answered {put}, reading it back {get} (same bytes: {match})"
        return True, f"{cluster}: team {team} wrote and read back 1 MiB under {uri} over the internal S3 endpoint"

    return Criterion(1, cid, f"a pod on {cluster}'s training nodes writes and reads AIStor with team {team}'s keys",
                     (step,), judge)


def _flow_address(site: Site, flow_name: str) -> tuple[str, int] | str:
    """The address a flow's clients dial, or why no probe can stand for the flow's clients."""
    config = site.config
    flow = config.flow_table()[flow_name]
    if flow.target == "kube-apiserver":
        return (f"it admits only {flow.from_namespace} pods to API servers, as egress on those pods: a probe pod elsewhere "
                "is not subject to it (phase 05 checks MultiKueue's own connection)")
    if flow.from_namespace or flow.from_labels:
        return f"it admits only pods of {flow.from_namespace or 'any namespace'} labelled {flow.from_labels}; a probe is neither"
    addresses = {S3_FLOW: (str(config.storage.s3.internal_vip), config.storage.object_store.s3_port),
                 POLARIS_FLOW: (str(config.storage.polaris.vip), config.storage.polaris.port)}
    if config.inference is not None:
        addresses[INFERENCE_FLOW] = (str(config.inference.gateway.vip), flow.port)
    if flow_name in addresses:
        return addresses[flow_name]
    return "the config names no address for its destination (only the s3, polaris and inference endpoints are probed)"


def flow_probes(site: Site) -> list[Criterion | tuple[str, str]]:
    """Every flow of the flow table from each of its source clusters: a TCP handshake with its endpoint completes."""
    out: list[Criterion | tuple[str, str]] = []
    for flow_name, flow in sorted(site.config.flow_table().items()):
        cid = _dns("01-flow", flow_name)
        sources = [s for s in flow.sources if s in site.config.clusters]
        if not sources:
            out.append((cid, "its clients are outside the site's clusters (world or other sites' ranges)"))
            continue
        address = _flow_address(site, flow_name)
        if isinstance(address, str):
            out.append((cid, address))
            continue
        host, port = address
        steps = tuple(
            _probe_step(site, source, cid, _dns("flow", flow_name, source), ["tcp", host, str(port), str(PROBE_TIMEOUT_SEC)])
            for source in sorted(sources)
        )
        out.append(Criterion(1, cid, f"flow {flow_name} admits {', '.join(sorted(sources))} to {host}:{port}", steps,
                             _connect_judge(f"{host}:{port}", sorted(sources), expect="ok")))
    return out


def denied_probes(site: Site) -> list[Criterion]:
    """A sample of what no flow admits, each a pod port that listens: compute to each GPU cluster's ClusterMesh API
    server, and each GPU cluster to the storage cluster's (ClusterMesh admits the remote nodes, never their pods)."""
    storage = site.config.keys_with_role("storage")[0]
    pairs = [(site.compute(), gpu) for gpu in site.gpu_clusters()] + [(gpu, storage) for gpu in site.gpu_clusters()]
    out = []
    for source, target in pairs:
        cid = _dns("01-denied", source, "to", target)
        host, port = str(site.config.clusters[target].clustermesh_vip), 2379
        step = _probe_step(site, source, cid, _dns("denied", target), ["tcp", host, str(port), str(PROBE_TIMEOUT_SEC)])
        out.append(Criterion(1, cid, f"a pod on {source} cannot reach {target}'s ClusterMesh API server ({host}:{port})",
                             (step,), _connect_judge(f"{host}:{port}", [source], expect="timeout")))
    return out


def _connect_judge(target: str, sources: list[str], expect: str) -> Callable[[Mapping[str, str]], Judgement]:
    """ok: each source's handshake completed; timeout: each source's packets were dropped (a reset would mean they
    arrived)."""

    def judge(results: Mapping[str, str]) -> Judgement:
        wrong = [f"{source} {results.get(f'{i}.connect', 'no result')}" for i, source in enumerate(sources)
                 if results.get(f"{i}.connect") != expect]
        if wrong:
            allowed = "connect" if expect == "ok" else "be dropped (timeout)"
            return False, f"{target} should {allowed} from every source: " + ", ".join(wrong)
        verb = "reached" if expect == "ok" else "dropped"
        return True, f"{target} {verb} from {', '.join(sources)}"

    return judge


# --- phase 02: inference -------------------------------------------------------------------------------------------

GATEWAY_CLIENT_SECRET_KEY = "client_secret"


def gateway_client_secret(team: str) -> str:
    """The Secret, in the acceptance namespace on compute, that holds the team's gateway client secret for the check."""
    return names.TEAM_GATEWAY_CLIENT(team)


def _needs_client(site: Site, team: str) -> str:
    return (f"the Secret {gateway_client_secret(team)} in {site.namespace} on {site.compute()} with key "
            f"{GATEWAY_CLIENT_SECRET_KEY}: client {names.TEAM_GATEWAY_CLIENT(team)}'s secret from Keycloak (realm "
            f"{site.config.identity.realm}), which the program never copies out of Keycloak")


def _client_env(site: Site, team: str) -> list[dict[str, Any]]:
    return [
        {"name": "TOKEN_URL", "value": site.token_url()},
        {"name": "CLIENT_ID", "value": names.TEAM_GATEWAY_CLIENT(team)},
        {"name": "CLIENT_SECRET", "valueFrom": {"secretKeyRef": {"name": gateway_client_secret(team), "key": GATEWAY_CLIENT_SECRET_KEY}}},
    ]


def _first_model(site: Site) -> str:
    assert site.config.inference is not None
    return min(site.config.inference.models)


def served_name(site: Site, model: str) -> str:
    assert site.config.inference is not None
    return site.config.inference.models[model].served_name or model


def phase_02(site: Site) -> list[Criterion | tuple[str, str]]:
    ids = ("02-inference-call", "02-inference-unauthenticated", "02-inference-rate-limit")
    if site.config.inference is None:
        return [(cid, "the site serves no model (no `inference` section): phase 02 adds it") for cid in ids]
    model = _first_model(site)
    return [inference_call(site, model), inference_unauthenticated(site, model), inference_rate_limit(site, model)]


def inference_call(site: Site, model: str, cid: str = "02-inference-call", phase: int = 2) -> Criterion:
    """From a compute pod: a token of the team's gateway client, then a chat completion on the model's URL."""
    team, url = site.team(), site.gateway_url(model)
    step = _probe_step(site, site.compute(), cid, "inference-call", ["chat", url, served_name(site, model)], env=_client_env(site, team))

    def judge(results: Mapping[str, str]) -> Judgement:
        token, chat = results.get("0.token_status"), results.get("0.chat_status")
        if token is None:
            return False, _ran(results, 0, "the inference probe")
        if token != "200":
            return False, f"Keycloak refused team {team}'s client credentials ({token}) at {site.token_url()}"
        if chat != "200":
            return False, f"{url}/chat/completions answered {chat} to team {team}'s token; 200 expected"
        return True, f"team {team}'s token was accepted and {model} answered at {url}"

    return Criterion(phase, cid, f"a compute pod calls {model} through {url} with team {team}'s token", (step,), judge,
                     needs=(_needs_client(site, team),))


def inference_unauthenticated(site: Site, model: str) -> Criterion:
    cid, url = "02-inference-unauthenticated", site.gateway_url(model)
    step = _probe_step(site, site.compute(), cid, "inference-anonymous", ["chat-anonymous", url, served_name(site, model)])

    def judge(results: Mapping[str, str]) -> Judgement:
        chat = results.get("0.chat_status")
        if chat is None:
            return False, _ran(results, 0, "the inference probe")
        if chat != "401":
            return False, f"{url}/chat/completions answered {chat} without a token; 401 expected"
        return True, f"{url} refused a call without a token (401)"

    return Criterion(2, cid, f"the gateway refuses a call to {model} without a token", (step,), judge, "status == 401")


def inference_rate_limit(site: Site, model: str) -> Criterion:
    """The team's requests per minute, and a tenth more (at least 10), at once: some are limited (429)."""
    inference = site.config.inference
    assert inference is not None
    cid, team, url = "02-inference-rate-limit", site.team(), site.gateway_url(model)
    rate = inference.team_requests_per_minute.get(team, inference.requests_per_minute)
    burst = rate + max(10, math.ceil(rate / 10))
    step = _probe_step(site, site.compute(), cid, "inference-burst", ["burst", url, str(burst)], env=_client_env(site, team))

    def judge(results: Mapping[str, str]) -> Judgement:
        ok, limited, other = (_figure(results, f"0.{k}") for k in ("ok", "limited", "other"))
        if ok is None or limited is None or other is None:
            return False, _ran(results, 0, "the burst probe")
        if results.get("0.token_status") != "200":
            return False, f"Keycloak refused team {team}'s client credentials ({results.get('0.token_status')})"
        if limited == 0:
            return False, f"{burst} requests at once by team {team}: none limited (429); its rate is {rate} a minute"
        if ok > rate:
            return False, f"{int(ok)} of {burst} requests by team {team} were answered; its rate is {rate} a minute"
        return True, f"{int(ok)} answered, {int(limited)} limited (429) of {burst} requests by team {team} (rate {rate} a minute)"

    return Criterion(2, cid, f"team {team} is limited above {rate} requests a minute to {model}", (step,), judge,
                     f"answered <= {rate} a minute, some 429", needs=(_needs_client(site, team),))


# --- phase 03: training pipeline -----------------------------------------------------------------------------------

def phase_03(site: Site) -> list[Criterion | tuple[str, str]]:
    ids = ("03-model-published", "03-model-serves")
    run = site.acceptance.serving_loop
    if site.config.inference is None:
        return [(cid, "the site serves no model (no `inference` section)") for cid in ids]
    if run is None:
        return [(cid, "acceptance.serving_loop names no run of the serving-loop DAG to verify (docs/acceptance.md, phase 03)")
                for cid in ids]
    return [model_published(site), inference_call(site, run.model, "03-model-serves", 3)]


def model_published(site: Site) -> Criterion | tuple[str, str]:
    """The run's `metadata.json` in the models bucket: read with the team's keys from a GPU node, pinned to a snapshot."""
    run = site.acceptance.serving_loop
    assert run is not None and site.config.inference is not None
    cid = "03-model-published"
    source = site.config.inference.models[run.model].source
    uri = f"s3://{site.bucket('models')}/{source}{run.revision}/metadata.json"
    cluster = site.config.inference.cluster
    if skipped := _no_training_nodes(site, cluster, cid):
        return skipped
    step = _team_probe_step(site, cluster, cid, "model-published", ["s3-metadata", uri], run.team)

    def judge(results: Mapping[str, str]) -> Judgement:
        status = results.get("0.get_status")
        if status is None:
            return False, _ran(results, 0, "the metadata probe")
        if status != "200":
            return False, f"{uri} answered {status} to team {run.team}'s keys: the run did not publish (metadata.json is written last)"
        snapshot = results.get("0.snapshot_id", "")
        if not snapshot.isdigit() or results.get("0.has_metrics") != "true":
            return False, f"{uri} names snapshot {snapshot or 'none'} and metrics {results.get('0.has_metrics')}: a published model pins both"
        return True, f"{run.model} revision {run.revision} was trained from snapshot {snapshot} and published with its metrics"

    return Criterion(3, cid, f"the serving loop published {run.model} revision {run.revision} with its data pin", (step,), judge)


# --- phase 04: operations ------------------------------------------------------------------------------------------

def phase_04(site: Site) -> list[Criterion | tuple[str, str]]:
    out: list[Criterion | tuple[str, str]] = [s3_team_isolation(site)]
    out.extend(team_rbac(site, cluster) for cluster in site.config.kueue_clusters())
    if site.config.observability is None:
        out.extend((_dns("04-metrics", c), "the site deploys no metrics stack (no `observability` section)")
                   for c in sorted(site.config.clusters))
    else:
        out.extend(metrics_present(site, c) for c in sorted(site.config.clusters))
    out.append(profile_in_force(site))
    out.append(vllm_recovery(site))
    return out


def s3_team_isolation(site: Site) -> Criterion | tuple[str, str]:
    cid = "04-s3-team-isolation"
    other = site.other_team()
    if other is None:
        return (cid, "the site has one team: there is no other team's prefix to be refused")
    team, cluster = site.team(), site.gpu_clusters()[0]
    uri = team_prefix(site.bucket("checkpoints"), other)
    if skipped := _no_training_nodes(site, cluster, cid):
        return skipped
    step = _team_probe_step(site, cluster, cid, "s3-foreign", ["s3-foreign", uri], team)

    def judge(results: Mapping[str, str]) -> Judgement:
        statuses = {op: results.get(f"0.{op}_status") for op in ("put", "list", "get")}
        if None in statuses.values():
            return False, _ran(results, 0, "the S3 probe")
        allowed = [f"{op} {status}" for op, status in statuses.items() if status != "403"]
        if allowed:
            return False, f"team {team}'s keys under {uri} (team {other}'s): " + ", ".join(allowed) + "; 403 expected for each"
        return True, f"team {team}'s keys were refused (403) writing, listing and reading team {other}'s {uri}"

    return Criterion(4, cid, f"team {team}'s keys cannot touch team {other}'s checkpoints", (step,), judge, "403 for put, list, get")


RBAC_CHECKS = "rbac-checks"


def team_rbac(site: Site, cluster: str) -> Criterion:
    """What the team's Keycloak group may do on the cluster, asked of the API server as SubjectAccessReviews by a Job
    whose ServiceAccount may create those reviews and nothing else (a ClusterRole bound for the step only)."""
    cid = _dns("04-team-rbac", cluster)
    team, other = site.team(), site.other_team()
    group = f"{site.config.training.group_prefix}{names.TEAM_GROUP(team)}"
    questions = [("own-jobs", "create", "batch", "jobs", team_namespace(team), True),
                 ("own-secrets", "get", "", "secrets", team_namespace(team), False),
                 ("own-workloads", "create", "kueue.x-k8s.io", "workloads", team_namespace(team), False)]
    if other is not None:
        questions += [("other-jobs", "create", "batch", "jobs", team_namespace(other), False),
                      ("other-workloads", "create", "kueue.x-k8s.io", "workloads", team_namespace(other), False)]
    lines = ["set -eu"]
    for key, verb, api_group, resource, namespace, _ in questions:
        review = ('{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"fab-verify-probe",'
                  f'"groups":["{group}"],"resourceAttributes":{{"verb":"{verb}","group":"{api_group}","resource":"{resource}",'
                  f'"namespace":"{namespace}"}}}}}}')
        lines.append(f"echo \"FAB-RESULT {key}=$(echo '{review}' | kubectl create -f - -o jsonpath='{{.status.allowed}}')\"")
    name, account = "rbac-checks", _dns("fab-verify", cluster, "rbac")
    rbac = _account(site, account, cid, [
        (None, [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]),
    ])
    job = _job(name, site.namespace, cid, _kubectl_pod(site, account, "\n".join(lines)), site.acceptance.timeout_sec)
    expected = {key: str(allowed).lower() for key, *_, allowed in questions}

    def judge(results: Mapping[str, str]) -> Judgement:
        if "0.own-jobs" not in results:
            return False, f"{cluster}: " + _ran(results, 0, "the access review")
        wrong = [f"{key} {results.get(f'0.{key}')} (expected {want})" for key, want in expected.items() if results.get(f"0.{key}") != want]
        if wrong:
            return False, f"{cluster}: group {group}: " + ", ".join(wrong)
        return True, f"{cluster}: group {group} may create Jobs in {team_namespace(team)} only, and read no Secrets"

    return Criterion(4, cid, f"on {cluster}, team {team}'s group runs work in its own namespace only",
                     (Step(cluster, (*rbac, job), ("Job", name), site.acceptance.timeout_sec),), judge)


def _kubectl_pod(site: Site, account: str, script: str) -> dict[str, Any]:
    """A restricted pod running a bash script with kubectl as `account` (its token is the only one it needs)."""
    volumes, mounts = _scratch(("tmp", "/tmp"), ("kube", "/home/kubectl"))
    container = restricted_container("kubectl", site.registry.image(versions.KUBECTL_IMAGE), KUBECTL_USER,
                                     command=["/bin/bash", "-c"], args=[script], env=[{"name": "HOME", "value": "/home/kubectl"}],
                                     volumeMounts=mounts)
    return {"serviceAccountName": account, "automountServiceAccountToken": True,
            "securityContext": restricted_pod_security_context(), **site.registry.pod_fields(), "containers": [container],
            "volumes": volumes}


def prometheus_url() -> str:
    return PROMETHEUS_URL


def monitor_up(cluster_name: str, monitor: Manifest) -> str:
    """The `up` series of a ServiceMonitor's or PodMonitor's targets on one cluster. Every Prometheus of the site labels
    every scrape with `cluster` (`<site>-<key>`, components/observability.py scrapeClasses): matched, a Prometheus that
    also holds other clusters' series (compute's, while metrics is in-cluster) answers for this cluster only. The
    Prometheus operator names a PodMonitor's targets' job `<namespace>/<name>`; a ServiceMonitor's job is the name of the
    Service it found, which the monitor does not name, so its targets are matched by their endpoint (the port names)."""
    meta, spec = monitor["metadata"], monitor["spec"]
    matchers = [f'cluster="{cluster_name}"', f'namespace="{target_namespace(monitor)}"']
    endpoints = spec.get("podMetricsEndpoints") or spec.get("endpoints") or []
    ports = sorted({e["port"] for e in endpoints if "port" in e})
    if monitor["kind"] == "PodMonitor" and not spec.get("jobLabel"):
        matchers.append(f'job="{meta["namespace"]}/{meta["name"]}"')
    elif ports and len(ports) == len(endpoints):
        matchers.append(f'endpoint=~"{"|".join(ports)}"')
    return "up{" + ", ".join(matchers) + "}"


def metric_queries(site: Site, cluster: str) -> dict[str, tuple[str, int]]:
    """name -> (PromQL, the least value that passes) for what `cluster`'s Prometheus really scrapes there: for each of its
    ServiceMonitors and PodMonitors (components/monitors.py scrape_targets, by the monitor's name) its targets up, and on
    GPU clusters one DCGM series per configured GPU (the GPU Operator's DCGM exporter), each on the cluster's label."""
    from components.monitors import metrics_scopes, scrape_targets

    name = site.config.cluster_name(cluster)
    scope = metrics_scopes(site.config)[cluster]
    queries: dict[str, tuple[str, int]] = {}
    if scope.gpu_nodes:
        queries["dcgm_gpus"] = (f'count(DCGM_FI_DEV_GPU_UTIL{{cluster="{name}"}})', sum(scope.gpu_nodes.values()))
    for monitor in scrape_targets(scope):
        queries[monitor["metadata"]["name"]] = (f"count({monitor_up(name, monitor)} == 1)", 1)
    return queries


def metrics_present(site: Site, cluster: str) -> Criterion:
    cid = _dns("04-metrics", cluster)
    queries = metric_queries(site, cluster)
    step = _probe_step(site, cluster, cid, "metrics", ["prom", prometheus_url(), *(f"{k}={q}" for k, (q, _) in sorted(queries.items()))])

    def judge(results: Mapping[str, str]) -> Judgement:
        if not any(k.startswith("0.") and k != "0.succeeded" for k in results):
            return False, f"{cluster}: " + _ran(results, 0, "the Prometheus query")
        short = [f"{k} {results.get(f'0.{k}', 'none')} (at least {least})" for k, (_, least) in sorted(queries.items())
                 if (_figure(results, f"0.{k}") or 0) < least]
        if short:
            return False, f"{cluster}: {prometheus_url()} lacks series: " + ", ".join(short)
        return True, f"{cluster}: " + ", ".join(f"{k} {results[f'0.{k}']}" for k in sorted(queries))

    return Criterion(4, cid, f"{cluster}'s Prometheus holds its components' metrics", (step,), judge,
                     ", ".join(f"{k} >= {least}" for k, (_, least) in sorted(queries.items())))


def profile_in_force(site: Site) -> Criterion | tuple[str, str]:
    """The GPU quota of every team's ClusterQueue on each GPU cluster is what the profile in force gives it: the active
    profile's, or with a schedule, one of the scheduled profiles' (a switch is `pulumi up` or a CronJob; re-run the check
    after switching to see the other)."""
    cid = "04-profile-in-force"
    config = site.config
    if not config.profiles:
        return (cid, "the site has no profiles")
    candidates = sorted(config.profile_schedule.switches) if config.profile_schedule else [config.active_profile]
    clusters = site.gpu_clusters()
    teams = sorted(config.teams)

    def vector(profile: str | None) -> dict[str, str]:
        quotas = config.team_quotas(profile)
        return {f"{c}.{t}": str(quotas.get(t, {}).get(c).gpus if c in quotas.get(t, {}) else 0) for c in clusters for t in teams}

    expected = {profile or "base": vector(profile) for profile in candidates}
    steps = []
    for cluster in clusters:
        lines = ["set -eu"]
        for team in teams:
            queue = team_namespace(team)
            path = "{.spec.resourceGroups[0].flavors[*].resources[?(@.name==\"nvidia.com/gpu\")].nominalQuota}"
            lines.append(f"q=$(kubectl get clusterqueue {queue} -o jsonpath='{path}' | tr ' ' '+'); "
                         f"echo \"FAB-RESULT {team}=$(( ${{q:-0}} ))\"")
        account = _dns("fab-verify", "queues")
        rbac = _account(site, account, cid, [
            (None, [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get"],
                     "resourceNames": [team_namespace(t) for t in teams]}]),
        ])
        job = _job("queue-quotas", site.namespace, cid, _kubectl_pod(site, account, "\n".join(lines)),
                   site.acceptance.timeout_sec)
        steps.append(Step(cluster, (*rbac, job), ("Job", "queue-quotas"), site.acceptance.timeout_sec))

    def judge(results: Mapping[str, str]) -> Judgement:
        found = {f"{c}.{t}": results.get(f"{i}.{t}", "none") for i, c in enumerate(clusters) for t in teams}
        matching = [name for name, want in expected.items() if want == found]
        shown = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
        if not matching:
            return False, f"GPU quotas in force ({shown}) are those of no profile among {', '.join(expected)}"
        return True, f"GPU quotas in force are profile {matching[0]}'s ({shown})"

    return Criterion(4, cid, "the teams' GPU quotas are the profile in force", tuple(steps), judge,
                     "quotas == profile " + " or ".join(expected))


def vllm_recovery(site: Site) -> Criterion | tuple[str, str]:
    """Evict one vLLM pod of the first model (an eviction honours the PodDisruptionBudget) and wait until the Deployment
    has all its replicas available again, recording the fewest available meanwhile. The Job's ServiceAccount holds a
    Role in the inference namespace for exactly that (pods: list, get, evict; the Deployment and PDB: get), bound for
    the step only."""
    cid = "04-vllm-recovery"
    inference = site.config.inference
    if inference is None:
        return (cid, "the site serves no model (no `inference` section)")
    model = _first_model(site)
    deployment = names.VLLM(model)
    selector = ",".join(f"{k}={v}" for k, v in sorted(stable_labels(model).items()))
    ns, timeout = INFERENCE_NAMESPACE, site.acceptance.recovery_timeout_sec
    script = "\n".join([
        "set -eu",
        f"want=$(kubectl -n {ns} get deployment {deployment} -o jsonpath='{{.spec.replicas}}')",
        f"victim=$(kubectl -n {ns} get pods -l {selector} -o jsonpath='{{.items[0].metadata.name}}')",
        "echo \"FAB-RESULT replicas=$want\"",
        (f"echo '{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"'$victim'\",\"namespace\":\"{ns}\"}}}}' "
         f"| kubectl create --raw /api/v1/namespaces/{ns}/pods/$victim/eviction -f - >/dev/null"),
        "start=$(date +%s); fewest=$want",
        "while true; do",
        f"  avail=$(kubectl -n {ns} get deployment {deployment} -o jsonpath='{{.status.availableReplicas}}'); avail=${{avail:-0}}",
        "  [ \"$avail\" -lt \"$fewest\" ] && fewest=$avail",
        f"  if ! kubectl -n {ns} get pod \"$victim\" >/dev/null 2>&1 && [ \"$avail\" -ge \"$want\" ]; then break; fi",
        (f"  if [ $(( $(date +%s) - start )) -ge {timeout} ]; then echo 'FAB-RESULT recovered=false'; "
         "echo \"FAB-RESULT fewest_available=$fewest\"; exit 0; fi"),
        "  sleep 5",
        "done",
        "echo 'FAB-RESULT recovered=true'",
        "echo \"FAB-RESULT seconds=$(( $(date +%s) - start ))\"",
        "echo \"FAB-RESULT fewest_available=$fewest\"",
    ])
    account = _dns("fab-verify", "vllm", "recovery")
    rbac = _account(site, account, cid, [(ns, [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"], "resourceNames": [deployment]},
    ])])
    job = _job("vllm-recovery", site.namespace, cid, _kubectl_pod(site, account, script), timeout + 120)
    # The PodDisruptionBudget of every model allows one replica down (components/serving.py disruption_budget).
    replicas = site.config.model_capacity()[model].replicas
    floor = replicas - 1

    def judge(results: Mapping[str, str]) -> Judgement:
        if "0.recovered" not in results:
            return False, _ran(results, 0, "the recovery probe")
        fewest = _figure(results, "0.fewest_available")
        if results["0.recovered"] != "true":
            return False, f"{deployment} did not have its replicas available again within {timeout} s of the eviction"
        if fewest is None or fewest < floor:
            return False, f"{deployment} fell to {results.get('0.fewest_available')} available replicas; its budget keeps {floor}"
        return True, f"{deployment} recovered in {results.get('0.seconds')} s, never below {int(fewest)} available (budget {floor})"

    return Criterion(4, cid, f"an evicted {model} vLLM pod is replaced within its disruption budget",
                     (Step(inference.cluster, (*rbac, job), ("Job", "vllm-recovery"), timeout + 180),), judge,
                     f"available >= {floor}, recovered within {timeout} s")


# --- phase 05: scale-out -------------------------------------------------------------------------------------------

def phase_05(site: Site) -> list[Criterion | tuple[str, str]]:
    return [multikueue_dispatch(site)]


def multikueue_dispatch(site: Site) -> Criterion | tuple[str, str]:
    """A Job submitted on the manager as the submission contract says (the team's namespace and LocalQueue) is admitted
    and placed on a worker; a checker reads where (its Workload's `status.clusterName`) and the contract Airflow holds."""
    cid = "05-multikueue-dispatch"
    config = site.config
    multikueue = config.training.multikueue
    if not multikueue.enabled:
        return (cid, "MultiKueue is off (training.multikueue.enabled)")
    quotas = config.team_quotas()
    with_quota = [t for t, q in quotas.items() if any(v.gpus > 0 for v in q.values())]
    team = site.acceptance.team if site.acceptance.team in with_quota else (with_quota[0] if with_quota else None)
    if team is None:
        return (cid, "no team has a GPU quota to admit the job with")
    manager, namespace, workers = config.multikueue_manager(), team_namespace(team), sorted(multikueue.workers)
    submitted = "multikueue-probe"
    container = restricted_container("probe", site.registry.image(versions.VERIFY_PROBE_IMAGE), PROBE_USER,
                                     command=["python", "-c", "print('FAB-RESULT ran=true')"],
                                     volumeMounts=_scratch(("tmp", "/tmp"))[1])
    pod = {"automountServiceAccountToken": False, "securityContext": restricted_pod_security_context(),
           **site.registry.pod_fields(), "containers": [container], "volumes": _scratch(("tmp", "/tmp"))[0],
           **_training_placement()}
    # Submitted the way Airflow submits (components/training_submission.py example_job): suspended for Kueue, queue and priority labels.
    job = _job(submitted, namespace, cid, pod, site.acceptance.timeout_sec,
               labels={QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}, suspend=True)
    account = _dns("fab-verify", "multikueue")
    path = '{.data.submission\\.json}'
    script = "\n".join([
        "set -eu",
        f"for i in $(seq 1 {site.acceptance.timeout_sec // 5}); do",
        (f"  cluster=$(kubectl -n {namespace} get workloads -o jsonpath="
         f"'{{range .items[?(@.metadata.ownerReferences[0].name==\"{submitted}\")]}}{{.status.clusterName}}{{end}}')"),
        "  [ -n \"$cluster\" ] && break; sleep 5",
        "done",
        "echo \"FAB-RESULT worker=${cluster:-none}\"",
        f"kubectl -n {AIRFLOW_NAMESPACE} get configmap {TRAINING_SUBMISSION_CONFIG_MAP} -o jsonpath='{path}' > /tmp/submission.json",
        # The contract is indented JSON: on one line without blanks, the team's entry is `"<team>":{...}` (no nesting).
        "tr -d ' \\n' < /tmp/submission.json > /tmp/contract",
        *(f"echo \"FAB-RESULT {key}=$(sed -n 's/.*\"{team}\":{{[^}}]*\"{key}\":\"\\([^\"]*\\)\".*/\\1/p' /tmp/contract)\""
          for key in ("namespace", "local_queue")),
    ])
    rbac = _account(site, account, cid, [
        (namespace, [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]}]),
        (AIRFLOW_NAMESPACE, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                              "resourceNames": [TRAINING_SUBMISSION_CONFIG_MAP]}]),
    ])
    checker = _job("multikueue-check", site.namespace, cid, _kubectl_pod(site, account, script), site.acceptance.timeout_sec + 60)
    step = Step(manager, (job, *rbac, checker), ("Job", "multikueue-check"), site.acceptance.timeout_sec + 120, (submitted,))

    def judge(results: Mapping[str, str]) -> Judgement:
        worker = results.get("0.worker")
        if worker is None:
            return False, _ran(results, 0, "the MultiKueue checker")
        if worker not in workers:
            return False, f"team {team}'s job was placed on {worker}; MultiKueue's workers are {', '.join(workers)}"
        contract = (results.get("0.namespace"), results.get("0.local_queue"))
        if contract != (namespace, LOCAL_QUEUE):
            return False, (f"the submission contract gives team {team} namespace {contract[0] or 'none'} and LocalQueue "
                           f"{contract[1] or 'none'}; {namespace} and {LOCAL_QUEUE} expected")
        return True, f"team {team}'s job, submitted to {namespace}/{LOCAL_QUEUE} on {manager}, ran on worker {worker}"

    return Criterion(5, cid, f"a job submitted to {namespace}/{LOCAL_QUEUE} on {manager} lands on a MultiKueue worker", (step,), judge,
                     f"worker in {', '.join(workers)}")


PHASE_BUILDERS: dict[int, Callable[[Site], list[Criterion | tuple[str, str]]]] = {
    1: phase_01, 2: phase_02, 3: phase_03, 4: phase_04, 5: phase_05,
}

