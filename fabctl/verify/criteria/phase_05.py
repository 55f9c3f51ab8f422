"""Phase 05, scale-out: capacity grows while the interfaces stay the same. A job submitted as the submission contract
says is admitted (with MultiKueue, on a worker); with model-aware routing, the same URL and token answer; with global
services, each client cluster reaches Polaris by its cluster-local name; a peer site's team that trains here is admitted
in its namespace; with Spark RAPIDS, the SparkApplication Airflow submits runs on the GPU (phase_05_rapids.py)."""

from __future__ import annotations

from collections.abc import Mapping

from components import versions
from components.constants import AIRFLOW_NAMESPACE, TRAINING_SUBMISSION_CONFIG_MAP
from components.storage import polaris_global_service as polaris_global_service_of
from components.gpu import INFERENCE_NAMESPACE, IPOIB_NETWORK, POOL_LABEL, ipoib_enabled, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, team_namespace
from fabctl.verify.criteria.blocks import (
    PROBE_TIMEOUT_SEC,
    PROBE_USER,
    Site,
    _account,
    _dns,
    _first_model,
    _job,
    _kubectl_pod,
    _probe_step,
    _ran,
    _scratch,
    _training_placement,
)
from fabctl.verify.criteria.phase_02 import inference_call
from fabctl.verify.criteria.phase_05_rapids import spark_rapids
from fabctl.verify.model import Built, Criterion, Judgement, Step


def phase_05(site: Site) -> list[Built]:
    out: list[Built] = [submission(site)]
    config = site.config
    if config.inference is not None and config.inference.routing == "inference-extension":
        out.append(inference_call(site, _first_model(site), "05-inference-extension", 5))
    if config.global_services_enabled():
        out.extend(polaris_global_service(site, cluster) for cluster in _polaris_clients(site))
    out.extend(remote_training(site, namespace) for namespace in sorted(config.remote_teams(linked_only=True)))
    if config.inference is not None and ipoib_enabled(config.gpu[config.inference.cluster], serves_inference=True):
        out.append(weights_over_ib(site))
    out.extend(spark_rapids(site, cluster) for cluster in site.gpu_clusters() if config.gpu[cluster].spark_rapids is not None)
    return out


def submission(site: Site) -> Criterion | tuple[str, str]:
    """Two steps. On compute, a checker reads the team's entry of the contract Airflow reads (ConfigMap
    `training-submission`: cluster, namespace, LocalQueue). On the submission cluster, a Job submitted as that contract
    says (the team's namespace and LocalQueue, the priority label, suspended for Kueue, as `training.example_job`) and a
    checker that waits for its Workload to be admitted and reads where: with MultiKueue, the worker it was dispatched to
    (`status.clusterName`); without, the ClusterQueue that admitted it (`status.admission.clusterQueue`)."""
    cid = "05-submission"
    config = site.config
    multikueue = config.training.multikueue
    quotas = config.team_quotas()
    with_quota = [t for t, q in quotas.items() if any(v.gpus > 0 for v in q.values())]
    team = site.acceptance.team if site.acceptance.team in with_quota else (with_quota[0] if with_quota else None)
    if team is None:
        return (cid, "no team has a GPU quota (training.quotas) to admit the job with")
    cluster, namespace, workers = site.submission_cluster(), team_namespace(team), sorted(multikueue.workers)
    contract = _contract_step(site, site.compute(), cid, team)
    submit = _admission_step(site, cid, cluster, namespace)
    cluster_name = config.cluster_name(cluster)

    def judge(results: Mapping[str, str]) -> Judgement:
        if "0.namespace" not in results:
            return False, _ran(results, 0, "the contract checker")
        said = (results.get("0.cluster"), results.get("0.namespace"), results.get("0.local_queue"))
        if said != (cluster_name, namespace, LOCAL_QUEUE):
            return False, (f"the submission contract gives team {team} cluster {said[0] or 'none'}, namespace {said[1] or 'none'} "
                           f"and LocalQueue {said[2] or 'none'}; {cluster_name}, {namespace} and {LOCAL_QUEUE} expected")
        placed = results.get("1.placed")
        if placed is None:
            return False, _ran(results, 1, "the admission checker")
        if wrong := _placement(site, f"team {team}", namespace, cluster, placed):
            return wrong
        landed = f"ran on worker {placed}" if multikueue.enabled else f"was admitted by ClusterQueue {placed}"
        return True, f"team {team}'s job, submitted to {namespace}/{LOCAL_QUEUE} on {cluster} as the contract says, {landed}"

    title = (f"a job submitted to {namespace}/{LOCAL_QUEUE} on {cluster} as the contract says "
             + ("lands on a MultiKueue worker" if multikueue.enabled else "is admitted by the team's ClusterQueue"))
    bound = f"worker in {', '.join(workers)}" if multikueue.enabled else f"admitted by ClusterQueue {namespace}"
    return Criterion(5, cid, title, (contract, submit), judge, f"contract ({cluster_name}, {namespace}, {LOCAL_QUEUE}); {bound}")


