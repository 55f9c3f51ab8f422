"""Phase 01's NCCL check (fabctl/verify/criteria/phase_01_nccl.py nccl_under_load): built at phase 1 from built-in kinds
(no Trainer), its figures read in the launcher by the very shell lines tested here on a real-format log, its floor
from the published table (nccl_floors.py) or the site, and its verdicts."""

from __future__ import annotations

import contextlib
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import config_errors, site_raw
from schemas import CrdSchemas, schema_errors
from small_site import full_site

from components.config import parse_site
from fabctl.render import PROJECT_DIR
from fabctl.verify.criteria import criteria, not_applicable
from fabctl.verify.criteria.nccl_floors import FLOORS, family, floor_for, interconnect
from fabctl.verify.criteria.phase_01_nccl import (
    GENERATE_ANNOTATION,
    MPI_EXCEPTION,
    largest_message_mib,
    nccl_busbw_script,
    nccl_transport_script,
)
from fabctl.verify.runner import apply_order

FIXTURE = Path(__file__).parents[1] / "fixtures" / "verify" / "nccl-tests" / "all_reduce_perf-2x8-h100.log"
CID = "01-nccl-under-load-gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
IB_LOG = """\
gpu-trn-1:41:41 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.42.0.11<0>
gpu-trn-1:41:41 [0] NCCL INFO Using network IB
gpu-trn-1:41:60 [7] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA
"""
SOCKET_LOG = """\
gpu-trn-1:41:41 [0] NCCL INFO NET/IB : No device found.
gpu-trn-1:41:41 [0] NCCL INFO NET/Socket : Using [0]eth0:10.42.0.11<0>
gpu-trn-1:41:41 [0] NCCL INFO Using network Socket
gpu-trn-1:41:60 [7] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0
"""
SIXTEEN_GIB = str(16 << 30)
OK = {"1.succeeded": "true", "1.busbw_gb_per_sec": "363.4", "1.largest_bytes": SIXTEEN_GIB, "1.transport": "ib",
      "1.wrong_values": "0", "2.succeeded": "true", "2.busbw_gb_per_sec": "330.0", "2.largest_bytes": SIXTEEN_GIB,
      "2.transport": "ib", "2.wrong_values": "0", "3.objects": "310"}


def two_node_site(**acceptance: Any) -> dict[str, Any]:
    """full_site() with a second H100 training node on gpu (what multi-node NCCL needs) and the given acceptance keys."""
    raw = full_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "training"}
    raw.setdefault("acceptance", {}).update(acceptance)
    return raw


def build(raw: dict[str, Any]):
    """The NCCL check of the site, or the reason it is not run."""
    site = parse_site(raw)
    found = [c for c in criteria(site, 1) if c.id == CID]
    return found[0] if found else dict(not_applicable(site, 1))[CID]


@pytest.fixture(scope="module")
def check():
    return build(two_node_site())


def run(lines: list[str], log: str, tmp_path: Path) -> str:
    """Run shell lines of the launcher on `log` as its /tmp/nccl.log."""
    path = tmp_path / "nccl.log"
    path.write_text(log)
    script = "\n".join(lines).replace("/tmp/nccl.log", str(path))
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


def objects(check, index: int = 1) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in check.steps[index].objects}


def launcher_script(check, index: int = 1) -> str:
    name = "nccl-baseline" if index == 1 else "nccl-load"
    return objects(check, index)[("Job", name)]["spec"]["template"]["spec"]["containers"][0]["args"][0]


# --- the figures, read in the launcher -------------------------------------------------------------------------------

def test_reads_the_out_of_place_busbw_of_the_largest_message_not_the_average(tmp_path):
    assert run(nccl_busbw_script("/tmp/nccl.log"), FIXTURE.read_text(), tmp_path) == (
        f"FAB-RESULT largest_bytes={SIXTEEN_GIB}\nFAB-RESULT busbw_gb_per_sec=363.40\nFAB-RESULT wrong_values=0\n")


