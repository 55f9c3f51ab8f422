"""Phase 01's NCCL check: all_reduce_perf across two training nodes over InfiniBand, launched with mpirun over ssh from
built-in kinds only (a headless Service, an Indexed Job of workers running sshd, a launcher Job), alone and then while
warp writes to AIStor with a team's keys; the bus bandwidth at its largest message is judged against a published floor
(nccl_floors.py) and the reduction under load against the bound."""

from __future__ import annotations

from collections.abc import Mapping

from components import versions
from components.constants import S3_ACCESS_KEY, S3_SECRET_KEY
from components.data_access import s3_endpoint_internal, team_prefix
from components.gpu import RDMA_RESOURCE, nccl_env, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import team_namespace
from fabctl.verify.criteria.blocks import (
    PROBE_USER,
    VERIFY_LABEL,
    Site,
    _dns,
    _figure,
    _job,
    _meta,
    _queued,
    _ran,
    _scratch,
    _team_s3_keys_and_ca,
    _team_probe_step,
    _training_placement,
)
from fabctl.verify.criteria.nccl_floors import floor_for, interconnect
from fabctl.verify.model import Criterion, GENERATE_ANNOTATION, Judgement, Manifest, SSH_KEY, SSH_KEYPAIR, Step

MPI_SSH_SECRET = "nccl-ssh-key"
"""The run's key pair: a Secret of the run's namespace, empty as rendered, filled by the runner when it applies it."""
MPI_SSH_SECRET_DIR = "/etc/fab-mpi-ssh"
"""Where the MPI pods mount the key pair (mode 0400; files of a Secret volume are links into a directory ssh does not
own, so each pod copies what it needs to MPI_SSH_DIR first)."""
MPI_SSH_DIR = "/root/.ssh"
"""Where the MPI pods copy the key pair at mode 0600 before ssh or sshd reads it (an emptyDir)."""
MPI_SSH_PORT = 2222
"""The port of the MPI operator's own base images (kubeflow/mpi-operator build/base/Dockerfile), kept for the NCCL
run: launcher and workers only have to agree, which the step's ssh ConfigMap makes them do."""
MPI_SSH_CONFIG_DIR = "/etc/fab-ssh"
"""Where the step's ssh ConfigMap (`sshd_config`, `ssh_config`, `hostfile`) is mounted in the MPI pods."""
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
"""The one exception to the restricted pods: the NCCL run's MPI pods (its launcher and workers). The launcher reaches
its workers over SSH as the image's user (root in the nccl-tests image), whose sshd drops to the session with SETUID,
SETGID and SYS_CHROOT; NCCL pins its InfiniBand buffers, which needs IPC_LOCK. Nothing else: no host network, no
privilege escalation."""
WARP_FOLDER = "fab-verify-load"
"""The folder of the team's checkpoint prefix that warp writes into, drained before and after the NCCL runs."""
MPI_REASON = "NCCL over InfiniBand: the MPI workers' sshd runs as root and NCCL pins memory (IPC_LOCK)"
WORKERS = "nccl-worker"
"""The Indexed Job of the run's workers, one pod per node of the pair: pod `i` is host `nccl-worker-<i>`."""
WORKERS_SERVICE = "nccl-workers"
"""The headless Service that gives each worker its DNS name, `nccl-worker-<i>.nccl-workers.<namespace>.svc`."""
NCCL_LOG = "/tmp/nccl.log"
DEFAULT_MAX_MESSAGE_MIB = 16384
"""all_reduce_perf's largest message by default: 16 GiB, where NVIDIA's AI Cluster Runtime reads its gates."""
FLOOR_MESSAGE_MIB = 8192
"""The smallest largest message at which a published floor is read (NVIDIA's AI Cluster Runtime reads 16 GiB, 8 GiB
where the GPUs hold no more)."""
NCCL_TESTS_BUFFERS, NCCL_TESTS_RESERVED_MIB = 3, 1024
"""What all_reduce_perf allocates per GPU for its largest message (nccl-tests src/common.cu at the pinned image's
2cbb968: send, receive and, with validation on as by default, expected buffers, plus 1 GiB for the rest); larger than
the memory allows, it lowers `-e` itself ("Reducing maxBytes ... due to memory limitation")."""


