"""fabctl verify's acceptance jobs (fabctl/verify/criteria/, docs/acceptance.md): built from the config, valid, restricted
but for the named exception, pinned, labelled, and judged by exact messages."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import config_errors
from schemas import CrdSchemas, schema_errors
from small_site import add_gpu_notebooks, add_observability, full_site, small_site

from components import versions
from components.config import parse_site
from components.kube import restricted_security_context
from fabctl.verify import probe as probe_script
from fabctl.verify.criteria import PHASES, criteria, not_applicable
from fabctl.verify.criteria.blocks import PROBE_SCRIPT, VERIFY_LABEL, Site, _dns
from fabctl.verify.criteria.phase_01_nccl import MPI_EXCEPTION
from fabctl.verify.criteria.phase_04 import metric_queries
from fabctl.verify.model import Criterion

NAMESPACE = "fab-verify"
SERVING_LOOP = {"training_images": ["registry.site-t.fab.internal/yield/train"],
                "features": {"wafer": {"table": "yield.wafer_features", "sql": "SELECT wafer_id FROM yield.wafers"}}}


def everything() -> dict[str, Any]:
    """full_site() with what the remaining criteria need: a second training node on gpu, a metrics stack, profiles and a
    serving-loop run to verify."""
    site = full_site()
    site["gpu"]["gpu"]["nodes"]["gpu-trn-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "training"}
    add_observability(site, "remote-write")
    site["profiles"] = {"day": {}, "night": {"quotas": {"yield": {"gpu": {"gpus": 8}}}}}
    site["active_profile"] = "day"
    site["teams"]["yield"]["serving_loop"] = SERVING_LOOP
    site["acceptance"] = {"serving_loop": {"team": "yield", "model": "qwen3-8b", "features": "wafer",
                                           "training_image": "registry.site-t.fab.internal/yield/train:1.0"}}
    return site


SITES = {"small": small_site, "full": full_site, "everything": everything}


@pytest.fixture(scope="module", params=sorted(SITES))
def site(request):
    return parse_site(SITES[request.param]())


@pytest.fixture(scope="module")
def complete():
    return parse_site(everything())


def all_criteria(site) -> list[Criterion]:
    return [c for phase in PHASES for c in criteria(site, phase)]


def objects(site) -> Iterator[tuple[str, dict[str, Any]]]:
    for criterion in all_criteria(site):
        for step in criterion.steps:
            for obj in step.objects:
                yield criterion.id, obj


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]["spec"]]
    return []


def step_by_decider(criterion: Criterion, name: str):
    return next(s for s in criterion.steps if s.decides[1] == name)


def criterion(site, phase: int, cid: str) -> Criterion:
    return next(c for c in criteria(site, phase) if c.id == cid)


# --- what is built -------------------------------------------------------------------------------------------------

def test_every_job_in_a_team_namespace_is_one_kueue_queues_and_the_team_policy_admits(site):
    """Kueue manages every job of a team namespace and fab-team-workloads admits the training pool only there
    (components/kueue.py): a probe with a team's keys is the team's own job, judged by the CEL engine."""
    from admission import Request, admit
    from admission_cases import TEAM_NAMESPACE

    from components.kueue import LOCAL_QUEUE, QUEUE_LABEL, TEAM_WORKLOADS_POLICY, team_workloads_policy

    policy = {"metadata": {"name": TEAM_WORKLOADS_POLICY}, "spec": team_workloads_policy()}
    binding = {"spec": {"policyName": TEAM_WORKLOADS_POLICY, "validationActions": ["Deny"]}}
    team_jobs = [(cid, o) for cid, o in objects(site) if o["kind"] == "Job" and o["metadata"]["namespace"].startswith("team-")]
    assert team_jobs
    for cid, job in team_jobs:
        assert (job["metadata"]["labels"].get(QUEUE_LABEL), job["spec"].get("suspend")) == (LOCAL_QUEUE, True), cid
        ns = {**TEAM_NAMESPACE, "metadata": {**TEAM_NAMESPACE["metadata"], "name": job["metadata"]["namespace"]}}
        request = Request(operation="CREATE", group="batch", version="v1", resource="jobs", kind="Job",
                          name=job["metadata"]["name"], namespace=job["metadata"]["namespace"], username="fab-verify",
                          object=job, namespace_object=ns)
        assert admit(policy, binding, request).allowed, cid


def test_every_object_validates_strictly(site, crd_dir):
    crds = CrdSchemas(crd_dir)
    built = list(objects(site))
    assert built
    errors = {f"{cid}/{obj['kind']}/{obj['metadata']['name']}": e for cid, obj in built if (e := schema_errors(obj, crds))}
    assert errors == {}


def test_every_pod_is_restricted_but_the_mpi_pods(site):
    restricted = {k: v for k, v in restricted_security_context(0).items() if k not in ("runAsUser", "runAsGroup")}
    checked = 0
    for _, obj in objects(site):
        for pod in pod_specs(obj):
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in pod["containers"]:
                context = {k: v for k, v in container["securityContext"].items() if k not in ("runAsUser", "runAsGroup")}
                mpi = obj["metadata"]["namespace"].startswith(f"{NAMESPACE}-nccl-")  # the NCCL runs' own namespaces
                assert context == (MPI_EXCEPTION if mpi else restricted)
                assert container["securityContext"].get("runAsUser", 1) != 0
                assert container["resources"]["requests"] and container["resources"]["limits"]
                checked += 1
    assert checked


def test_the_mpi_exception_adds_ipc_lock_and_sshds_capabilities_only():
    assert MPI_EXCEPTION["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK", "SETUID", "SETGID", "SYS_CHROOT"]}
    assert MPI_EXCEPTION["allowPrivilegeEscalation"] is False


def test_no_pod_uses_the_host(site):
    for _, obj in objects(site):
        for pod in pod_specs(obj):
            assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
            assert all("hostPath" not in v for v in pod["volumes"])


def test_images_are_pinned(site):
    images = {c["image"] for _, obj in objects(site) for pod in pod_specs(obj) for c in pod["containers"]}
    pinned = {v for k, v in vars(versions).items() if k.endswith("_IMAGE") and isinstance(v, str)}
    assert images
    assert images <= pinned
    assert all(":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest") for image in images)


def test_every_object_carries_its_criterion(site):
    built = list(objects(site))
    assert built
    for cid, obj in built:
        assert obj["metadata"]["labels"][VERIFY_LABEL] == _dns(cid)
    for _, obj in built:
        for pod_template in ([obj["spec"]["template"]] if obj["kind"] == "Job" else []):
            assert VERIFY_LABEL in pod_template["metadata"]["labels"]


def test_objects_outside_the_acceptance_namespace_are_team_rbac_inference_airflow_or_nccl(complete):
    places = {(obj["kind"], obj["metadata"].get("namespace")) for _, obj in objects(complete)}
    elsewhere = {p for p in places if p[1] not in (NAMESPACE, None)}
    assert elsewhere == {
        # The team's s3-training Secret is in its namespaces only (fdc probes; yield's serving-loop run published).
        ("ConfigMap", "team-fdc"), ("Job", "team-fdc"), ("ConfigMap", "team-yield"), ("Job", "team-yield"),
        ("Role", "team-fdc"), ("RoleBinding", "team-fdc"),  # reading the MultiKueue job's Workload
        ("Role", "team-yield"), ("RoleBinding", "team-yield"),  # reading the serving loop's training Job and its Workload
        ("Role", "inference"), ("RoleBinding", "inference"),  # evicting one vLLM pod
        ("ConfigMap", "inference"), ("Job", "inference"),  # the IPoIB probe, attached to the weights' network there
        ("Role", "airflow"), ("RoleBinding", "airflow"),  # reading the submission contract
        ("Job", "fab-verify-nccl-baseline"), ("Job", "fab-verify-nccl-load"),  # their own privileged namespaces
        ("Service", "fab-verify-nccl-baseline"), ("Service", "fab-verify-nccl-load"),  # the workers' names
        ("ConfigMap", "fab-verify-nccl-baseline"), ("ConfigMap", "fab-verify-nccl-load"),  # with their ssh settings
        ("Secret", "fab-verify-nccl-baseline"), ("Secret", "fab-verify-nccl-load"),  # and key pair
    }


def test_criterion_ids_are_unique(site):
    ids = [c.id for c in all_criteria(site)] + [cid for p in PHASES for cid, _ in not_applicable(site, p)]
    assert ids
    assert len(ids) == len(set(ids))


def test_criterion_ids_of_the_small_site_are_stable():
    site = parse_site(small_site())
    assert [c.id for c in criteria(site, 1)] == [
        "01-gpus-gpu-gpu-inf-1", "01-gpus-gpu-gpu-trn-1", "01-storage-baseline-gpu", "01-s3-readwrite-gpu", "01-flow-inference", "01-flow-polaris", "01-flow-s3",
        "01-denied-compute-to-gpu", "01-denied-gpu-to-storage",
    ]
    assert [c.id for c in criteria(site, 2)] == [
        "02-inference-call", "02-inference-unauthenticated", "02-serving-slo-qwen3-8b", "02-inference-rate-limit"]


def test_fails_when_the_phase_is_not_a_roadmap_phase():
    with pytest.raises(ValueError, match="^phase 6 is not a roadmap phase; give one of 1, 2, 3, 4, 5$"):
        criteria(parse_site(small_site()), 6)


# --- phase 01 ------------------------------------------------------------------------------------------------------

def test_each_gpu_node_is_asked_for_its_configured_gpus():
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["gpus"] = 4
    check = criterion(parse_site(raw), 1, "01-gpus-gpu-gpu-trn-1")
    (job,) = check.steps[0].objects
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "gpu-trn-1"}
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert check.bound == "GPUs == 4"


def test_fails_when_a_node_shows_fewer_gpus_than_configured():
    check = criterion(parse_site(small_site()), 1, "01-gpus-gpu-gpu-trn-1")
    assert check.judge({"0.gpus": "7", "0.succeeded": "true"}) == (
        False, "gpu/gpu-trn-1 shows 7 GPUs; gpu.gpu.nodes.gpu-trn-1.gpus says 8")
    assert check.judge({"0.gpus": "8", "0.succeeded": "true"}) == (True, "gpu/gpu-trn-1 shows 8 GPUs, as configured")


def test_a_serving_nodes_gpus_are_read_as_allocatable_since_vllm_holds_them():
    check = criterion(parse_site(small_site()), 1, "01-gpus-gpu-gpu-inf-1")
    assert check.bound == "nvidia.com/gpu == 8"
    assert check.judge({"0.allocatable": "8", "0.succeeded": "true"}) == (
        True, "gpu/gpu-inf-1 advertises 8 nvidia.com/gpu: 8 GPUs held by vLLM, as configured")


def test_fails_when_a_serving_node_advertises_fewer_gpus_than_configured():
    check = criterion(parse_site(small_site()), 1, "01-gpus-gpu-gpu-inf-1")
    assert check.judge({"0.allocatable": "7", "0.succeeded": "true"}) == (
        False, "gpu/gpu-inf-1 advertises 7 nvidia.com/gpu; gpu.gpu.nodes.gpu-inf-1.gpus says 8")


def test_nccl_is_skipped_with_one_training_node():
    reasons = dict(not_applicable(parse_site(small_site()), 1))
    assert reasons["01-nccl-under-load-gpu"] == "gpu has 1 training node(s) under the active profile; multi-node NCCL needs two"


def test_nccl_runs_alone_then_beside_warp(complete):
    check = criterion(complete, 1, "01-nccl-under-load-gpu")
    before, baseline, loaded, after = check.steps
    assert [before.decides, after.decides] == [("Job", "drain-before"), ("Job", "drain-after")]
    assert baseline.decides == ("Job", "nccl-baseline") and baseline.background == ()
    assert loaded.decides == ("Job", "nccl-load") and loaded.background == ("warp-load",)
    warp = next(o for o in loaded.objects if o["metadata"]["name"] == "warp-load")
    assert warp["metadata"]["namespace"] == "team-fdc"
    assert "--bucket=site-t-checkpoints" in warp["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--prefix=fdc/fab-verify-load" in warp["spec"]["template"]["spec"]["containers"][0]["args"]


def test_s3_readwrite_uses_the_teams_secret_in_its_namespace():
    check = criterion(parse_site(small_site()), 1, "01-s3-readwrite-gpu")
    job = check.steps[0].objects[1]
    assert job["metadata"]["namespace"] == "team-yield"
    assert job["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [{"secretRef": {"name": "s3-training"}}]
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["s3-roundtrip", "s3://site-t-checkpoints/yield/"]


def test_fails_when_the_object_does_not_read_back():
    check = criterion(parse_site(small_site()), 1, "01-s3-readwrite-gpu")
    assert check.judge({"0.address": "10.30.101.10", "0.put_status": "200", "0.get_status": "403", "0.match": "false"}) == (
        False, "gpu: writing s3://site-t-checkpoints/yield/ as team yield answered 200, reading it back 403 (same bytes: false)")


def test_fails_when_the_s3_endpoint_is_not_the_internal_vip():
    check = criterion(parse_site(small_site()), 1, "01-s3-readwrite-gpu")
    assert check.judge({"0.address": "198.51.100.10", "0.put_status": "200", "0.get_status": "200", "0.match": "true"}) == (
        False, "gpu: the S3 endpoint of team yield's Secret resolved to 198.51.100.10, not the internal VIP 10.30.101.10")


def test_every_flow_from_a_cluster_is_probed_from_each_source():
    check = criterion(parse_site(small_site()), 1, "01-flow-s3")
    assert [s.cluster for s in check.steps] == ["compute", "gpu"]
    assert check.steps[0].objects[1]["spec"]["template"]["spec"]["containers"][0]["args"] == ["tcp", "10.30.101.10", "9000", "5"]


def test_fails_when_a_flow_does_not_connect_from_one_source():
    check = criterion(parse_site(small_site()), 1, "01-flow-s3")
    assert check.judge({"0.connect": "ok", "1.connect": "timeout"}) == (
        False, "10.30.101.10:9000 should connect from every source: gpu timeout")


def test_fails_when_a_denied_pair_connects():
    check = criterion(parse_site(small_site()), 1, "01-denied-compute-to-gpu")
    assert check.judge({"0.connect": "ok"}) == (
        False, "10.30.103.2:2379 should be dropped (timeout) from every source: compute ok")
    assert check.judge({"0.connect": "timeout"}) == (True, "10.30.103.2:2379 dropped from compute")


def test_apiserver_flows_are_left_to_phase_05_with_the_reason():
    reasons = dict(not_applicable(parse_site(small_site()), 1))
    assert reasons["01-flow-multikueue"] == (
        "it admits only kueue-system pods to API servers, as egress on those pods: a probe pod elsewhere is not subject "
        "to it (phase 05 checks MultiKueue's own connection)")


# --- phase 02 ------------------------------------------------------------------------------------------------------

def test_inference_checks_are_skipped_without_inference():
    raw = small_site()
    del raw["inference"]
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["pool"] = "training"
    raw["phase"] = 1
    site = parse_site(raw)
    assert criteria(site, 2) == []
    assert [cid for cid, _ in not_applicable(site, 2)] == [
        "02-inference-call", "02-inference-unauthenticated", "02-inference-rate-limit", "02-serving-slo"]


def test_the_call_takes_the_teams_client_from_keycloak():
    check = criterion(parse_site(small_site()), 2, "02-inference-call")
    container = check.steps[0].objects[1]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["chat", "https://llm.site-t.fab.internal/models/qwen3-8b/v1", "qwen3-8b"]
    assert container["env"][1:] == [
        {"name": "TOKEN_URL", "value": "https://keycloak.site-t.fab.internal/realms/fab/protocol/openid-connect/token"},
        {"name": "CLIENT_ID", "value": "inference-yield"},
        {"name": "CLIENT_SECRET", "valueFrom": {"secretKeyRef": {"name": "inference-yield", "key": "client_secret"}}},
    ]
    assert check.steps[0].cluster == "compute"


def test_fails_when_the_gateway_answers_without_a_token():
    check = criterion(parse_site(small_site()), 2, "02-inference-unauthenticated")
    assert check.judge({"0.chat_status": "200"}) == (
        False, "https://llm.site-t.fab.internal/models/qwen3-8b/v1/chat/completions answered 200 without a token; 401 expected")


def test_the_burst_exceeds_the_teams_rate():
    raw = full_site()
    raw["acceptance"] = {"team": "fdc"}
    check = criterion(parse_site(raw), 2, "02-inference-rate-limit")
    assert check.steps[0].objects[1]["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "3300"


def test_fails_when_no_request_is_limited():
    check = criterion(parse_site(small_site()), 2, "02-inference-rate-limit")
    assert check.judge({"0.token_status": "200", "0.ok": "660", "0.limited": "0", "0.other": "0"}) == (
        False, "660 requests at once by team yield: none limited (429); its rate is 600 a minute")


# --- phase 04 ------------------------------------------------------------------------------------------------------

def test_fails_when_a_team_reads_another_teams_prefix(complete):
    check = criterion(complete, 4, "04-s3-team-isolation")
    assert check.judge({"0.put_status": "403", "0.list_status": "200", "0.get_status": "403"}) == (
        False, "team fdc's keys under s3://site-t-checkpoints/yield/ (team yield's): list 200; 403 expected for each")


def test_fails_when_a_team_may_create_jobs_in_another_teams_namespace(complete):
    check = criterion(complete, 4, "04-team-rbac-gpu")
    results = {"0.own-jobs": "true", "0.own-secrets": "false", "0.own-workloads": "false", "0.other-jobs": "true",
               "0.other-workloads": "false"}
    assert check.judge(results) == (False, "gpu: group oidc:team-fdc: other-jobs true (expected false)")


def test_the_access_review_account_may_only_create_reviews(complete):
    check = criterion(complete, 4, "04-team-rbac-gpu")
    (role,) = [o for o in check.steps[0].objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]


def test_metrics_expect_a_dcgm_series_per_configured_gpu(complete):
    assert metric_queries(Site(complete), "gpu")["dcgm_gpus"] == (
        'count(DCGM_FI_DEV_GPU_UTIL{cluster="site-t-gpu"})', 24)


def test_fails_when_a_component_has_no_series(complete):
    check = criterion(complete, 4, "04-metrics-storage")
    results = {"0.aistor": "4", "0.cilium-agent": "3", "0.cilium-operator": "2", "0.polaris": "0", "0.polaris-db": "1"}
    assert check.judge(results) == (
        False, "storage: http://metrics-prometheus.monitoring:9090 lacks series: polaris 0 (at least 1)")


def test_metrics_are_skipped_without_a_metrics_stack():
    reasons = dict(not_applicable(parse_site(small_site()), 4))
    assert reasons["04-metrics-gpu"] == "the site deploys no metrics stack (no `observability` section)"


def test_fails_when_the_quotas_in_force_are_no_profiles(complete):
    check = criterion(complete, 4, "04-profile-in-force")
    results = {"0.fdc": "4", "0.yield": "6", "1.fdc": "0", "1.yield": "8"}
    assert check.judge(results) == (
        False, ("GPU quotas in force (gpu-train.fdc 0, gpu-train.yield 8, gpu.fdc 4, gpu.yield 6) are those of no profile "
               "among day"))
    assert check.judge({**results, "0.yield": "4"})[0] is True


def test_fails_when_vllm_falls_below_its_budget(complete):
    check = criterion(complete, 4, "04-vllm-recovery")
    assert check.judge({"0.recovered": "true", "0.seconds": "300", "0.fewest_available": "0"}) == (
        False, "vllm-qwen3-8b fell to 0 available replicas; its budget keeps 1")


def test_the_recovery_role_is_confined_to_the_inference_namespace(complete):
    objects_ = criterion(complete, 4, "04-vllm-recovery").steps[0].objects
    (role,) = [o for o in objects_ if o["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "inference"
    assert not [o for o in objects_ if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def notebooks_quota_check():
    return criterion(notebooks_site(), 4, "04-gpu-notebooks")


IN_FORCE = {"0.yield.spec_shares": "4", "0.yield.spec_whole": "0", "0.yield.status_shares": "4", "0.yield.status_whole": "0"}


def test_the_notebooks_quota_is_read_by_an_account_that_may_get_those_quotas_only():
    (step,) = notebooks_quota_check().steps
    roles = [o for o in step.objects if o["kind"] in ("Role", "ClusterRole")]
    assert [(r["kind"], r["metadata"]["namespace"], r["rules"]) for r in roles] == [("Role", "notebooks-yield", [
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get"], "resourceNames": ["notebooks"]}])]


def test_the_notebooks_quota_script_reports_spec_and_status(tmp_path):
    (step,) = notebooks_quota_check().steps
    job = next(o for o in step.objects if o["kind"] == "Job")
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/bash\ncase \"$*\" in *gpu\\\\.shared*) echo -n 4 ;; *) echo -n 0 ;; esac\n")
    kubectl.chmod(0o755)
    out = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, check=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    assert out.splitlines() == [f"FAB-RESULT {k[2:]}={v}" for k, v in IN_FORCE.items()]


def test_notebooks_held_to_their_shares_pass():
    assert notebooks_quota_check().judge(IN_FORCE) == (
        True, "gpu: yield 4 nvidia.com/gpu.shared, no whole GPU, in force")


def test_fails_when_a_notebook_quota_allows_a_whole_gpu():
    assert notebooks_quota_check().judge({**IN_FORCE, "0.yield.spec_whole": "1", "0.yield.status_whole": "1"}) == (
        False, "gpu: yield's whole-GPU quota is 1, 0 expected")


def test_fails_when_the_notebook_quota_is_not_in_force_yet():
    assert notebooks_quota_check().judge({**IN_FORCE, "0.yield.status_shares": "", "0.yield.status_whole": ""}) == (
        False, "gpu: the quota of notebooks-yield is not in force yet (status.hard unset nvidia.com/gpu.shared, unset whole GPUs)")


# --- phase 05 ------------------------------------------------------------------------------------------------------

def test_the_submission_job_is_submitted_as_the_contract_says(complete):
    step = criterion(complete, 5, "05-submission").steps[1]
    submitted = next(o for o in step.objects if o["metadata"]["name"] == "submission-probe")
    assert step.cluster == "compute" and step.background == ("submission-probe",)
    assert submitted["metadata"]["namespace"] == "team-fdc"
    assert submitted["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert submitted["spec"]["suspend"] is True


def test_the_contract_is_read_on_compute_first(complete):
    step = criterion(complete, 5, "05-submission").steps[0]
    (role,) = [o for o in step.objects if o["kind"] == "Role"]
    assert (step.cluster, role["metadata"]["namespace"], role["rules"][0]["resourceNames"]) == (
        "compute", "airflow", ["training-submission"])


CONTRACT = {"0.cluster": "site-t-compute", "0.namespace": "team-fdc", "0.local_queue": "training"}


def test_fails_when_the_job_stays_on_the_manager(complete):
    check = criterion(complete, 5, "05-submission")
    assert check.judge({**CONTRACT, "1.placed": "none"}) == (
        False, "team fdc's job was not dispatched to a MultiKueue worker within 600 s")


def test_fails_when_the_submission_contract_moved(complete):
    check = criterion(complete, 5, "05-submission")
    assert check.judge({**CONTRACT, "0.local_queue": "batch", "1.placed": "gpu-train"}) == (
        False, "the submission contract gives team fdc cluster site-t-compute, namespace team-fdc and LocalQueue batch; "
        "site-t-compute, team-fdc and training expected")


def test_the_submission_passes_on_a_worker(complete):
    check = criterion(complete, 5, "05-submission")
    assert check.judge({**CONTRACT, "1.placed": "gpu-train"}) == (
        True, "team fdc's job, submitted to team-fdc/training on compute as the contract says, ran on worker gpu-train")


def test_without_multikueue_the_job_is_submitted_to_the_serving_gpu_cluster_and_admitted_by_the_teams_queue():
    raw = small_site()
    raw["phase"] = 5
    raw.setdefault("training", {})["quotas"] = {"yield": {"gpu": {"gpus": 8}}}
    site = parse_site(raw)
    check = criterion(site, 5, "05-submission")
    assert [s.cluster for s in check.steps] == ["compute", "gpu"]
    assert check.judge({"0.cluster": f"{site.name}-gpu", "0.namespace": "team-yield", "0.local_queue": "training",
                        "1.placed": "team-yield"}) == (
        True, "team yield's job, submitted to team-yield/training on gpu as the contract says, was admitted by ClusterQueue team-yield")


def remote_site():
    """The smallest site hosting a linked peer's team (site-u's yield), which borrows idle GPUs here."""
    raw = small_site()
    raw["federation"] = {"peers": {"site-u": {"remote_training": {"yield": {"gpu": {"gpus": 0, "borrowing_limit_gpus": 1}}}}},
                         "ranges": {"site-u": ["172.20.0.0/16"]}, "linked": ["site-u"]}
    return parse_site(raw)


def test_a_peers_team_is_submitted_to_its_own_namespace_here():
    site = remote_site()
    (namespace,) = site.remote_teams(linked_only=True)
    check = criterion(site, 5, "05-remote-training-site-u-yield")
    (step,) = check.steps
    submitted = next(o for o in step.objects if o["metadata"]["name"] == "submission-probe")
    assert (step.cluster, submitted["metadata"]["namespace"]) == ("gpu", namespace)
    assert submitted["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"


def test_fails_when_a_peers_team_is_admitted_by_another_queue():
    site = remote_site()
    (namespace,) = site.remote_teams(linked_only=True)
    check = criterion(site, 5, "05-remote-training-site-u-yield")
    assert check.judge({"0.placed": "team-yield"}) == (
        False, f"site-u's team yield's job was admitted by ClusterQueue team-yield; {namespace} expected")


def test_a_peers_team_admitted_in_its_namespace_passes():
    site = remote_site()
    (namespace,) = site.remote_teams(linked_only=True)
    check = criterion(site, 5, "05-remote-training-site-u-yield")
    assert check.judge({"0.placed": namespace}) == (
        True, f"site-u's team yield's job, submitted to {namespace}/training on gpu, was admitted by ClusterQueue {namespace}")


def test_the_ipoib_probe_runs_on_an_inference_node_attached_to_the_weights_network(complete):
    (step,) = criterion(complete, 5, "05-storage-over-ib-gpu").steps
    (job,) = [o for o in step.objects if o["kind"] == "Job"]
    template = job["spec"]["template"]
    assert (job["metadata"]["namespace"], template["metadata"]["annotations"], template["spec"]["nodeSelector"]) == (
        "inference", {"k8s.v1.cni.cncf.io/networks": "ipoib-weights@ib0"}, {"fab.internal/gpu-pool": "inference"})
    assert template["spec"]["containers"][0]["args"][:3] == ["tcp", str(complete.gpu["gpu"].infiniband.s3_ipoib_address), "9000"]


def test_fails_when_the_object_store_does_not_answer_over_ipoib(complete):
    check = criterion(complete, 5, "05-storage-over-ib-gpu")
    address = complete.gpu["gpu"].infiniband.s3_ipoib_address
    assert check.judge({"0.connect": "timeout"}) == (
        False, f"gpu: {address}:9000 (gpu.gpu.infiniband.s3_ipoib_address) answered timeout over the IPoIB network "
        "ipoib-weights; the weights cannot load over InfiniBand")


# --- config --------------------------------------------------------------------------------------------------------

def test_fails_when_the_probes_team_is_not_a_team():
    raw = small_site()
    raw["acceptance"] = {"team": "fab"}
    assert config_errors(raw) == [
        "fab-platform:site.acceptance.team: fab is not a team of the site; name one of yield, or leave it out for the first"]


def test_fails_when_the_serving_loop_names_an_unserved_model():
    raw = small_site()
    raw["acceptance"] = {"serving_loop": {"team": "yield", "model": "llama", "features": "wafer", "training_image": "t:1"}}
    assert config_errors(raw) == [
        "fab-platform:site.acceptance.serving_loop.model: llama is not a served model; name one of qwen3-8b"]


# --- the probe -----------------------------------------------------------------------------------------------------

def probe(*args: str) -> str:
    return subprocess.run([sys.executable, str(PROBE_SCRIPT), *args], capture_output=True, text=True, check=True).stdout


def test_the_probe_reports_a_completed_handshake():
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert probe("tcp", "127.0.0.1", str(server.getsockname()[1]), "2") == "FAB-RESULT connect=ok\n"


def test_the_probe_reports_a_refused_connection():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    assert probe("tcp", "127.0.0.1", str(port), "2") == "FAB-RESULT connect=refused\n"


def test_the_probe_signs_s3_requests_as_aws_documents():
    """The GET Object example of AWS's Signature Version 4 reference for S3 ("Examples: Signature Calculations")."""
    headers = {"host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9", "x-amz-date": "20130524T000000Z",
               "x-amz-content-sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
    assert probe_script.sigv4("GET", "/test.txt", "", headers, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1") == (
        "host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


def notebooks_site(**sharing: Any):
    raw = small_site()
    add_gpu_notebooks(raw, **sharing)
    if sharing.get("mode") == "mig":
        raw["gpu"]["gpu"]["mig_strategy"] = "mixed"
    return parse_site(raw)


def test_a_notebooks_node_is_never_asked_for_whole_gpus():
    """Time-slicing renames its GPUs to nvidia.com/gpu.shared, one per pod: a pod asking for nvidia.com/gpu: 8 there would
    stay pending, and the criterion could never pass."""
    check = criterion(notebooks_site(), 1, "01-gpus-gpu-gpu-nb-1")
    requested = [c["resources"] for step in check.steps for obj in step.objects if obj["kind"] == "Job"
                 for c in obj["spec"]["template"]["spec"]["containers"]]
    assert requested and not any(key.startswith("nvidia.com/") for r in requested for part in r.values() for key in part)


def test_a_time_sliced_node_is_counted_by_the_slices_it_advertises():
    check = criterion(notebooks_site(), 1, "01-gpus-gpu-gpu-nb-1")
    assert check.bound == "nvidia.com/gpu.shared == 32"
    assert check.judge({"0.allocatable": "32", "0.succeeded": "true"}) == (
        True, "gpu/gpu-nb-1 advertises 32 nvidia.com/gpu.shared: 8 GPUs shared 4 ways, as configured")


def test_fails_when_a_time_sliced_node_advertises_fewer_slices_than_its_gpus_make():
    check = criterion(notebooks_site(), 1, "01-gpus-gpu-gpu-nb-1")
    assert check.judge({"0.allocatable": "28", "0.succeeded": "true"}) == (
        False, "gpu/gpu-nb-1 advertises 28 nvidia.com/gpu.shared; its 8 GPUs (gpu.gpu.nodes.gpu-nb-1.gpus) shared 4 ways "
        "(gpu.gpu.sharing) make 32")


def test_a_mig_node_is_counted_by_the_instances_of_its_profile():
    site = notebooks_site(mode="mig", mig_profile="1g.10gb")
    check = criterion(site, 1, "01-gpus-gpu-gpu-nb-1")
    assert check.bound == "nvidia.com/mig-1g.10gb == 56"


def test_the_count_is_read_by_an_account_that_may_get_this_node_only():
    check = criterion(notebooks_site(), 1, "01-gpus-gpu-gpu-nb-1")
    (role,) = [obj for step in check.steps for obj in step.objects if obj["kind"] == "ClusterRole"]
    job = next(obj for step in check.steps for obj in step.objects if obj["kind"] == "Job")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": ["gpu-nb-1"]}]
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "set -eu\nn=$(kubectl get node gpu-nb-1 -o jsonpath='{.status.allocatable.nvidia\\.com/gpu\\.shared}')\n"
        'echo "FAB-RESULT allocatable=${n:-0}"']