def test_reports_no_figure_when_the_log_has_no_table(tmp_path):
    log = "\n".join(FIXTURE.read_text().splitlines()[:25])  # mpirun stopped before the first size
    assert run(nccl_busbw_script("/tmp/nccl.log"), log, tmp_path) == (
        "FAB-RESULT largest_bytes=none\nFAB-RESULT busbw_gb_per_sec=none\nFAB-RESULT wrong_values=0\n")


def test_counts_the_wrong_values_of_every_row(tmp_path):
    """all_reduce_perf's #wrong columns (out of place, in place): a row with 3 wrong values in place is counted."""
    rows = FIXTURE.read_text().splitlines()
    (index, row) = next((i, r) for i, r in enumerate(rows) if r.split()[:1] == [str(64 << 20)])
    fields = row.split()
    assert fields[12] == "0"
    rows[index] = row[:row.rindex(" 0")] + " 3"
    out = run(nccl_busbw_script("/tmp/nccl.log"), "\n".join(rows) + "\n", tmp_path)
    assert out.splitlines()[-1] == "FAB-RESULT wrong_values=3"


def test_reads_the_transport_of_the_recorded_format(tmp_path):
    assert run(nccl_transport_script("/tmp/nccl.log"), FIXTURE.read_text(), tmp_path) == "FAB-RESULT transport=ib\n"


def test_reports_ib_when_the_channels_run_over_infiniband(tmp_path):
    assert run(nccl_transport_script("/tmp/nccl.log"), IB_LOG, tmp_path) == "FAB-RESULT transport=ib\n"


def test_fails_when_nccl_falls_back_to_sockets_after_finding_no_ib_device(tmp_path):
    assert run(nccl_transport_script("/tmp/nccl.log"), SOCKET_LOG, tmp_path) == "FAB-RESULT transport=socket\n"


def test_no_ib_device_alone_is_not_ib(tmp_path):
    log = "gpu-trn-1:41:41 [0] NCCL INFO NET/IB : No device found.\n"
    assert run(nccl_transport_script("/tmp/nccl.log"), log, tmp_path) == "FAB-RESULT transport=none\n"


def test_the_launcher_runs_the_tested_lines_on_its_log(check):
    for index in (1, 2):
        script = launcher_script(check, index)
        assert "\n".join(nccl_busbw_script("/tmp/nccl.log")) in script
        assert "\n".join(nccl_transport_script("/tmp/nccl.log")) in script
        assert "Avg bus bandwidth" not in script


def test_the_launcher_reports_its_figures_from_the_fixture_end_to_end(check, tmp_path):
    """The launcher's script after mpirun, on the fixture as mpirun's output: what the runner collects."""
    script = launcher_script(check)
    after = script[script.index("rc=$?"):].replace("exit $rc", "exit 0")
    assert run(["rc=0", after], FIXTURE.read_text(), tmp_path) == (
        f"FAB-RESULT largest_bytes={SIXTEEN_GIB}\nFAB-RESULT busbw_gb_per_sec=363.40\nFAB-RESULT wrong_values=0\n"
        "FAB-RESULT transport=ib\n")


# --- the largest message ---------------------------------------------------------------------------------------------

def test_the_largest_message_is_16_gib_by_default(check):
    assert "all_reduce_perf -b 64M -e 16384M -f 2 -g 1 " in launcher_script(check)


def test_a_gpu_too_small_for_16_gib_gets_the_largest_message_that_fits():
    """all_reduce_perf holds three buffers of the largest message and 1 GiB: 40 GiB GPUs fit 13 GiB, so 8 GiB runs."""
    raw = two_node_site(nccl_min_busbw_gb_per_sec=150.0)
    raw["gpu_types"] = {"a100": {"memory_mib": 40960, "product": "NVIDIA-A100-SXM4-40GB"}}
    for node in ("gpu-trn-1", "gpu-trn-2"):
        raw["gpu"]["gpu"]["nodes"][node]["gpu_type"] = "a100"
    check = build(raw)
    assert "all_reduce_perf -b 64M -e 8192M -f 2 -g 1 " in launcher_script(check)
    assert check.bound.startswith("busbw at 8 GiB >= 150 GB/s")


