"""Phase 01's storage baseline (fabctl/verify/criteria/phase_01_storage.py): the pods' own script and awk read warp's
real result summary (tests/fixtures/verify/warp/, run with busybox as in the alpine warp image), the floors come from
the bond's line rate in the right units, the judge names the node or the aggregate below its floor and the field to
change, and the Indexed Job is one restricted pod per training node, queued as the team's job, valid against the schema."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from engines import engine
from schemas import CrdSchemas, schema_errors
from small_site import SITE_CA, small_site

from components.config import parse_site
from components.kube import restricted_security_context
from fabctl.render import PROJECT_DIR
from fabctl.verify.criteria import criteria, not_applicable
from fabctl.verify.criteria.phase_01_storage import WARP_SUMMARY_AWK, floor, mib_per_sec
from fabctl.verify.runner import parse_results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "verify" / "warp"
NODES = ("gpu-trn-1", "gpu-trn-2")
CID = "01-storage-baseline-gpu"


def two_training_nodes(**acceptance) -> dict:
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "training"}
    if acceptance:
        raw["acceptance"] = acceptance
    return raw


def baseline(raw: dict):
    with contextlib.chdir(PROJECT_DIR):  # ca_bundle is a path relative to the project
        site = parse_site(raw)
    return next(c for c in criteria(site, 1) if c.id == CID)


@pytest.fixture(scope="module")
def check():
    return baseline(two_training_nodes())


def job_of(check) -> dict:
    return next(o for o in check.steps[1].objects if o["kind"] == "Job")


def summary(op: str, fixture: str) -> dict[str, str]:
    """The pod's awk program, run by busybox (the warp image's awk) on a recorded warp summary."""
    out = subprocess.run([str(engine("busybox")), "awk", "-v", f"op={op}", "-v", "node=gpu-trn-1", WARP_SUMMARY_AWK,
                          str(FIXTURES / fixture)], capture_output=True, text=True, check=True).stdout
    return parse_results(out)


def results(put: dict[str, float], get: dict[str, float], **extra: str) -> dict[str, str]:
    found = {"1.succeeded": "true"}
    for op, figures in (("put", put), ("get", get)):
        for node, value in figures.items():
            found[f"1.{op}_mib_per_sec.{node}"] = str(value)
            found[f"1.{op}_errors.{node}"] = "0"
            found[f"1.{op}_start_epoch_sec.{node}"] = "1700000000"
    return {**found, **extra}


# --- warp's summary, as the pod reads it ----------------------------------------------------------------------------

def test_reads_put_throughput_from_warps_summary():
    assert summary("put", "put.txt") == {"put_mib_per_sec.gpu-trn-1": "9873.41", "put_errors.gpu-trn-1": "0"}


def test_reads_get_throughput_from_warps_summary():
    assert summary("get", "get.txt") == {"get_mib_per_sec.gpu-trn-1": "17543.88", "get_errors.gpu-trn-1": "0"}


def test_reads_the_failed_requests_of_a_run():
    assert summary("put", "put-errors.txt") == {"put_mib_per_sec.gpu-trn-1": "4120.06", "put_errors.gpu-trn-1": "3"}


def test_a_run_too_short_to_report_has_no_throughput():
    assert summary("put", "put-too-short.txt") == {"put_mib_per_sec.gpu-trn-1": "none", "put_errors.gpu-trn-1": "0"}


def test_a_get_report_is_not_read_as_put():
    assert summary("put", "get.txt")["put_mib_per_sec.gpu-trn-1"] == "none"


def test_the_pods_script_runs_put_then_get_and_prints_each_nodes_figures(check, tmp_path):
    """The pod's very script under busybox sh, with a stand-in for /warp that prints the recorded summaries and
    /tmp moved to the test's directory."""
    fake = tmp_path / "warp"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\ncat {FIXTURES}/"$1".txt\n')
    fake.chmod(0o755)
    script = job_of(check)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    script = script.replace("/tmp/", f"{tmp_path}/").replace("/warp ", f"{fake} ")
    run = subprocess.run([str(engine("busybox")), "sh", "-c", script], capture_output=True, text=True,
                         env={"NODE_NAME": "gpu-trn-2", "PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 0, run.stderr
    figures = parse_results(run.stdout)
    assert {k: v for k, v in figures.items() if "start" not in k} == {
        "put_mib_per_sec.gpu-trn-2": "9873.41", "put_errors.gpu-trn-2": "0",
        "get_mib_per_sec.gpu-trn-2": "17543.88", "get_errors.gpu-trn-2": "0"}
    assert figures["put_start_epoch_sec.gpu-trn-2"].isdigit() and figures["get_start_epoch_sec.gpu-trn-2"].isdigit()
    put, get = (tmp_path / "calls").read_text().splitlines()
    common = ("--no-color --host=s3.site-t.fab.internal:9000 --tls --region=us-east-1 --bucket=site-t-checkpoints "
              "--prefix=yield/fab-verify-storage/gpu-trn-2/ --noclear --obj.size=64MiB --concurrent=32 --duration=30s")
    assert put == f"put {common} --benchdata={tmp_path}/put"
    assert get == f"get {common} --list-existing --benchdata={tmp_path}/get"


def test_the_pod_fails_when_warp_fails(check, tmp_path):
    fake = tmp_path / "warp"
    fake.write_text("#!/bin/sh\necho 'warp: <ERROR> Access Denied.' >&2\nexit 1\n")
    fake.chmod(0o755)
    script = job_of(check)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    script = script.replace("/tmp/", f"{tmp_path}/").replace("/warp ", f"{fake} ")
    run = subprocess.run([str(engine("busybox")), "sh", "-c", script], capture_output=True, text=True,
                         env={"NODE_NAME": "gpu-trn-1", "PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 1
    assert parse_results(run.stdout)["put_mib_per_sec.gpu-trn-1"] == "none"


# --- the floors -----------------------------------------------------------------------------------------------------

def test_one_gbps_is_119_mib_per_sec():
    # 10^9 bits / 8 = 125,000,000 bytes per second; / 2^20 = 119.209 MiB/s.
    assert mib_per_sec(1) == pytest.approx(119.2092896)


def test_the_default_floors_are_60_and_40_percent_of_a_200_gbps_bond():
    acceptance = parse_site(small_site()).acceptance
    # 200 Gb/s = 23,841.86 MiB/s; 60 % of it 14,305.11, 40 % 9,536.74; two nodes twice that.
    get, put = floor(acceptance, "GET", 2), floor(acceptance, "PUT", 2)
    assert (round(get.node_mib_per_sec, 2), round(get.aggregate_mib_per_sec, 2)) == (14305.11, 28610.23)
    assert (round(put.node_mib_per_sec, 2), round(put.aggregate_mib_per_sec, 2)) == (9536.74, 19073.49)


def test_a_floor_in_mib_per_sec_replaces_the_percentage():
    acceptance = parse_site(two_training_nodes(storage_baseline_min_get_mib_per_sec=5000.0)).acceptance
    assert floor(acceptance, "GET", 2).node_mib_per_sec == 5000.0
    assert floor(acceptance, "GET", 2).why == "acceptance.storage_baseline_min_get_mib_per_sec"


def test_what_aistor_serves_caps_the_aggregate_and_each_node_gets_its_share():
    acceptance = parse_site(two_training_nodes(storage_baseline_max_aggregate_put_mib_per_sec=10000.0)).acceptance
    put = floor(acceptance, "PUT", 2)
    assert (put.aggregate_mib_per_sec, put.node_mib_per_sec) == (10000.0, 5000.0)


def test_the_bound_shows_both_floors(check):
    assert check.bound == ("PUT >= 9536.7 MiB/s per node, >= 19073.5 MiB/s together; "
                           "GET >= 14305.1 MiB/s per node, >= 28610.2 MiB/s together")


# --- the judge ------------------------------------------------------------------------------------------------------

def test_passes_when_every_node_and_the_sum_reach_their_floors(check):
    assert check.judge(results({"gpu-trn-1": 10000, "gpu-trn-2": 11000}, {"gpu-trn-1": 15000, "gpu-trn-2": 16000})) == (
        True, ("gpu: 2 training nodes at once, each above its floors (PUT 9536.7, GET 14305.1 MiB/s); together PUT "
               "21000.0 MiB/s; GET 31000.0 MiB/s"))


def test_fails_when_a_node_is_below_its_floor(check):
    # The sum (29300 MiB/s) passes the aggregate GET floor; gpu-trn-2 alone is below its own.
    assert check.judge(results({"gpu-trn-1": 10000, "gpu-trn-2": 10000}, {"gpu-trn-1": 16000, "gpu-trn-2": 13300})) == (
        False, ("gpu: GET below the per-node floor of 14305.1 MiB/s (60 % of 200 Gb/s: "
                "acceptance.storage_baseline_min_get_percent of acceptance.storage_baseline_nic_gbps): gpu-trn-2 13300.0 MiB/s"))


def test_fails_when_the_aggregate_is_below_its_floor(check):
    assert check.judge(results({"gpu-trn-1": 9000, "gpu-trn-2": 10000}, {"gpu-trn-1": 15000, "gpu-trn-2": 15000})) == (
        False, ("gpu: PUT from the 2 training nodes together averaged 19000.0 MiB/s, below the aggregate floor of "
                "19073.5 MiB/s (2 x 9536.7, 40 % of 200 Gb/s: acceptance.storage_baseline_min_put_percent of "
                "acceptance.storage_baseline_nic_gbps); nodes below their floor: gpu-trn-1"))


def test_fails_when_a_node_reports_no_figure(check):
    found = results({"gpu-trn-1": 10000}, {"gpu-trn-1": 15000}, **{"1.succeeded": "false"})
    assert check.judge(found) == (
        False, ("gpu: no PUT figure from gpu-trn-2: warp (Job storage-baseline in team-yield) did not finish (its job failed "
                "or timed out)"))


def test_fails_when_the_job_failed_though_every_node_reported(check):
    found = results({"gpu-trn-1": 10000, "gpu-trn-2": 10000}, {"gpu-trn-1": 15000, "gpu-trn-2": 15000},
                    **{"1.succeeded": "false"})
    assert check.judge(found) == (
        False, ("gpu: warp reported its figures but its Job storage-baseline in team-yield failed (a pod exited non-zero: "
                "its log says why)"))


def test_fails_when_requests_failed(check):
    found = results({"gpu-trn-1": 10000, "gpu-trn-2": 10000}, {"gpu-trn-1": 15000, "gpu-trn-2": 15000},
                    **{"1.put_errors.gpu-trn-2": "3"})
    assert check.judge(found) == (False, "gpu: PUT requests failed, errors per node: gpu-trn-2 3 (see the pods' logs)")


def test_fails_when_the_nodes_runs_did_not_overlap(check):
    found = results({"gpu-trn-1": 10000, "gpu-trn-2": 10000}, {"gpu-trn-1": 15000, "gpu-trn-2": 15000},
                    **{"1.get_start_epoch_sec.gpu-trn-2": "1700000004"})
    assert check.judge(found) == (
        False, ("gpu: the nodes' GET runs started 4 s apart, more than 3 s (10 % of acceptance.storage_baseline_duration_sec): "
                "their sum is no aggregate; pre-pull the warp image on the training nodes or raise the duration"))


# --- the job --------------------------------------------------------------------------------------------------------

def test_one_pod_on_each_training_node_at_once(check):
    spec = job_of(check)["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    pod = spec["template"]["spec"]
    affinity = pod["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(NODES)}]}]
    (anti,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    env = pod["containers"][0]["env"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in env


def test_runs_as_the_teams_queued_job_with_its_keys_off_the_command_line(check):
    job = job_of(check)
    assert job["metadata"]["namespace"] == "team-yield"
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    container = job["spec"]["template"]["spec"]["containers"][0]
    keys = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert keys == {"WARP_ACCESS_KEY": {"name": "s3-training", "key": "AWS_ACCESS_KEY_ID"},
                    "WARP_SECRET_KEY": {"name": "s3-training", "key": "AWS_SECRET_ACCESS_KEY"}}
    assert "AWS_" not in container["args"][0]


def test_drains_its_folder_before_and_after(check):
    before, _, after = check.steps
    for step in (before, after):
        job = next(o for o in step.objects if o["kind"] == "Job")
        assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["s3-drain", "s3://site-t-checkpoints/yield/fab-verify-storage/"]


def test_every_object_validates_strictly_with_the_sites_ca(crd_dir):
    raw = two_training_nodes()
    raw["ca_bundle"] = SITE_CA
    check = baseline(raw)
    objects = [o for step in check.steps for o in step.objects]
    assert any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "storage-baseline-ca" for o in objects)
    crds = CrdSchemas(crd_dir)
    assert {f"{o['kind']}/{o['metadata']['name']}": e for o in objects if (e := schema_errors(o, crds))} == {}


def test_the_pods_are_restricted(check):
    pod = job_of(check)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"] == restricted_security_context(65532)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False


def test_is_skipped_on_a_cluster_without_training_nodes():
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["pool"] = "inference"
    reasons = dict(not_applicable(parse_site(raw), 1))
    assert reasons[CID] == ("gpu has no training node under the active profile: a probe with a team's keys runs as the "
                            "team's job, which Kueue places on the training pool only")