def _admission_step(site: Site, cid: str, cluster: str, namespace: str) -> Step:
    """On `cluster`, a Job submitted to `namespace` as the contract says (its LocalQueue and priority labels, suspended for
    Kueue, as `training.example_job`) and a checker that waits for its Workload's placement (`placed`): with MultiKueue,
    the worker it was dispatched to (`status.clusterName`); without, the ClusterQueue that admitted it
    (`status.admission.clusterQueue`). The checker may list Workloads in that namespace and nothing else."""
    submitted = "submission-probe"
    container = restricted_container("probe", site.registry.image(versions.VERIFY_PROBE_IMAGE), PROBE_USER,
                                     command=["python", "-c", "print('FAB-RESULT ran=true')"],
                                     volumeMounts=_scratch(("tmp", "/tmp"))[1])
    pod = {"automountServiceAccountToken": False, "securityContext": restricted_pod_security_context(),
           **site.registry.pod_fields(), "containers": [container], "volumes": _scratch(("tmp", "/tmp"))[0],
           **_training_placement()}
    # Submitted the way Airflow submits (components/training_submission.py example_job): suspended for Kueue, queue and priority labels.
    job = _job(submitted, namespace, cid, pod, site.acceptance.timeout_sec,
               labels={QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}, suspend=True)
    account = _dns("fab-verify", "submission")
    where = ".status.clusterName" if site.config.training.multikueue.enabled else ".status.admission.clusterQueue"
    script = "\n".join([
        "set -eu",
        "placed=''",
        f"for i in $(seq 1 {site.acceptance.timeout_sec // 5}); do",
        (f"  placed=$(kubectl -n {namespace} get workloads -o jsonpath="
         f"'{{range .items[?(@.metadata.ownerReferences[0].name==\"{submitted}\")]}}{{{where}}}{{end}}')"),
        "  [ -n \"$placed\" ] && break; sleep 5",
        "done",
        "echo \"FAB-RESULT placed=${placed:-none}\"",
    ])
    rbac = _account(site, account, cid, [
        (namespace, [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]}]),
    ])
    checker = _job("submission-check", site.namespace, cid, _kubectl_pod(site, account, script), site.acceptance.timeout_sec + 60)
    return Step(cluster, (job, *rbac, checker), ("Job", "submission-check"), site.acceptance.timeout_sec + 120, (submitted,))


def _placement(site: Site, who: str, namespace: str, cluster: str, placed: str | None) -> Judgement | None:
    """Why a job of `who` submitted to `namespace` on `cluster` was not placed as it should be, or None when it was."""
    multikueue = site.config.training.multikueue
    workers, timeout = sorted(multikueue.workers), site.acceptance.timeout_sec
    if multikueue.enabled and placed not in workers:
        return False, (f"{who}'s job was placed on {placed}; MultiKueue's workers are {', '.join(workers)}" if placed != "none"
                       else f"{who}'s job was not dispatched to a MultiKueue worker within {timeout} s")
    if not multikueue.enabled and placed != namespace:
        return False, (f"{who}'s job was admitted by ClusterQueue {placed}; {namespace} expected" if placed != "none"
                       else f"{who}'s job was not admitted within {timeout} s (its ClusterQueue {namespace} on {cluster})")
    return None


def remote_training(site: Site, namespace: str) -> Criterion:
    """A job submitted by a peer site's team to its namespace here, as the peer's contract says (the stack output
    `training.remote_submission`: this site's submission cluster, the namespace, the LocalQueue), is admitted: with
    MultiKueue on a worker. Its GPU quota here may be borrowing only; the probe asks for none."""
    remote = site.config.remote_teams(linked_only=True)[namespace]
    cid = _dns("05-remote-training", remote.peer, remote.team)
    cluster, who = site.submission_cluster(), f"{remote.peer}'s team {remote.team}"

    def judge(results: Mapping[str, str]) -> Judgement:
        placed = results.get("0.placed")
        if placed is None:
            return False, _ran(results, 0, "the admission checker")
        if wrong := _placement(site, who, namespace, cluster, placed):
            return wrong
        landed = f"ran on worker {placed}" if site.config.training.multikueue.enabled else f"was admitted by ClusterQueue {placed}"
        return True, f"{who}'s job, submitted to {namespace}/{LOCAL_QUEUE} on {cluster}, {landed}"

    return Criterion(5, cid, f"{who} trains here: a job submitted to {namespace}/{LOCAL_QUEUE} on {cluster} is admitted",
                     (_admission_step(site, cid, cluster, namespace),), judge,
                     "placed on a MultiKueue worker" if site.config.training.multikueue.enabled else f"admitted by ClusterQueue {namespace}")