def test_fails_when_the_gpus_cannot_hold_an_8_gib_message():
    raw = two_node_site()
    raw["gpu_types"] = {"l4": {"memory_mib": 23034, "product": "NVIDIA-L4"}}
    for node in ("gpu-trn-1", "gpu-trn-2"):
        raw["gpu"]["gpu"]["nodes"][node]["gpu_type"] = "l4"
    assert build(raw) == (
        "NVIDIA-L4 holds 23034 MiB per GPU, too little for all_reduce_perf's three buffers of an 8 GiB message and 1 GiB, "
        "the smallest largest message a published floor is read at; set acceptance.nccl_max_message_mib and "
        "acceptance.nccl_min_busbw_gb_per_sec")


def test_the_site_sets_the_largest_message():
    check = build(two_node_site(nccl_max_message_mib=12000))
    assert "all_reduce_perf -b 64M -e 8192M -f 2 -g 1 " in launcher_script(check)
    assert check.bound.startswith("busbw at 8 GiB >= 270 GB/s")


def test_fails_when_the_sites_largest_message_is_below_where_the_floors_are_read():
    assert build(two_node_site(nccl_max_message_mib=4096)) == (
        "acceptance.nccl_max_message_mib makes 4 GiB the largest message, and the published floors are read at 8 GiB or "
        "more; set acceptance.nccl_min_busbw_gb_per_sec")


def test_fails_when_the_sites_smallest_message_is_above_its_largest():
    assert config_errors(two_node_site(nccl_min_message_mib=8192, nccl_max_message_mib=4096)) == [(
        "fab-platform:site.acceptance.nccl_min_message_mib: 8192 is above nccl_max_message_mib (4096); the smallest message "
        "must not exceed the largest")]


def test_fails_when_the_link_rate_is_not_an_infiniband_rate():
    assert config_errors(two_node_site(nccl_hca_link_gbit_per_sec=300)) == [
        "fab-platform:site.acceptance.nccl_hca_link_gbit_per_sec: Input should be 100, 200, 400 or 800 (got 300)"]


def test_the_largest_message_is_the_last_doubling_of_the_smallest():
    assert [largest_message_mib(64, limit) for limit in (16384, 13312, 12000, 64, 63)] == [16384, 8192, 8192, 64, None]


# --- the floor -------------------------------------------------------------------------------------------------------

def test_h100_and_h200_over_eight_ndr_rails_have_a_published_floor():
    assert [(floor_for(p, 400, 8).family, floor_for(p, 400, 8).busbw_gb_per_sec) for p in (H100, "NVIDIA-H200")] == [
        ("H100", 270.0), ("H200", 270.0)]


def test_no_floor_is_published_for_other_rails_or_gpus():
    assert [floor_for(H100, 200, 8), floor_for(H100, 400, 4), floor_for("NVIDIA-A100-SXM4-80GB", 400, 8)] == [None] * 3


def test_the_family_is_read_from_the_product_label():
    assert [family(H100), family("NVIDIA-H200"), family("NVIDIA-GB200"), family("Tesla-T4")] == [
        "H100", "H200", "GB200", "Tesla-T4"]


def test_every_floor_is_in_the_docs_with_its_source():
    docs = (PROJECT_DIR / "docs" / "acceptance.md").read_text()
    for floor in FLOORS:
        row = f"| {floor.family} | {interconnect(floor.link_gbit_per_sec, floor.rails)} | {floor.busbw_gb_per_sec:g} GB/s |"
        assert row in docs, row
        assert floor.cite and floor.source