def _size(mib: int) -> str:
    return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def largest_message_mib(smallest_mib: int, limit_mib: int) -> int | None:
    """The last size all_reduce_perf runs (`-f 2`: the sizes double from `-b`) when `-e` is `limit_mib`; None when `-b`
    is already above it."""
    if smallest_mib > limit_mib:
        return None
    size = smallest_mib
    while size * 2 <= limit_mib:
        size *= 2
    return size


def nccl_under_load(site: Site, cluster: str) -> Criterion | tuple[str, str]:
    """all_reduce_perf across two training nodes over InfiniBand, alone and then while warp writes to AIStor."""
    cid = _dns("01-nccl-under-load", cluster)
    nodes = site.config.pool_nodes(cluster, "training")
    if len(nodes) < 2:
        return (cid, f"{cluster} has {len(nodes)} training node(s) under the active profile; multi-node NCCL needs two")
    pair = sorted(nodes)[:2]
    slots = min(nodes[n].gpus for n in pair)
    acceptance, team = site.acceptance, site.team()
    gpu_types = [site.config.all_gpu_types()[nodes[n].gpu_type] for n in pair]
    products = " and ".join(dict.fromkeys(t.product for t in gpu_types))
    memory_mib = min(t.memory_mib for t in gpu_types)
    if acceptance.nccl_max_message_mib is not None:
        largest = largest_message_mib(acceptance.nccl_min_message_mib, acceptance.nccl_max_message_mib)
    else:
        fits = (memory_mib - NCCL_TESTS_RESERVED_MIB) // NCCL_TESTS_BUFFERS
        largest = largest_message_mib(acceptance.nccl_min_message_mib, min(DEFAULT_MAX_MESSAGE_MIB, fits))
        if largest is None or largest < FLOOR_MESSAGE_MIB:
            return (cid, (f"{products} holds {memory_mib} MiB per GPU, too little for all_reduce_perf's three buffers of "
                          f"an {_size(FLOOR_MESSAGE_MIB)} message and 1 GiB, the smallest largest message a published floor "
                          "is read at; set acceptance.nccl_max_message_mib and acceptance.nccl_min_busbw_gb_per_sec"))
    assert largest is not None  # the config check keeps nccl_min_message_mib at most nccl_max_message_mib
    link = acceptance.nccl_hca_link_gbit_per_sec
    # A rail per HCA port NCCL may use (gpu.<cluster>.infiniband.nccl_hcas), else one per GPU, as HGX nodes are cabled.
    hcas = len(site.config.gpu[cluster].infiniband.nccl_hcas) or slots
    rails = interconnect(link, hcas)
    if acceptance.nccl_min_busbw_gb_per_sec is not None:
        floor, origin = acceptance.nccl_min_busbw_gb_per_sec, "acceptance.nccl_min_busbw_gb_per_sec"
    else:
        floors = [floor_for(t.product, link, hcas) for t in gpu_types]
        if None in floors:
            missing = next(t.product for t, f in zip(gpu_types, floors, strict=True) if f is None)
            return (cid, f"no published floor for {missing} over {rails}; set acceptance.nccl_min_busbw_gb_per_sec")
        if largest < FLOOR_MESSAGE_MIB:
            return (cid, (f"acceptance.nccl_max_message_mib makes {_size(largest)} the largest message, and the published "
                          f"floors are read at {_size(FLOOR_MESSAGE_MIB)} or more; set acceptance.nccl_min_busbw_gb_per_sec"))
        chosen = min((f for f in floors if f is not None), key=lambda f: f.busbw_gb_per_sec)
        floor = chosen.busbw_gb_per_sec
        origin = f"the published floor for {chosen.family} over {rails}: {chosen.cite}"
    # warp writes under the team's prefix and keeps what it wrote (--noclear): a drain before the runs clears what an
    # earlier run left, the one after counts what this load wrote (none: warp did not run) and deletes it.
    load_uri = f"{team_prefix(site.bucket('checkpoints'), team)}{WARP_FOLDER}/"

    def drain(when: str) -> Step:
        return _team_probe_step(site, cluster, cid, _dns("drain", when), ["s3-drain", load_uri], team)

    steps = [drain("before")]
    for run in ("baseline", "load"):
        namespace = _dns(site.namespace, "nccl", run)
        name = _dns("nccl", run)
        objects: list[Manifest] = [_privileged_namespace(namespace, cid), _mpi_ssh_config(namespace, cid, slots),
                                   _mpi_ssh_secret(namespace, cid), _workers_service(namespace, cid)]
        background: tuple[str, ...] = ()
        if run == "load":
            objects.extend(_warp(site, cluster, cid, team))
            background = ("warp-load",)
        objects.extend(_mpi_jobs(site, cluster, name, namespace, cid, pair, slots, largest))
        steps.append(Step(cluster, tuple(objects), ("Job", name), acceptance.nccl_timeout_sec, background))
    steps.append(drain("after"))
    bound = acceptance.nccl_max_reduction_percent
    at = _size(largest)
    asked = largest * 1024 * 1024

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
            size = _figure(results, f"{step}.largest_bytes")
            if size != asked:
                shown = "no size" if size is None else f"{size:.0f} B"
                return False, (f"{cluster}: {what} ended at {shown}, not at the {asked} B ({at}) asked: all_reduce_perf "
                               "lowers its largest message when the GPUs' memory cannot hold it")
            if results.get(f"{step}.succeeded") != "true":
                return False, (f"{cluster}: {what} reported {busbw:.1f} GB/s but its launcher failed (mpirun or "
                               "all_reduce_perf exited non-zero: its log says why)")
            wrong = _figure(results, f"{step}.wrong_values")
            if wrong != 0:
                shown = "no count of wrong values" if wrong is None else f"{wrong:.0f} wrong values"
                return False, f"{cluster}: {what} reported {shown}: all_reduce's results must be checked and right"
            figures.append(busbw)
        written = _figure(results, "3.objects")
        if not written:
            return False, (f"{cluster}: the storage load wrote nothing under {load_uri}: warp did not run beside NCCL (its "
                           f"Job warp-load in {team_namespace(team)})")
        alone, loaded = figures
        if alone < floor:
            return False, (f"{cluster}: baseline bus bandwidth at {at} {alone:.1f} GB/s is below the floor of {floor:g} GB/s "
                           f"({origin})")
        reduction = max(0.0, (alone - loaded) / alone * 100) if alone > 0 else 100.0
        if reduction > bound:
            return False, (f"{cluster}: bus bandwidth at {at} fell {reduction:.1f} % under storage load ({alone:.1f} -> "
                           f"{loaded:.1f} GB/s), above the bound of {bound:g} % (acceptance.nccl_max_reduction_percent)")
        return True, (f"{cluster}: bus bandwidth at {at} {alone:.1f} GB/s alone (floor {floor:g} GB/s), {loaded:.1f} GB/s "
                      f"under storage load: {reduction:.1f} % reduction, within {bound:g} %")

    shown = f"busbw at {at} >= {floor:g} GB/s ({origin}), reduction under load <= {bound:g} %"
    return Criterion(1, cid, (f"NCCL all_reduce across {pair[0]} and {pair[1]} over InfiniBand reaches its floor and keeps "
                              "its bandwidth under storage load"), tuple(steps), judge, shown)


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
"""The ConfigMap of the NCCL run's ssh settings and hostfile, in the run's namespace."""


