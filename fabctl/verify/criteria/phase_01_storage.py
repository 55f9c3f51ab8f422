"""Phase 01's storage baseline: warp PUT, then GET, from every training node of a GPU cluster at once, over the Ethernet
path to AIStor's internal S3 endpoint with a team's keys, judged per node and in aggregate against floors derived from
the nodes' storage bond (docs/acceptance.md, phase 01). The evidence for the design's split: InfiniBand carries NCCL
only, storage traffic goes over the Ethernet bond, and that bond delivers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components import versions
from components.config.schema.acceptance import AcceptanceConfig
from components.constants import S3_ACCESS_KEY, S3_SECRET_KEY
from components.data_access import s3_endpoint_internal, team_prefix
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import team_namespace
from fabctl.verify.criteria.blocks import (
    PROBE_USER,
    VERIFY_LABEL,
    Site,
    _dns,
    _figure,
    _job,
    _no_training_nodes,
    _queued,
    _ran,
    _team_s3_keys_and_ca,
    _team_probe_step,
    _training_placement,
)
from fabctl.verify.model import Criterion, Judgement, Manifest, NotApplicable, Step

STORAGE_FOLDER = "fab-verify-storage"
"""The folder of the team's checkpoint prefix the baseline writes into (a sub-folder per node), drained before and after."""
JOB = "storage-baseline"
MIB_PER_SEC_PER_GBPS = 1e9 / 8 / 2**20
"""1 Gb/s (10^9 bits per second, as NICs are rated) in MiB/s (2^20 bytes, as warp reports): 119.209..."""
MAX_START_SPREAD_PERCENT = 10
"""How far apart, in percent of `storage_baseline_duration_sec`, the nodes' PUT (or GET) runs may start: beyond it the
runs did not overlap enough for their sum to be an aggregate."""
WARP_SUMMARY_AWK = """\
$1 == "Report:" { mine = ($2 == toupper(op) "."); next }
mine && $1 == "*" && $2 == "Average:" && $4 == "MiB/s," { mib = $3 }
mine && $1 == "*" && $2 == "Errors:" { errors = $3 }
END {
  print "FAB-RESULT " op "_mib_per_sec." node "=" (mib == "" ? "none" : mib)
  print "FAB-RESULT " op "_errors." node "=" (errors == "" ? 0 : errors)
}"""
"""awk (busybox's, in the warp image) turning one warp run's output into FAB-RESULT lines, given `op` (put, get) and
`node`: the throughput and errors of the operation from warp's result summary (pkg/aggregate/live.go,
LiveAggregate.Report without details or colours): `Report: PUT. Concurrency: 32. Ran: 29.981s`, then
` * Average: 9873.41 MiB/s, 154.27 obj/s` and, when requests failed, ` * Errors: 3`. `none` without a report (warp
failed, or `Skipping PUT too few samples`). Single-quoted in the pod's script: no single quote in it."""


def mib_per_sec(gbps: float) -> float:
    """A line rate in Gb/s as MiB/s."""
    return gbps * MIB_PER_SEC_PER_GBPS


@dataclass(frozen=True)
class Floor:
    """What one operation must reach on `nodes` training nodes at once: per node and in sum."""

    op: str
    """GET or PUT."""
    node_mib_per_sec: float
    aggregate_mib_per_sec: float
    why: str
    """Where the per-node floor comes from, naming the fields that set it."""


def floor(acceptance: AcceptanceConfig, op: str, nodes: int) -> Floor:
    """The floors of `op` (GET or PUT): the per-node floor is the override in MiB/s, else the percentage of the bond's
    line rate; the aggregate is that times the nodes, capped by what AIStor is sized for, each node then held to its
    equal share of the cap."""
    key = op.lower()
    override = getattr(acceptance, f"storage_baseline_min_{key}_mib_per_sec")
    percent = getattr(acceptance, f"storage_baseline_min_{key}_percent")
    nic = acceptance.storage_baseline_nic_gbps
    if override is not None:
        node, why = override, f"acceptance.storage_baseline_min_{key}_mib_per_sec"
    else:
        node = percent / 100 * mib_per_sec(nic)
        why = (f"{percent:g} % of {nic:g} Gb/s: acceptance.storage_baseline_min_{key}_percent of "
               "acceptance.storage_baseline_nic_gbps")
    cap = getattr(acceptance, f"storage_baseline_max_aggregate_{key}_mib_per_sec")
    if cap is not None and cap < node * nodes:
        return Floor(op, cap / nodes, cap, f"an equal share of acceptance.storage_baseline_max_aggregate_{key}_mib_per_sec")
    return Floor(op, node, node * nodes, why)


