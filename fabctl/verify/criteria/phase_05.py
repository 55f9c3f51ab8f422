"""Phase 05, scale-out: a job submitted on the MultiKueue manager as the submission contract says lands on a worker."""

from __future__ import annotations

from collections.abc import Mapping

from components import versions
from components.constants import AIRFLOW_NAMESPACE, TRAINING_SUBMISSION_CONFIG_MAP
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, team_namespace
from fabctl.verify.criteria.blocks import (
    PROBE_USER,
    Site,
    _account,
    _dns,
    _job,
    _kubectl_pod,
    _ran,
    _scratch,
    _training_placement,
)
from fabctl.verify.model import Criterion, Judgement, Step


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
