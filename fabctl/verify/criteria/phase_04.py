"""Phase 04, operations: team isolation on AIStor and in Kubernetes RBAC, each cluster's metrics present, the teams'
GPU quotas those of the profile in force, and vLLM's recovery from an eviction within its disruption budget."""

from __future__ import annotations

from collections.abc import Mapping

from components.config import names
from components.data_access import team_prefix
from components.gpu import INFERENCE_NAMESPACE
from components.monitors import target_namespace
from components.observability import PROMETHEUS_URL
from components.serving import stable_labels
from components.kueue import team_namespace
from fabctl.verify.criteria.blocks import (
    Site,
    _account,
    _dns,
    _figure,
    _first_model,
    _job,
    _kubectl_pod,
    _no_training_nodes,
    _probe_step,
    _ran,
    _team_probe_step,
)
from fabctl.verify.model import Criterion, Judgement, Manifest, NotApplicable, Step


def phase_04(site: Site) -> list[Criterion | tuple[str, str]]:
    out: list[Criterion | tuple[str, str]] = [s3_team_isolation(site)]
    out.extend(team_rbac(site, cluster) for cluster in site.config.kueue_clusters())
    if site.config.observability is None:
        out.extend((_dns("04-metrics", c), "the site deploys no metrics stack (no `observability` section)")
                   for c in sorted(site.config.clusters))
    else:
        out.extend(metrics_present(site, c) for c in sorted(site.config.clusters))
    out.append(profile_in_force(site))
    if site.config.compute.jupyterhub.gpu_notebooks is not None:
        out.append(gpu_notebooks_quota(site))
    out.append(vllm_recovery(site))
    return out


def s3_team_isolation(site: Site) -> Criterion | NotApplicable | tuple[str, str]:
    cid = "04-s3-team-isolation"
    other = site.other_team()
    if other is None:
        return NotApplicable(cid, "the site has one team: there is no other team's prefix to be refused")
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


def gpu_notebooks_quota(site: Site) -> Criterion:
    """On the notebooks cluster, for each team with notebooks: its ResourceQuota `notebooks` caps its shares at the
    configured count and its whole GPUs at zero, and the API server enforces it: the quota's `status.hard` (which the
    quota controller sets once it tracks the namespace) says the same. Read by an account that may get those quotas and
    nothing else: a pod created to be refused would need the right to create pods there, which mounts the namespaces'
    Secrets."""
    cid = "04-gpu-notebooks"
    notebooks = site.config.compute.jupyterhub.gpu_notebooks
    assert notebooks is not None
    cluster, resource = notebooks.cluster, site.config.gpu[notebooks.cluster].sharing.resource()
    quotas = dict(sorted(notebooks.team_quotas.items()))
    account = _dns("fab-verify", "notebooks")
    rbac = _account(site, account, cid, [
        (names.NOTEBOOKS_NAMESPACE(team), [
            {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get"], "resourceNames": ["notebooks"]},
        ]) for team in quotas
    ])
    escaped = resource.replace(".", "\\.")
    lines = ["set -u"]
    for team in quotas:
        ns = names.NOTEBOOKS_NAMESPACE(team)
        for where in ("spec", "status"):
            lines += [
                (f"echo \"FAB-RESULT {team}.{where}_shares=$(kubectl -n {ns} get resourcequota notebooks "
                 f"-o jsonpath='{{.{where}.hard.requests\\.{escaped}}}')\""),
                (f"echo \"FAB-RESULT {team}.{where}_whole=$(kubectl -n {ns} get resourcequota notebooks "
                 f"-o jsonpath='{{.{where}.hard.requests\\.nvidia\\.com/gpu}}')\""),
            ]
    job = _job("notebooks-quota", site.namespace, cid, _kubectl_pod(site, account, "\n".join(lines)), site.acceptance.timeout_sec)

    def judge(results: Mapping[str, str]) -> Judgement:
        first = next(iter(quotas))
        if f"0.{first}.spec_shares" not in results:
            return False, f"{cluster}: " + _ran(results, 0, "the quota reader")
        wrong = []
        for team, want in quotas.items():
            ns = names.NOTEBOOKS_NAMESPACE(team)
            shares, whole = results.get(f"0.{team}.spec_shares"), results.get(f"0.{team}.spec_whole")
            if shares != str(want):
                wrong.append(f"{team} may run {shares or 'no quota of'} {resource} (compute.jupyterhub.gpu_notebooks.team_quotas says {want})")
            if whole != "0":
                wrong.append(f"{team}'s whole-GPU quota is {whole or 'unset'}, 0 expected")
            enforced = (results.get(f"0.{team}.status_shares"), results.get(f"0.{team}.status_whole"))
            if enforced != (shares, whole):
                wrong.append(f"the quota of {ns} is not in force yet (status.hard {enforced[0] or 'unset'} {resource}, "
                             f"{enforced[1] or 'unset'} whole GPUs)")
        if wrong:
            return False, f"{cluster}: " + "; ".join(wrong)
        return True, f"{cluster}: " + ", ".join(f"{t} {q}" for t, q in quotas.items()) + f" {resource}, no whole GPU, in force"

    return Criterion(4, cid, f"GPU notebooks on {cluster} are held to each team's shares, never a whole GPU",
                     (Step(cluster, (*rbac, job), ("Job", "notebooks-quota"), site.acceptance.timeout_sec),), judge,
                     ", ".join(f"{t} == {q}" for t, q in quotas.items()) + "; whole GPUs 0; in force")


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