def test_the_published_floor_applies_and_says_where_it_comes_from(check):
    assert check.bound == (
        "busbw at 16 GiB >= 270 GB/s (the published floor for H100 over 8 x 400 Gb/s InfiniBand (NDR): NVIDIA AI Cluster "
        "Runtime's H100 gate, 300 GB/s at 16 GiB less its 10 % tolerance), reduction under load <= 20 %")


def test_the_sites_floor_replaces_the_published_one():
    check = build(two_node_site(nccl_min_busbw_gb_per_sec=400.0))
    assert check.bound == "busbw at 16 GiB >= 400 GB/s (acceptance.nccl_min_busbw_gb_per_sec), reduction under load <= 20 %"
    assert check.judge(OK) == (False, ("gpu: baseline bus bandwidth at 16 GiB 363.4 GB/s is below the floor of 400 GB/s "
                                       "(acceptance.nccl_min_busbw_gb_per_sec)"))


def test_fails_when_no_floor_is_published_for_the_gpu_type():
    raw = two_node_site()
    raw["gpu_types"] = {"b200": {"memory_mib": 183359, "product": "NVIDIA-B200"}}
    for node in ("gpu-trn-1", "gpu-trn-2"):
        raw["gpu"]["gpu"]["nodes"][node]["gpu_type"] = "b200"
    assert build(raw) == ("no published floor for NVIDIA-B200 over 8 x 400 Gb/s InfiniBand (NDR); set "
                          "acceptance.nccl_min_busbw_gb_per_sec")


def test_the_rails_are_the_hcas_nccl_may_use_where_the_site_names_them():
    """Four HCAs on 8-GPU nodes are four rails: the 8-rail floor is not theirs."""
    raw = two_node_site()
    raw["gpu"]["gpu"].setdefault("infiniband", {})["nccl_hcas"] = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert build(raw) == (
        f"no published floor for {H100} over 4 x 400 Gb/s InfiniBand (NDR); set acceptance.nccl_min_busbw_gb_per_sec")


def test_fails_when_no_floor_is_published_for_the_link_rate():
    assert build(two_node_site(nccl_hca_link_gbit_per_sec=200)) == (
        f"no published floor for {H100} over 8 x 200 Gb/s InfiniBand (HDR); set acceptance.nccl_min_busbw_gb_per_sec")


def test_an_unknown_gpu_type_runs_with_the_sites_floor():
    raw = two_node_site(nccl_min_busbw_gb_per_sec=500.0)
    raw["gpu_types"] = {"b200": {"memory_mib": 183359, "product": "NVIDIA-B200"}}
    for node in ("gpu-trn-1", "gpu-trn-2"):
        raw["gpu"]["gpu"]["nodes"][node]["gpu_type"] = "b200"
    assert build(raw).bound.startswith("busbw at 16 GiB >= 500 GB/s (acceptance.nccl_min_busbw_gb_per_sec)")


# --- the verdicts ----------------------------------------------------------------------------------------------------

def test_passes_above_the_floor_and_within_the_bound(check):
    assert check.judge(OK) == (True, ("gpu: bus bandwidth at 16 GiB 363.4 GB/s alone (floor 270 GB/s), 330.0 GB/s under "
                                      "storage load: 9.2 % reduction, within 20 %"))


def test_fails_when_the_baseline_is_below_the_published_floor(check):
    assert check.judge({**OK, "1.busbw_gb_per_sec": "180.0", "2.busbw_gb_per_sec": "175.0"}) == (False, (
        "gpu: baseline bus bandwidth at 16 GiB 180.0 GB/s is below the floor of 270 GB/s (the published floor for H100 "
        "over 8 x 400 Gb/s InfiniBand (NDR): NVIDIA AI Cluster Runtime's H100 gate, 300 GB/s at 16 GiB less its 10 % "
        "tolerance)"))


def test_fails_when_bandwidth_falls_beyond_the_bound_under_load(check):
    assert check.judge({**OK, "2.busbw_gb_per_sec": "250.0"}) == (False, (
        "gpu: bus bandwidth at 16 GiB fell 31.2 % under storage load (363.4 -> 250.0 GB/s), above the bound of 20 % "
        "(acceptance.nccl_max_reduction_percent)"))


