"""Security of what the program ships: checkov, Pod Security admission, secrets that stay secret."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from components.kube import CHECKOV_SUPPRESSIONS
from fabctl.commands.plan import write_plan
from fabctl.render import PROJECT_DIR
from helpers import STACKS, rendered

CHECKOV = PROJECT_DIR / ".checkov-venv" / "bin" / "checkov"
MOCK_SECRETS = ("mock-random-password", "mock-secret-key", "mock-client-secret", "mock-token", "MOCK CA", "PRIVATE KEY", "MOCKACCESSKEY")
PRIVILEGED = "privileged"


@pytest.fixture(scope="module")
def checkov_results(tmp_path_factory) -> dict[str, dict]:
    if not CHECKOV.exists():
        if os.environ.get("FAB_REQUIRE_CHECKOV") == "1":
            pytest.fail("checkov is not installed in .checkov-venv; run `make setup`")
        pytest.skip("checkov is not installed in .checkov-venv (make setup creates it)")
    out = tmp_path_factory.mktemp("scan")
    results = {}
    for stack in STACKS:
        root = write_plan(rendered(stack), out)
        run = subprocess.run(
            [str(CHECKOV), "-d", str(root / "manifests"), "--framework", "kubernetes", "-o", "json", "--quiet", "--compact"],
            capture_output=True, text=True, check=False,
        )
        report = json.loads(run.stdout)
        results[stack] = report[0] if isinstance(report, list) else report
    return results


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_finds_no_failed_check(checkov_results, stack):
    failed = [(f["check_id"], f["resource"]) for f in checkov_results[stack]["results"]["failed_checks"]]
    assert failed == []
    assert checkov_results[stack]["summary"]["passed"] > 0


@pytest.mark.parametrize("stack", STACKS)
def test_every_suppression_is_a_documented_one(checkov_results, stack):
    skipped = {f["check_id"] for f in checkov_results[stack]["results"].get("skipped_checks", [])}
    assert CHECKOV_SUPPRESSIONS
    assert skipped <= set(CHECKOV_SUPPRESSIONS)
    documented = (PROJECT_DIR / "docs" / "security.md").read_text()
    assert all(check in documented for check in CHECKOV_SUPPRESSIONS)


def test_every_namespace_carries_pod_security_labels(plan):
    namespaces = [(cluster, obj) for cluster, obj, _ in plan.manifests() if obj["kind"] == "Namespace"]
    assert namespaces
    for cluster, obj in namespaces:
        meta = obj["metadata"]
        level = meta["labels"].get("pod-security.kubernetes.io/enforce")
        assert level in ("restricted", PRIVILEGED), f"{cluster}/{meta['name']}"
        if level == PRIVILEGED:
            assert meta["annotations"]["fab.internal/privileged-reason"], f"{cluster}/{meta['name']}"


def _restricted_problems(pod: dict) -> list[str]:
    """Pod Security "restricted" for one pod template (the parts a manifest can get wrong)."""
    problems = []
    pod_context = pod.get("securityContext") or {}
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append("host namespaces")
    if any("hostPath" in v for v in pod.get("volumes") or []):
        problems.append("hostPath volume")
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        context = container.get("securityContext") or {}
        name = container["name"]
        if not (context.get("runAsNonRoot") or pod_context.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if context.get("runAsUser") == 0:
            problems.append(f"{name}: runAsUser 0")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation")
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if (context.get("capabilities") or {}).get("drop") != ["ALL"]:
            problems.append(f"{name}: capabilities not dropped")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccomp")
    return problems


def test_every_pod_outside_privileged_namespaces_meets_restricted(plan):
    privileged = {
        (cluster, obj["metadata"]["name"]) for cluster, obj, _ in plan.manifests()
        if obj["kind"] == "Namespace" and obj["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == PRIVILEGED
    }
    checked = 0
    for cluster, obj, _ in plan.manifests():
        template = (obj.get("spec") or {}).get("template")
        if obj["kind"] not in ("Deployment", "Job", "StatefulSet", "DaemonSet") or (cluster, obj["metadata"].get("namespace")) in privileged:
            continue
        checked += 1
        assert _restricted_problems(template["spec"]) == [], f"{cluster}/{obj['kind']}/{obj['metadata']['name']}"
    assert checked > 0


def test_plan_json_and_outputs_never_hold_a_secret_value(plan, tmp_path):
    text = (write_plan(plan, tmp_path) / "plan.json").read_text()
    assert [m for m in MOCK_SECRETS if m in text] == []
    assert [m for m in MOCK_SECRETS if m in json.dumps(plan.outputs)] == []


def test_every_secret_input_is_recorded_as_secret(plan):
    with_data = [r for r in plan.of_type("kubernetes:core/v1:Secret") if r["inputs"].get("stringData") or r["inputs"].get("data")]
    assert with_data
    for record in with_data:
        data = record["inputs"].get("stringData") or record["inputs"].get("data")
        assert {"stringData", "data"} & set(record["secret_inputs"]), record["name"]
        assert set(data.values()) == {"[secret]"}, record["name"]