def _contract_step(site: Site, compute: str, cid: str, team: str) -> Step:
    """On compute, the team's entry of the contract Airflow reads, by an account that may get that ConfigMap only."""
    account = _dns("fab-verify", "contract")
    path = '{.data.submission\\.json}'
    script = "\n".join([
        "set -eu",
        f"kubectl -n {AIRFLOW_NAMESPACE} get configmap {TRAINING_SUBMISSION_CONFIG_MAP} -o jsonpath='{path}' > /tmp/submission.json",
        # The contract is indented JSON: on one line without blanks, the team's entry is `"<team>":{...}` (no nesting).
        "tr -d ' \\n' < /tmp/submission.json > /tmp/contract",
        *(f"echo \"FAB-RESULT {key}=$(sed -n 's/.*\"{team}\":{{[^}}]*\"{key}\":\"\\([^\"]*\\)\".*/\\1/p' /tmp/contract)\""
          for key in ("cluster", "namespace", "local_queue")),
    ])
    rbac = _account(site, account, cid, [
        (AIRFLOW_NAMESPACE, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                              "resourceNames": [TRAINING_SUBMISSION_CONFIG_MAP]}]),
    ])
    job = _job("contract-check", site.namespace, cid, _kubectl_pod(site, account, script), site.acceptance.timeout_sec)
    return Step(compute, (*rbac, job), ("Job", "contract-check"), site.acceptance.timeout_sec)


def _polaris_clients(site: Site) -> list[str]:
    """The clusters that repeat Polaris's global service: every cluster but storage."""
    return sorted(k for k in site.config.clusters if k not in site.config.keys_with_role("storage"))


def polaris_global_service(site: Site, cluster: str) -> Criterion:
    """From a pod on `cluster`, a TCP handshake with Polaris by its cluster-local name (`polaris-rest.<namespace>.svc`),
    which only the ClusterMesh global service answers there."""
    cid = _dns("05-global-services", cluster)
    polaris = site.config.storage.polaris
    host, port = polaris_global_service_of(polaris).host, polaris.port
    step = _probe_step(site, cluster, cid, "polaris-global", ["tcp", host, str(port), str(PROBE_TIMEOUT_SEC)])

    def judge(results: Mapping[str, str]) -> Judgement:
        said = results.get("0.connect")
        if said is None:
            return False, f"{cluster}: " + _ran(results, 0, "the TCP probe")
        if said != "ok":
            return False, f"{cluster}: {host}:{port} answered {said}; the global service should connect"
        return True, f"{cluster}: {host}:{port} connected through the ClusterMesh global service"

    return Criterion(5, cid, f"a pod on {cluster} reaches Polaris as {host}:{port}", (step,), judge, "handshake completes")


def weights_over_ib(site: Site) -> Criterion:
    """From a pod on an inference node of the serving cluster, in the inference namespace and attached to the IPoIB
    network as vLLM's pods are (`k8s.v1.cni.cncf.io/networks: ipoib-weights@ib0`, the storage partition), a TCP handshake
    with the object store's S3 port at its IPoIB address: the path the weights load over. IPoIB is invisible to Cilium, so
    the partition is the only thing that admits it."""
    config = site.config
    assert config.inference is not None
    cluster = config.inference.cluster
    cid = _dns("05-storage-over-ib", cluster)
    ib = config.gpu[cluster].infiniband
    host, port = str(ib.s3_ipoib_address), config.storage.object_store.s3_port
    step = _probe_step(site, cluster, cid, "weights-over-ib", ["tcp", host, str(port), str(PROBE_TIMEOUT_SEC)],
                       namespace=INFERENCE_NAMESPACE, nodeSelector={POOL_LABEL: "inference"},
                       tolerations=[toleration("inference")])
    (job,) = [o for o in step.objects if o["kind"] == "Job"]
    job["spec"]["template"]["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": f"{IPOIB_NETWORK}@ib0"}

    def judge(results: Mapping[str, str]) -> Judgement:
        said = results.get("0.connect")
        if said is None:
            return False, f"{cluster}: " + _ran(results, 0, "the IPoIB probe")
        if said != "ok":
            return False, (f"{cluster}: {host}:{port} (gpu.{cluster}.infiniband.s3_ipoib_address) answered {said} over the IPoIB "
                           f"network {IPOIB_NETWORK}; the weights cannot load over InfiniBand")
        return True, f"{cluster}: an inference pod reached AIStor at {host}:{port} over IPoIB ({ib.partition_interface})"

    return Criterion(5, cid, f"an inference pod on {cluster} reaches AIStor over InfiniBand (IPoIB, {host}:{port})", (step,),
                     judge, "handshake completes")