def test_the_bound_comes_from_config():
    check = build(two_node_site(nccl_max_reduction_percent=5.0))
    assert check.judge(OK)[0] is False
    assert check.bound.endswith("reduction under load <= 5 %")


def test_fails_when_nccl_falls_back_to_sockets(check):
    assert check.judge({**OK, "1.transport": "socket"}) == (
        False, "gpu: the baseline run did not use InfiniBand: NCCL fell back to sockets (via NET/Socket)")


def test_fails_when_nccls_log_shows_no_infiniband(check):
    assert check.judge({**OK, "2.transport": "none"}) == (
        False, "gpu: the run under storage load did not show InfiniBand: NCCL's log has no channel via NET/IB")


def test_fails_when_the_storage_load_wrote_nothing(check):
    assert check.judge({**OK, "3.objects": "0"}) == (False, (
        "gpu: the storage load wrote nothing under s3://site-t-checkpoints/fdc/fab-verify-load/: warp did not run beside "
        "NCCL (its Job warp-load in team-fdc)"))


def test_fails_when_the_run_under_load_did_not_finish(check):
    results = {k: v for k, v in OK.items() if not k.startswith("2.")} | {"2.succeeded": "false"}
    assert check.judge(results) == (False, "gpu: the run under storage load did not finish (its job failed or timed out)")


def test_fails_when_the_launcher_failed_though_it_printed_its_figures(check):
    assert check.judge({**OK, "1.succeeded": "false"}) == (False, (
        "gpu: the baseline run reported 363.4 GB/s but its launcher failed (mpirun or all_reduce_perf exited non-zero: "
        "its log says why)"))


def test_fails_when_all_reduce_perf_found_wrong_values(check):
    assert check.judge({**OK, "2.wrong_values": "12"}) == (False, (
        "gpu: the run under storage load reported 12 wrong values: all_reduce's results must be checked and right"))


def test_fails_when_all_reduce_perf_lowered_the_largest_message(check):
    assert check.judge({**OK, "1.largest_bytes": str(8 << 30)}) == (False, (
        f"gpu: the baseline run ended at {8 << 30} B, not at the {SIXTEEN_GIB} B (16 GiB) asked: all_reduce_perf lowers "
        "its largest message when the GPUs' memory cannot hold it"))


# --- what is applied: built-in kinds, at phase 1 ---------------------------------------------------------------------

def test_the_check_is_built_at_phase_1_without_trainer():
    raw = two_node_site()
    raw["training"] = {"runtimes": False}
    check = build(raw)
    assert [s.decides for s in check.steps] == [("Job", "drain-before"), ("Job", "nccl-baseline"), ("Job", "nccl-load"),
                                                ("Job", "drain-after")]
    assert {o["apiVersion"] for s in check.steps for o in s.objects} == {"v1", "batch/v1"}
    assert check.needs == ()


def test_each_run_is_a_headless_service_an_indexed_job_of_workers_and_a_launcher(check):
    run = objects(check)
    assert sorted(run) == [("ConfigMap", "nccl-ssh"), ("Job", "nccl-baseline"), ("Job", "nccl-worker"),
                           ("Namespace", "fab-verify-nccl-baseline"), ("Secret", "nccl-ssh-key"), ("Service", "nccl-workers")]
    workers, service = run[("Job", "nccl-worker")]["spec"], run[("Service", "nccl-workers")]["spec"]
    assert (workers["completionMode"], workers["completions"], workers["parallelism"], workers["backoffLimit"]) == (
        "Indexed", 2, 2, 0)
    pod = workers["template"]["spec"]
    assert pod["subdomain"] == "nccl-workers"
    assert (service["clusterIP"], service["publishNotReadyAddresses"]) == ("None", True)
    assert service["selector"].items() <= workers["template"]["metadata"]["labels"].items()