def storage_baseline(site: Site, cluster: str) -> Criterion | NotApplicable:
    """warp PUT, then GET of what it wrote, on every training node of `cluster` at once, with the team's keys."""
    cid = _dns("01-storage-baseline", cluster)
    if skipped := _no_training_nodes(site, cluster, cid):
        return NotApplicable(*skipped)  # no team job runs there: it has no training node's path to measure
    acceptance, team = site.acceptance, site.team()
    nodes = sorted(site.config.pool_nodes(cluster, "training"))
    folder = f"{team_prefix(site.bucket('checkpoints'), team)}{STORAGE_FOLDER}/"

    def drain(when: str) -> Step:
        return _team_probe_step(site, cluster, cid, _dns("storage-drain", when), ["s3-drain", folder], team)

    timeout = acceptance.timeout_sec + 2 * acceptance.storage_baseline_duration_sec
    steps = (drain("before"), Step(cluster, tuple(_warp_job(site, cid, team, nodes, timeout)), ("Job", JOB), timeout),
             drain("after"))
    floors = [floor(acceptance, op, len(nodes)) for op in ("PUT", "GET")]
    spread = acceptance.storage_baseline_duration_sec * MAX_START_SPREAD_PERCENT / 100

    def judge(results: Mapping[str, str]) -> Judgement:
        figures: dict[str, dict[str, float]] = {}
        for f in floors:
            key = f.op.lower()
            found = {n: _figure(results, f"1.{key}_mib_per_sec.{n}") for n in nodes}
            missing = [n for n, v in found.items() if v is None]
            if missing:
                return False, (f"{cluster}: no {f.op} figure from {', '.join(missing)}: "
                               + _ran(results, 1, f"warp (Job {JOB} in {team_namespace(team)})"))
            if results.get("1.succeeded") != "true":
                return False, (f"{cluster}: warp reported its figures but its Job {JOB} in {team_namespace(team)} failed (a "
                               "pod exited non-zero: its log says why)")
            failed = [f"{n} {e:.0f}" for n in nodes if (e := _figure(results, f"1.{key}_errors.{n}"))]
            if failed:
                return False, f"{cluster}: {f.op} requests failed, errors per node: {', '.join(failed)} (see the pods' logs)"
            starts = [s for n in nodes if (s := _figure(results, f"1.{key}_start_epoch_sec.{n}")) is not None]
            if starts and max(starts) - min(starts) > spread:
                return False, (f"{cluster}: the nodes' {f.op} runs started {max(starts) - min(starts):.0f} s apart, more "
                               f"than {spread:g} s ({MAX_START_SPREAD_PERCENT} % of acceptance.storage_baseline_duration_sec): "
                               "their sum is no aggregate; pre-pull the warp image on the training nodes or raise the duration")
            figures[f.op] = {n: v for n, v in found.items() if v is not None}
        for f in floors:
            total = sum(figures[f.op].values())
            if total < f.aggregate_mib_per_sec:
                below = [n for n, v in figures[f.op].items() if v < f.node_mib_per_sec]
                return False, (f"{cluster}: {f.op} from the {len(nodes)} training nodes together averaged {total:.1f} MiB/s, "
                               f"below the aggregate floor of {f.aggregate_mib_per_sec:.1f} MiB/s ({len(nodes)} x "
                               f"{f.node_mib_per_sec:.1f}, {f.why}); nodes below their floor: {', '.join(below) or 'none'}")
        for f in floors:
            below = [f"{n} {v:.1f} MiB/s" for n, v in figures[f.op].items() if v < f.node_mib_per_sec]
            if below:
                return False, (f"{cluster}: {f.op} below the per-node floor of {f.node_mib_per_sec:.1f} MiB/s ({f.why}): "
                               + ", ".join(below))
        shown = "; ".join(f"{f.op} {sum(figures[f.op].values()):.1f} MiB/s" for f in floors)
        return True, (f"{cluster}: {len(nodes)} training nodes at once, each above its floors (PUT "
                      f"{floors[0].node_mib_per_sec:.1f}, GET {floors[1].node_mib_per_sec:.1f} MiB/s); together {shown}")

    bound = "; ".join(f"{f.op} >= {f.node_mib_per_sec:.1f} MiB/s per node, >= {f.aggregate_mib_per_sec:.1f} MiB/s together"
                      for f in floors)
    return Criterion(1, cid, (f"warp PUT and GET from each of {cluster}'s {len(nodes)} training nodes at once over the Ethernet "
                              "path to AIStor reach the floors of their storage bond (pools inference and notebooks not measured)"),
                     steps, judge, bound)


