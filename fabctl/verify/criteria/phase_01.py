"""Phase 01, GPU base: each GPU node recognises its GPUs, NCCL keeps its bandwidth under storage load
(phase_01_nccl.py), the training nodes' Ethernet path to AIStor reaches its floors (phase_01_storage.py), the training
nodes reach AIStor with a team's keys, every flow admits its clients and a sample of
what no flow admits is dropped."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from components import versions
from components.config.views import INFERENCE_FLOW, POLARIS_FLOW, S3_FLOW
from components.data_access import team_prefix
from components.gpu import NOTEBOOKS_POOL, pool_tolerations
from components.kube import SMALL_RESOURCES, restricted_container, restricted_pod_security_context
from fabctl.verify.criteria.blocks import (
    PROBE_TIMEOUT_SEC,
    PROBE_USER,
    Site,
    _account,
    _dns,
    _figure,
    _job,
    _kubectl_pod,
    _no_training_nodes,
    _probe_step,
    _ran,
    _scratch,
    _team_probe_step,
)
from fabctl.verify.criteria.phase_01_nccl import nccl_under_load
from fabctl.verify.criteria.phase_01_storage import storage_baseline
from fabctl.verify.model import Criterion, Judgement, NotApplicable, Step


def phase_01(site: Site) -> list[Criterion | tuple[str, str]]:
    out: list[Criterion | tuple[str, str]] = []
    for cluster in site.gpu_clusters():
        out.extend(gpu_count(site, cluster, node) for node in sorted(site.config.gpu[cluster].nodes))
    for cluster in site.gpu_clusters():
        out.append(nccl_under_load(site, cluster))
    out.extend(storage_baseline(site, cluster) for cluster in site.gpu_clusters())
    out.extend(s3_roundtrip(site, cluster) for cluster in site.gpu_clusters())
    out.extend(flow_probes(site))
    out.extend(denied_probes(site))
    return out


def gpu_count(site: Site, cluster: str, node: str) -> Criterion:
    """`nvidia-smi -L` on the node, in a pod given every GPU the config says it has (where no other pod holds them)."""
    cid = _dns("01-gpus", cluster, node)
    spec = site.config.gpu[cluster].nodes[node]
    pool = site.config.node_pool(cluster, node)
    if pool == "inference" and site.config.inference is not None:
        return serving_gpu_count(site, cluster, node)
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
    each."""
    spec = site.config.gpu[cluster].nodes[node]
    sharing = site.config.gpu[cluster].sharing
    per_gpu = sharing.per_gpu(site.config.all_gpu_types()[spec.gpu_type].product)
    expected = spec.gpus * per_gpu
    return _allocatable_count(
        site, cluster, node, sharing.resource(), expected,
        f"its {spec.gpus} GPUs (gpu.{cluster}.nodes.{node}.gpus) shared {per_gpu} ways (gpu.{cluster}.sharing) make {expected}",
        f"{spec.gpus} GPUs shared {per_gpu} ways", f"its {spec.gpus} GPUs, shared {per_gpu} ways")


def serving_gpu_count(site: Site, cluster: str, node: str) -> Criterion:
    """An inference-pool node of a site that serves: vLLM holds its GPUs, so no pod can be given them to run nvidia-smi;
    the device plugin's allocatable count is read instead (what the roadmap's check reads with kubectl)."""
    gpus = site.config.gpu[cluster].nodes[node].gpus
    return _allocatable_count(site, cluster, node, "nvidia.com/gpu", gpus, f"gpu.{cluster}.nodes.{node}.gpus says {gpus}",
                              f"{gpus} GPUs held by vLLM", f"its {gpus} GPUs (vLLM holds them: read as allocatable)")


def _allocatable_count(site: Site, cluster: str, node: str, resource: str, expected: int, configured: str, found_as: str,
                       what: str) -> Criterion:
    """The node's allocatable count of `resource`, read with kubectl by an account that may get this node only; a failure
    says what the config makes of it (`configured`), a pass what it is (`found_as`)."""
    cid = _dns("01-gpus", cluster, node)
    account = _dns("fab-verify", "node", node)
    rbac = _account(site, account, cid, [(None, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": [node]}])])
    path = "{.status.allocatable." + resource.replace(".", "\\.") + "}"
    script = f"set -eu\nn=$(kubectl get node {node} -o jsonpath='{path}')\necho \"FAB-RESULT allocatable=${{n:-0}}\""
    job = _job("gpu-count", site.namespace, cid, _kubectl_pod(site, account, script), site.acceptance.timeout_sec)

    def judge(results: Mapping[str, str]) -> Judgement:
        found = _figure(results, "0.allocatable")
        if found is None:
            return False, f"{cluster}/{node}: " + _ran(results, 0, "kubectl get node")
        if int(found) != expected:
            return False, f"{cluster}/{node} advertises {int(found)} {resource}; {configured}"
        return True, f"{cluster}/{node} advertises {expected} {resource}: {found_as}, as configured"

    return Criterion(1, cid, f"{cluster}/{node} recognises {what}",
                     (Step(cluster, (*rbac, job), ("Job", "gpu-count"), site.acceptance.timeout_sec),), judge,
                     f"{resource} == {expected}")


def s3_roundtrip(site: Site, cluster: str) -> Criterion | NotApplicable:
    """Write, read back and delete an object under the team's checkpoint prefix from a pod on the training nodes, with
    the team's `s3-training` keys and the internal endpoint they name."""
    cid = _dns("01-s3-readwrite", cluster)
    team = site.team()
    uri = team_prefix(site.bucket("checkpoints"), team)
    if skipped := _no_training_nodes(site, cluster, cid):
        # No team job runs there (Kueue places them on the training pool only); its serving pods' path to AIStor is
        # phase 02's (vLLM loads its weights over it).
        return NotApplicable(*skipped)
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


def flow_probes(site: Site) -> list[Criterion | NotApplicable]:
    """Every flow of the flow table from each of its source clusters: a TCP handshake with its endpoint completes. A flow
    no probe pod can stand for (clients outside the site, or only pods of one namespace or label) has nothing to check."""
    out: list[Criterion | NotApplicable] = []
    for flow_name, flow in sorted(site.config.flow_table().items()):
        cid = _dns("01-flow", flow_name)
        sources = [s for s in flow.sources if s in site.config.clusters]
        if not sources:
            out.append(NotApplicable(cid, "its clients are outside the site's clusters (world or other sites' ranges)"))
            continue
        address = _flow_address(site, flow_name)
        if isinstance(address, str):
            out.append(NotApplicable(cid, address))
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