def test_each_worker_is_on_its_own_node_of_the_pair_with_its_gpus_rdma_and_nccl_settings(check):
    pod = objects(check)[("Job", "nccl-worker")]["spec"]["template"]["spec"]
    hosts = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert hosts[0]["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In",
                                             "values": ["gpu-trn-1", "gpu-trn-2"]}]
    (apart,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    assert apart["labelSelector"]["matchLabels"].items() <= (
        objects(check)[("Job", "nccl-worker")]["spec"]["template"]["metadata"]["labels"].items())
    container = pod["containers"][0]
    for side in ("requests", "limits"):
        assert {"nvidia.com/gpu": "8", "rdma/rdma_shared_ib": "1"}.items() <= container["resources"][side].items()
    assert {"name": "NCCL_IB_SL", "value": "0"} in container["env"]


def test_the_launcher_names_the_workers_by_dns_and_waits_for_their_sshd(check):
    script = launcher_script(check)
    hosts = "nccl-worker-0.nccl-workers.fab-verify-nccl-baseline.svc nccl-worker-1.nccl-workers.fab-verify-nccl-baseline.svc"
    assert f"for host in {hosts}; do\n" in script
    assert 'until getent hosts "$host" >/dev/null && ssh -o BatchMode=yes -o ConnectTimeout=5 "$host" true' in script
    assert script.index("until getent") < script.index("mpirun")
    assert objects(check)[("ConfigMap", "nccl-ssh")]["data"]["hostfile"] == (
        "nccl-worker-0.nccl-workers.fab-verify-nccl-baseline.svc slots=8\n"
        "nccl-worker-1.nccl-workers.fab-verify-nccl-baseline.svc slots=8\n")
    assert re.search(r'"\$\(command -v mpirun\)" -np 16 --hostfile /etc/fab-ssh/hostfile --map-by ppr:8:node ', script)


def test_the_workers_stop_at_the_runs_deadline_if_the_runner_cannot_delete_them(check):
    for name in ("nccl-worker", "nccl-baseline"):
        assert objects(check)[("Job", name)]["spec"]["activeDeadlineSeconds"] == 1800


def test_every_pod_of_the_run_is_what_the_mpi_exception_allows_and_no_more(check):
    for name in ("nccl-worker", "nccl-baseline"):
        pod = objects(check)[("Job", name)]["spec"]["template"]["spec"]
        assert [c["securityContext"] for c in pod["containers"]] == [MPI_EXCEPTION]
        assert not {"hostNetwork", "hostPID", "hostIPC", "initContainers"} & set(pod)
        assert pod["automountServiceAccountToken"] is False
        assert all("hostPath" not in v for v in pod["volumes"])
    namespace = objects(check)[("Namespace", "fab-verify-nccl-baseline")]["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespace["annotations"] == {
        "fab.internal/privileged-reason": "NCCL over InfiniBand: the MPI workers' sshd runs as root and NCCL pins memory (IPC_LOCK)"}


def test_the_rendered_runs_validate_strictly(check, crd_dir):
    crds = CrdSchemas(crd_dir)
    errors = {f"{o['kind']}/{o['metadata']['name']}": e for s in check.steps[1:3] for o in s.objects
              if (e := schema_errors(o, crds))}
    assert errors == {}


def test_the_key_pair_is_not_in_the_rendered_secret(check):
    secret = objects(check)[("Secret", "nccl-ssh-key")]
    assert "data" not in secret and "stringData" not in secret
    assert secret["metadata"]["annotations"] == {GENERATE_ANNOTATION: "ssh-keypair"}


def test_both_sides_mount_the_key_pair_and_use_the_ed25519_key(check):
    for name in ("nccl-worker", "nccl-baseline"):
        pod = objects(check)[("Job", name)]["spec"]["template"]["spec"]
        assert {"name": "ssh-key", "secret": {"secretName": "nccl-ssh-key", "defaultMode": 0o400}} in pod["volumes"]
        assert {"name": "ssh-key", "mountPath": "/etc/fab-mpi-ssh", "readOnly": True} in pod["containers"][0]["volumeMounts"]


# --- ssh between the MPI pods ----------------------------------------------------------------------------------------

def test_each_run_brings_its_ssh_settings_in_its_namespace(check):
    for index, run_ in ((1, "baseline"), (2, "load")):
        assert objects(check, index)[("ConfigMap", "nccl-ssh")]["metadata"]["namespace"] == f"fab-verify-nccl-{run_}"


def test_sshd_uses_the_runs_key_pair_and_skips_the_mounts_mode_checks(check):
    assert objects(check)[("ConfigMap", "nccl-ssh")]["data"]["sshd_config"].splitlines() == [
        "Port 2222", "HostKey /root/.ssh/id_ed25519", "PidFile /run/sshd/sshd.pid", "StrictModes no",
        "PermitRootLogin prohibit-password", "PubkeyAuthentication yes", "AuthorizedKeysFile /root/.ssh/authorized_keys",
        "PasswordAuthentication no", "UsePAM no"]


def test_the_launcher_neither_checks_nor_records_the_workers_host_keys(check):
    assert objects(check)[("ConfigMap", "nccl-ssh")]["data"]["ssh_config"].splitlines() == [
        "Host *", "    Port 2222", "    IdentityFile /root/.ssh/id_ed25519", "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null", "    LogLevel ERROR"]


def test_workers_run_sshd_with_the_steps_sshd_config(check):
    container = objects(check)[("Job", "nccl-worker")]["spec"]["template"]["spec"]["containers"][0]
    assert (container["command"], container["args"]) == (["bash", "-c"], [(
        "chmod 0755 /run/sshd && install -m 0600 /etc/fab-mpi-ssh/id_ed25519 /root/.ssh/id_ed25519 && install -m 0600 "
        "/etc/fab-mpi-ssh/authorized_keys /root/.ssh/authorized_keys && exec /usr/sbin/sshd -De -f /etc/fab-ssh/sshd_config")])
    assert {"name": "ssh-config", "mountPath": "/etc/fab-ssh", "readOnly": True} in container["volumeMounts"]


def test_the_launchers_ssh_reads_the_steps_ssh_config(check):
    launcher = objects(check)[("Job", "nccl-baseline")]["spec"]["template"]["spec"]
    assert {"name": "ssh-config", "mountPath": "/etc/ssh/ssh_config", "subPath": "ssh_config", "readOnly": True} in (
        launcher["containers"][0]["volumeMounts"])
    assert {"name": "ssh-config", "configMap": {"name": "nccl-ssh"}} in launcher["volumes"]


# --- the order the runner applies the real run under load ------------------------------------------------------------

def test_site_a_applies_what_the_run_uses_then_warp_then_the_workers_and_the_launcher():
    with contextlib.chdir(PROJECT_DIR):  # ca_bundle is a path relative to the project
        site = parse_site(site_raw("site-a"))
    loaded = next(c for c in criteria(site, 1) if c.id == "01-nccl-under-load-gpu").steps[2]
    assert (loaded.background, loaded.decides) == (("warp-load",), ("Job", "nccl-load"))
    assert [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in apply_order(loaded)] == [
        ("Namespace", None, "fab-verify-nccl-load"),
        ("ConfigMap", "fab-verify-nccl-load", "nccl-ssh"),
        ("Secret", "fab-verify-nccl-load", "nccl-ssh-key"),
        ("Service", "fab-verify-nccl-load", "nccl-workers"),
        ("ConfigMap", "team-defect-vision", "warp-load-ca"),
        ("Job", "team-defect-vision", "warp-load"),
        ("Job", "fab-verify-nccl-load", "nccl-worker"),
        ("Job", "fab-verify-nccl-load", "nccl-load"),
    ]
