"""Phase 01's NCCL check: all_reduce_perf across two training nodes over InfiniBand as a TrainJob of Kubeflow Trainer's
MPI runtime, alone and then while warp writes to AIStor with a team's keys, its bandwidth judged against the bound."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components import versions
from components.constants import S3_ACCESS_KEY, S3_SECRET_KEY, s3_secret
from components.data_access import TRAINING, s3_endpoint_internal, team_prefix
from components.gpu import RDMA_RESOURCE, nccl_env, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.runtimes import TRAINER, TRAINER_STEP_LABEL, installed_runtimes
from components.kueue import team_namespace
from fabctl.verify.criteria.blocks import (
    PROBE_USER,
    VERIFY_LABEL,
    Site,
    _dns,
    _figure,
    _job,
    _meta,
    _probe_config,
    _queued,
    _ran,
    _scratch,
    _team_probe_step,
    _training_placement,
)
from fabctl.verify.model import Criterion, Judgement, Manifest, Step

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