def worker_host(index: int, namespace: str) -> str:
    """A worker's DNS name: its pod's hostname (`<job>-<index>`, an Indexed Job's) under the Service its `subdomain`
    names."""
    return f"{WORKERS}-{index}.{WORKERS_SERVICE}.{namespace}.svc"


def _mpi_ssh_config(namespace: str, cid: str, slots: int) -> Manifest:
    """sshd's and ssh's settings for the MPI pods, as the MPI operator's base images set them (build/base/Dockerfile,
    sshd_config), so that the launcher reaches its workers whatever the image's own ssh configuration: the run's key
    pair is the host key and the only credential, and the launcher neither asks about nor records the workers' host
    keys (StrictHostKeyChecking no, UserKnownHostsFile /dev/null); and mpirun's hostfile, each worker by its DNS name
    with its GPUs as slots."""
    sshd = "\n".join([
        f"Port {MPI_SSH_PORT}",
        f"HostKey {MPI_SSH_DIR}/{SSH_KEY}",
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
        f"    IdentityFile {MPI_SSH_DIR}/{SSH_KEY}",
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "    LogLevel ERROR",
        "",
    ])
    hostfile = "".join(f"{worker_host(i, namespace)} slots={slots}\n" for i in range(2))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(MPI_SSH_CONFIG, namespace, cid),
            "data": {"sshd_config": sshd, "ssh_config": ssh, "hostfile": hostfile}}


