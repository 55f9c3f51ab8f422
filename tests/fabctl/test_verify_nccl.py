"""Phase 01's NCCL check (fabctl/verify/criteria/phase_01_nccl.py nccl_under_load): the transport read from NCCL's log, ssh between the MPI
pods configured by the step itself, and the order the runner applies the real stack's run under load."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from helpers import site_raw
from small_site import full_site

from components.config import parse_site
from fabctl.render import PROJECT_DIR
from fabctl.verify.criteria import criteria
from fabctl.verify.criteria.phase_01_nccl import nccl_transport_script
from fabctl.verify.runner import apply_order

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


def transport(log: str, tmp_path: Path) -> str:
    path = tmp_path / "nccl.log"
    path.write_text(log)
    script = "\n".join(nccl_transport_script(str(path)))
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def check():
    """The NCCL check of the full small site with a second training node on gpu."""
    raw = full_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "training"}
    return next(c for c in criteria(parse_site(raw), 1) if c.id == "01-nccl-under-load-gpu")


def mpi_step_objects(check, index: int = 2) -> dict[str, dict]:
    return {o["kind"]: o for o in check.steps[index].objects if o["metadata"]["name"] in ("nccl-ssh", "nccl-load")}


def pod(runtime: dict, job: str) -> dict:
    """The pod spec of one replicated job (`launcher` or `node`) of the run's TrainingRuntime."""
    (found,) = [r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == job]
    return found["template"]["spec"]["template"]["spec"]


# --- the transport ---------------------------------------------------------------------------------------------------

def test_reports_ib_when_the_channels_run_over_infiniband(tmp_path):
    assert transport(IB_LOG, tmp_path) == "FAB-RESULT transport=ib\n"


def test_fails_when_nccl_falls_back_to_sockets_after_finding_no_ib_device(tmp_path):
    assert transport(SOCKET_LOG, tmp_path) == "FAB-RESULT transport=socket\n"


def test_no_ib_device_alone_is_not_ib(tmp_path):
    assert transport("gpu-trn-1:41:41 [0] NCCL INFO NET/IB : No device found.\n", tmp_path) == "FAB-RESULT transport=none\n"


def test_the_launcher_reports_the_transport_from_its_log(check):
    runtime = next(o for o in check.steps[1].objects if o["kind"] == "TrainingRuntime")
    script = pod(runtime, "launcher")["containers"][0]["args"][0]
    assert "\n".join(nccl_transport_script("/tmp/nccl.log")) in script
    assert "grep -q 'NET/IB'" not in script


# --- ssh between the MPI pods ----------------------------------------------------------------------------------------

def test_each_run_brings_its_ssh_settings_in_its_namespace(check):
    for index, run in ((1, "baseline"), (2, "load")):
        config = next(o for o in check.steps[index].objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "nccl-ssh")
        assert config["metadata"]["namespace"] == f"fab-verify-nccl-{run}"


def test_sshd_uses_the_operators_key_pair_and_skips_the_secret_mounts_mode_checks(check):
    sshd = mpi_step_objects(check)["ConfigMap"]["data"]["sshd_config"].splitlines()
    assert sshd == ["Port 2222", "HostKey /root/.ssh/id_rsa", "PidFile /run/sshd/sshd.pid", "StrictModes no",
                    "PermitRootLogin prohibit-password", "PubkeyAuthentication yes",
                    "AuthorizedKeysFile /root/.ssh/authorized_keys", "PasswordAuthentication no", "UsePAM no"]


def test_the_launcher_neither_checks_nor_records_the_workers_host_keys(check):
    ssh = mpi_step_objects(check)["ConfigMap"]["data"]["ssh_config"].splitlines()
    assert ssh == ["Host *", "    Port 2222", "    IdentityFile /root/.ssh/id_rsa", "    StrictHostKeyChecking no",
                   "    UserKnownHostsFile /dev/null", "    LogLevel ERROR"]


def test_workers_run_sshd_with_the_steps_sshd_config(check):
    worker = pod(mpi_step_objects(check)["TrainingRuntime"], "node")
    container = worker["containers"][0]
    assert container["command"] == ["bash", "-c"]
    assert container["args"] == [(
        "chmod 0755 /run/sshd && install -m 0600 /etc/fab-mpi-ssh/id_rsa /root/.ssh/id_rsa && install -m 0600 "
        "/etc/fab-mpi-ssh/authorized_keys /root/.ssh/authorized_keys && exec /usr/sbin/sshd -De -f /etc/fab-ssh/sshd_config")]
    assert {"name": "ssh-config", "mountPath": "/etc/fab-ssh", "readOnly": True} in container["volumeMounts"]
    assert {"name": "ssh-config", "configMap": {"name": "nccl-ssh"}} in worker["volumes"]


def test_the_launchers_ssh_reads_the_steps_ssh_config(check):
    launcher = pod(mpi_step_objects(check)["TrainingRuntime"], "launcher")
    assert {"name": "ssh-config", "mountPath": "/etc/ssh/ssh_config", "subPath": "ssh_config", "readOnly": True} in (
        launcher["containers"][0]["volumeMounts"])
    assert {"name": "ssh-config", "configMap": {"name": "nccl-ssh"}} in launcher["volumes"]


# --- the order the runner applies the real run under load ------------------------------------------------------------

def test_site_a_applies_warps_ca_and_the_runs_namespace_and_runtime_before_warp_and_the_trainjob():
    with contextlib.chdir(PROJECT_DIR):  # ca_bundle is a path relative to the project
        site = parse_site(site_raw("site-a"))
    check = next(c for c in criteria(site, 1) if c.id == "01-nccl-under-load-gpu")
    loaded = check.steps[2]
    assert loaded.background == ("warp-load",)
    assert [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in apply_order(loaded)] == [
        ("Namespace", None, "fab-verify-nccl-load"),
        ("ConfigMap", "fab-verify-nccl-load", "nccl-ssh"),
        ("ConfigMap", "team-defect-vision", "warp-load-ca"),
        ("TrainingRuntime", "fab-verify-nccl-load", "nccl-load"),
        ("Job", "team-defect-vision", "warp-load"),
        ("TrainJob", "fab-verify-nccl-load", "nccl-load"),
    ]