def _warp_job(site: Site, cid: str, team: str, nodes: list[str], timeout: int) -> list[Manifest]:
    """An Indexed Job with a pod on each of `nodes` (required node affinity on the set, required anti-affinity on the
    host name), each running warp PUT then GET under its own folder and printing its node's figures; in the team's
    namespace with its own keys (only it holds them), queued as the team's job."""
    store = site.config.storage.object_store
    namespace = team_namespace(team)
    endpoint = s3_endpoint_internal(site.config.domain, store).split("://", 1)[1]
    # warp reads its keys from WARP_ACCESS_KEY and WARP_SECRET_KEY (cli/flags.go): they stay off its command line.
    objects, volumes, mounts, env = _team_s3_keys_and_ca(
        site, cid, namespace, "storage-baseline-ca", {"WARP_ACCESS_KEY": S3_ACCESS_KEY, "WARP_SECRET_KEY": S3_SECRET_KEY})
    env.insert(2, {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    container = restricted_container(
        "warp", site.registry.image(versions.VERIFY_WARP_IMAGE), PROBE_USER, command=["/bin/sh", "-c"],
        args=[warp_script(site, endpoint, team)], workingDir="/tmp", env=env, volumeMounts=mounts,
        # TLS and the payload's checksums at line rate take cores: the limit lets warp burst well above its request.
        resources={"requests": {"cpu": "4", "memory": "4Gi"}, "limits": {"cpu": "16", "memory": "8Gi"}},
    )
    labels = {VERIFY_LABEL: _dns(cid), "fab.internal/verify-role": "storage-baseline"}
    selector = dict(labels)  # a copy: a rendered file shares no YAML anchor between the two
    placement = _training_placement()
    placement["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}
        ]}},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": selector}, "topologyKey": "kubernetes.io/hostname"}
        ]},
    }
    pod = {"automountServiceAccountToken": False, "securityContext": restricted_pod_security_context(),
           **site.registry.pod_fields(), "containers": [container], "volumes": volumes, **placement}
    job = _job(JOB, namespace, cid, pod, timeout, **_queued())
    job["spec"].update({"completionMode": "Indexed", "completions": len(nodes), "parallelism": len(nodes)})
    job["spec"]["template"]["metadata"]["labels"] = labels
    objects.append(job)
    return objects


def warp_script(site: Site, endpoint: str, team: str) -> str:
    """The pod's shell script (busybox sh of the warp image): the start time, warp PUT, then GET of the objects the PUT
    left (--noclear, --list-existing: no upload of its own before the GETs), each run's output and its figures. The
    prefix ends in a slash: PUT joins its own sub-folder to it (path.Join), and GET lists exactly this node's folder
    (gpu-1/ is not a prefix of gpu-10/)."""
    acceptance, store = site.acceptance, site.config.storage.object_store
    common = " ".join([
        "--no-color", f"--host={endpoint}", *(["--tls"] if store.tls else []), f"--region={site.config.minio.region}",
        f"--bucket={site.bucket('checkpoints')}", f'--prefix="{team}/{STORAGE_FOLDER}/$node/"', "--noclear",
        f"--obj.size={acceptance.storage_baseline_object_size_mib}MiB", f"--concurrent={acceptance.storage_baseline_concurrency}",
        f"--duration={acceptance.storage_baseline_duration_sec}s",
    ])
    lines = ["node=$NODE_NAME", "rc=0"]
    for op, extra in (("put", ""), ("get", " --list-existing")):
        lines += [
            f'echo "FAB-RESULT {op}_start_epoch_sec.$node=$(date +%s)"',
            f"/warp {op} {common}{extra} --benchdata=/tmp/{op} > /tmp/{op}.txt 2>&1 || rc=1",
            f"cat /tmp/{op}.txt",
            f"awk -v op={op} -v node=\"$node\" '{WARP_SUMMARY_AWK}' /tmp/{op}.txt",
        ]
    lines.append("exit $rc")
    return "\n".join(lines)