def _mpi_ssh_secret(namespace: str, cid: str) -> Manifest:
    """The run's key pair, without data: the runner fills it with a fresh one as it applies it (GENERATE_ANNOTATION)."""
    meta = _meta(MPI_SSH_SECRET, namespace, cid, annotations={GENERATE_ANNOTATION: SSH_KEYPAIR})
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta}


def _workers_service(namespace: str, cid: str) -> Manifest:
    """The headless Service of the workers: their DNS names, published before they are ready (the launcher waits for
    sshd itself)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(WORKERS_SERVICE, namespace, cid), "spec": {
        "clusterIP": "None", "publishNotReadyAddresses": True, "selector": _worker_labels(cid),
        "ports": [{"name": "ssh", "port": MPI_SSH_PORT, "targetPort": MPI_SSH_PORT, "protocol": "TCP"}],
    }}


def _worker_labels(cid: str) -> dict[str, str]:
    return {VERIFY_LABEL: _dns(cid), "fab.internal/verify-role": "nccl-worker"}


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


def nccl_busbw_script(log: str) -> list[str]:
    """Shell lines that report the out-of-place bus bandwidth of all_reduce_perf's largest message, and that size, from
    its table (nccl-tests src/common.cu at the pinned image's 2cbb968: per row `size count type redop root`, then
    `time algbw busbw #wrong` out of place and again in place; the header and summary lines start with `#`, NCCL's own
    lines with the host name). The average (`# Avg bus bandwidth`) is not it: it mixes in the small messages. Also the
    sum of the `#wrong` columns over every row (out of place and in place): values all_reduce_perf found wrong."""
    return [
        ("awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $5 ~ /^-?[0-9]+$/ && $8 ~ /^[0-9.]+$/ "
         f"{{ wrong += $9 + $13; if (size == \"\" || $1 + 0 >= size + 0) {{ size = $1; busbw = $8 }} }} "
         'END { print "FAB-RESULT largest_bytes=" (size == "" ? "none" : size); '
         f'print "FAB-RESULT busbw_gb_per_sec=" (busbw == "" ? "none" : busbw); print "FAB-RESULT wrong_values=" wrong + 0 }}\' {log}'),
    ]


def _mpi_jobs(site: Site, cluster: str, name: str, namespace: str, cid: str, nodes: list[str], slots: int,
              largest_mib: int) -> list[Manifest]:
    """The run's workers and launcher, as Jobs (no operator). The workers: an Indexed Job, a pod on each of `nodes`
    (required node affinity, and anti-affinity on the host name) with `slots` GPUs and the RDMA resource, running sshd;
    its `subdomain` is the headless Service, so worker `i` is `nccl-worker-<i>.nccl-workers.<namespace>.svc`. The
    launcher: a Job on the training pool without GPUs that waits until both names resolve and answer ssh, then runs
    mpirun with the step's hostfile, NCCL settings from the cluster's `nccl` settings (components/gpu.py nccl_env, as the
    team namespaces' ConfigMap holds them), and prints the figures. The workers never finish on their own (sshd): the
    runner deletes them with the step when the launcher is done, and their activeDeadlineSeconds stops them if the
    runner cannot."""
    acceptance = site.acceptance
    env = nccl_env(site.config.gpu[cluster])
    exported = " ".join(f"-x {key}" for key in sorted(env))
    processes = slots * len(nodes)
    hosts = " ".join(worker_host(i, namespace) for i in range(len(nodes)))
    copy_keys = (f"install -m 0600 {MPI_SSH_SECRET_DIR}/{SSH_KEY} {MPI_SSH_DIR}/{SSH_KEY} && "
                 f"install -m 0600 {MPI_SSH_SECRET_DIR}/authorized_keys {MPI_SSH_DIR}/authorized_keys")
    script = "\n".join([
        "set -o pipefail",
        copy_keys,
        # The names resolve once the pods exist, sshd answers once the image is pulled; the Job's deadline bounds both.
        f"for host in {hosts}; do",
        '  until getent hosts "$host" >/dev/null && ssh -o BatchMode=yes -o ConnectTimeout=5 "$host" true; do sleep 5; done',
        "done",
        # mpirun by its absolute path is Open MPI's --prefix: the workers' orted is found whatever ssh's PATH.
        (f'"$(command -v mpirun)" -np {processes} --hostfile {MPI_SSH_CONFIG_DIR}/hostfile --map-by ppr:{slots}:node '
         f"--bind-to none -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO {exported} "
         f"/opt/nccl-tests/build/all_reduce_perf -b {acceptance.nccl_min_message_mib}M -e {largest_mib}M "
         f"-f 2 -g 1 2>&1 | tee {NCCL_LOG}"),
        "rc=$?",
        *nccl_busbw_script(NCCL_LOG),
        *nccl_transport_script(NCCL_LOG),
        "exit $rc",
    ])
    small = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    volumes, mounts = _scratch(("tmp", "/tmp"), ("sshd", MPI_PRIVSEP_DIR), ("ssh-keys", MPI_SSH_DIR))
    volumes += [{"name": "ssh-config", "configMap": {"name": MPI_SSH_CONFIG}},
                {"name": "ssh-key", "secret": {"secretName": MPI_SSH_SECRET, "defaultMode": 0o400}}]
    mounts += [{"name": "ssh-config", "mountPath": MPI_SSH_CONFIG_DIR, "readOnly": True},
               {"name": "ssh-key", "mountPath": MPI_SSH_SECRET_DIR, "readOnly": True}]
    env_list = [{"name": k, "value": v} for k, v in sorted(env.items())]
    image = site.registry.image(versions.VERIFY_NCCL_IMAGE)
    launcher = {
        "name": "launcher", "image": image, "imagePullPolicy": "Always",
        "securityContext": MPI_EXCEPTION, "command": ["bash", "-c"], "args": [script],
        "env": [{"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"}, {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"},
                # Open MPI keeps the hostfile's names whole (as the MPI operator sets it): their domain is the Service.
                {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"}, *env_list],
        "resources": small,
        # ssh reads /etc/ssh/ssh_config whatever starts it (mpirun's rsh launcher, any MPI implementation).
        "volumeMounts": [*mounts, {"name": "ssh-config", "mountPath": "/etc/ssh/ssh_config", "subPath": "ssh_config",
                                   "readOnly": True}],
    }
    gpus = {"nvidia.com/gpu": str(slots), RDMA_RESOURCE: "1"}
    shm = {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    worker = {
        "name": "worker", "image": image, "imagePullPolicy": "Always",
        "securityContext": MPI_EXCEPTION, "command": ["bash", "-c"],
        "args": [f"chmod 0755 {MPI_PRIVSEP_DIR} && {copy_keys} && exec /usr/sbin/sshd -De -f {MPI_SSH_CONFIG_DIR}/sshd_config"],
        "env": env_list,
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", **gpus}, "limits": {"cpu": "16", "memory": "64Gi", **gpus}},
        "volumeMounts": [*mounts, {"name": "shm", "mountPath": "/dev/shm"}],
    }
    common = {"automountServiceAccountToken": False, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
              **site.registry.pod_fields()}
    worker_labels = _worker_labels(cid)
    worker_pod = {
        **common, "containers": [worker], "volumes": [*volumes, shm], "subdomain": WORKERS_SERVICE,
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
    workers = _job(WORKERS, namespace, cid, worker_pod, acceptance.nccl_timeout_sec)
    workers["spec"].update({"completionMode": "Indexed", "completions": len(nodes), "parallelism": len(nodes)})
    workers["spec"]["template"]["metadata"]["labels"].update(worker_labels)
    launcher_pod = {**common, "containers": [launcher], "volumes": volumes, **_training_placement()}
    return [workers, _job(name, namespace, cid, launcher_pod, acceptance.nccl_timeout_sec)]


def _warp(site: Site, cluster: str, cid: str, team: str) -> list[Manifest]:
    """warp writing checkpoint-sized objects to the team's checkpoint prefix from the training nodes' side, with the
    team's own keys: it runs in the team's namespace because only that namespace holds them (no key of wider reach is
    made for the check), and it can write nowhere but the team's prefixes."""
    acceptance, store = site.acceptance, site.config.storage.object_store
    namespace = team_namespace(team)
    endpoint = s3_endpoint_internal(site.config.domain, store).split("://", 1)[1]
    objects, volumes, mounts, env = _team_s3_keys_and_ca(
        site, cid, namespace, "warp-load-ca", {S3_ACCESS_KEY: S3_ACCESS_KEY, S3_SECRET_KEY: S3_SECRET_KEY})
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
