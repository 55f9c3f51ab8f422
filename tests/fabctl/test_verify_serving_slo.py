"""Phase 02's serving SLO (fabctl/verify/criteria/phase_02_slo.py, docs/acceptance.md): one load test per served model from
compute through the gateway, sized under the team's rate, its figures read from vLLM's result JSON by the parser that runs
in the pod, and judged against the model's targets by exact messages."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import config_errors
from schemas import CrdSchemas, schema_errors
from small_site import add_model, small_site

from components.config import parse_site
from components.kube import restricted_security_context
from fabctl.verify.criteria import criteria, not_applicable
from fabctl.verify.criteria.phase_02_slo import RESULT_SCRIPT, request_rate
from fabctl.verify.model import Criterion
from fabctl.verify.runner import parse_results

PROJECT_DIR = Path(__file__).parents[2]
FIXTURES = PROJECT_DIR / "tests" / "fixtures" / "verify" / "vllm-bench"
CID = "02-serving-slo-qwen3-8b"


def slo(raw: dict[str, Any], cid: str = CID) -> Criterion:
    return next(c for c in criteria(parse_site(raw), 2) if c.id == cid)


def bench(check: Criterion) -> dict[str, Any]:
    (step,) = check.steps
    job = next(o for o in step.objects if o["kind"] == "Job")
    return job["spec"]["template"]["spec"]


def arg(container: dict[str, Any], flag: str) -> str:
    args = container["args"]
    return args[args.index(flag) + 1]


def parsed(fixture: str) -> dict[str, str]:
    """The FAB-RESULT lines the pod's parser prints for a result file, as the runner reads them (step 0)."""
    out = subprocess.run([sys.executable, str(RESULT_SCRIPT), str(FIXTURES / fixture)], capture_output=True, text=True,
                         check=True).stdout
    return {f"0.{k}": v for k, v in parse_results(out).items()}


@pytest.fixture(scope="module")
def check() -> Criterion:
    return slo(small_site())


OK = {"0.token_status": "200", "0.succeeded": "true", **{f"0.{k}": v for k, v in {
    "requests": "200", "errors": "0", "p50_ttft_ms": "123.42", "p90_ttft_ms": "184.64", "p50_itl_ms": "15.46",
    "p90_itl_ms": "18.04", "output_tokens_per_sec": "470.74", "peak_concurrency": "8"}.items()}}


# --- the parser, on vLLM's result file ---------------------------------------------------------------------------------

def test_the_parser_reads_vllms_result_file():
    assert parsed("result.json") == {k: v for k, v in OK.items() if k not in ("0.token_status", "0.succeeded")}


def test_the_parser_counts_failed_requests_as_errors():
    figures = parsed("result-limited.json")
    assert (figures["0.requests"], figures["0.errors"]) == ("200", "23")


def test_the_parser_reports_a_missing_result(tmp_path):
    out = subprocess.run([sys.executable, str(RESULT_SCRIPT), str(tmp_path / "absent.json")], capture_output=True, text=True,
                         check=True).stdout
    assert parse_results(out) == {"bench_result": "missing"}


# --- the judge ---------------------------------------------------------------------------------------------------------

def test_fails_when_the_load_tests_job_failed_after_reporting(check):
    assert check.judge({**OK, "0.succeeded": "false"}) == (
        False, "qwen3-8b: the load test reported its figures but its Job serving-slo-qwen3-8b failed (its log says why)")


def test_passes_within_the_targets(check):
    assert check.judge(parsed("result.json") | {"0.token_status": "200", "0.succeeded": "true"}) == (
        True, ("qwen3-8b: P90 time to first token 184.6 ms, inter-token latency 18.0 ms (P50 123.4 and 15.5 ms), "
               "470.7 output tokens/s, 0 of 200 requests failed (at most 8 at once; cap 8, paced at 5 a second)"))
    assert check.bound == "P90 TTFT <= 200 ms, P90 ITL <= 20 ms, errors <= 1 %"


def test_fails_when_the_p90_ttft_is_above_the_target(check):
    assert check.judge(OK | {"0.p90_ttft_ms": "250.5"}) == (
        False, "qwen3-8b: P90 time to first token 250.5 ms is above 200 ms")


def test_fails_when_the_p90_itl_is_above_the_target(check):
    assert check.judge(OK | {"0.p90_itl_ms": "31.2"}) == (
        False, "qwen3-8b: P90 inter-token latency 31.2 ms is above 20 ms")


def test_fails_when_requests_were_limited(check):
    """The recorded run with 23 failed requests (the gateway's 429s) is refused on its error rate."""
    assert check.judge(parsed("result-limited.json") | {"0.token_status": "200", "0.succeeded": "true"}) == (
        False, "qwen3-8b: 23 of 200 requests failed (11.5 %, a 429 of team yield's rate of 600 a minute counts), above 1 %")


def test_fails_when_the_throughput_is_below_the_floor():
    raw = small_site()
    raw["acceptance"] = {"serving_slo_min_output_tokens_per_sec": 500.0}
    check = slo(raw)
    assert check.bound == "P90 TTFT <= 200 ms, P90 ITL <= 20 ms, errors <= 1 %, output >= 500 tokens/s"
    assert check.judge(OK) == (False, "qwen3-8b: output throughput 470.7 tokens/s is below 500 tokens/s")


def test_fails_when_keycloak_refuses_the_client(check):
    assert check.judge({"0.token_status": "401"}) == (
        False, ("Keycloak refused team yield's client credentials (401) at "
                "https://keycloak.site-t.fab.internal/realms/fab/protocol/openid-connect/token"))


def test_fails_when_the_tool_wrote_no_result(check):
    assert check.judge({"0.token_status": "200", "0.bench_result": "missing", "0.succeeded": "false"}) == (
        False, "qwen3-8b: vllm bench serve wrote no result (its log in the Job serving-slo-qwen3-8b says why)")


def test_fails_when_the_job_did_not_finish(check):
    assert check.judge({"0.succeeded": "false"}) == (False, "the load test did not finish (its job failed or timed out)")


# --- targets per model -------------------------------------------------------------------------------------------------

def test_a_models_own_targets_override_the_defaults():
    raw = small_site()
    add_model(raw, "llama-70b")
    raw["acceptance"] = {"serving_slo_models": {"llama-70b": {"p90_ttft_ms": 400.0, "concurrency": 4}}}
    own, default = slo(raw, "02-serving-slo-llama-70b"), slo(raw)
    assert own.bound == "P90 TTFT <= 400 ms, P90 ITL <= 20 ms, errors <= 1 %"
    assert arg(bench(own)["containers"][0], "--max-concurrency") == "4"
    assert own.judge(OK | {"0.p90_ttft_ms": "250.5"})[0] is True
    assert default.bound == "P90 TTFT <= 200 ms, P90 ITL <= 20 ms, errors <= 1 %"
    assert arg(bench(default)["containers"][0], "--max-concurrency") == "8"


def test_fails_when_an_override_names_no_served_model():
    raw = small_site()
    raw["acceptance"] = {"serving_slo_models": {"llama-70b": {"p90_ttft_ms": 400.0}}}
    assert config_errors(raw) == [
        "fab-platform:site.acceptance.serving_slo_models.llama-70b: llama-70b is not a served model; name one of qwen3-8b"]


def test_fails_when_a_request_exceeds_the_models_context():
    raw = small_site()
    raw["inference"]["models"]["qwen3-8b"]["max_context"] = 2048
    raw["inference"]["models"]["qwen3-8b"]["mean_context"] = 1024
    assert config_errors(raw) == [
        ("fab-platform:site.acceptance.serving_slo_input_tokens: 3000 prompt and 150 output tokens exceed qwen3-8b's "
         "max_context (2048); give qwen3-8b shorter requests in acceptance.serving_slo_models.qwen3-8b")]


def test_one_criterion_per_served_model():
    raw = small_site()
    add_model(raw, "llama-70b")
    assert [c.id for c in criteria(parse_site(raw), 2) if c.id.startswith("02-serving-slo")] == [
        "02-serving-slo-llama-70b", "02-serving-slo-qwen3-8b"]


def test_is_skipped_without_inference():
    raw = small_site()
    del raw["inference"]
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["pool"] = "training"
    raw["phase"] = 1
    assert dict(not_applicable(parse_site(raw), 2))["02-serving-slo"] == (
        "the site serves no model (no `inference` section): phase 02 adds it")


# --- the run -----------------------------------------------------------------------------------------------------------

def test_the_run_stays_under_the_teams_rate():
    """fdc may send 90 requests a minute: the run sends 45 a minute (0.75 a second), so no minute of the gateway's count
    reaches the limit from the load test alone, and the step waits out the pacing on top of the probe timeout."""
    raw = small_site(teams=("fdc", "yield"))
    raw["inference"]["team_requests_per_minute"] = {"fdc": 90}
    check = slo(raw)
    container = bench(check)["containers"][0]
    per_sec = float(arg(container, "--request-rate"))
    assert per_sec == request_rate(90) == 0.75
    assert per_sec * 60 < 90
    assert arg(container, "--num-prompts") == "180"  # what 0.75 a second sends while the token lives (240 s)
    assert check.steps[0].timeout_sec == 600 + 240  # 180 requests at 0.75 a second


def test_a_run_at_a_high_rate_sends_every_prompt():
    container = bench(slo(small_site()))["containers"][0]
    assert arg(container, "--num-prompts") == "200"


def test_the_load_runs_before_the_rate_limit_burst():
    """The burst spends the team's rate for its minute: a load test after it would count the gateway's 429s."""
    ids = [c.id for c in criteria(parse_site(small_site()), 2)]
    assert ids.index(CID) < ids.index("02-inference-rate-limit")


def test_the_load_generator_calls_the_gateway_as_the_team_from_compute(check):
    (step,) = check.steps
    assert step.cluster == "compute"
    container = bench(check)["containers"][0]
    assert container["image"] == "vllm/vllm-openai:v0.31.0"
    assert container["args"][:2] == ["bench", "serve"]
    assert (arg(container, "--base-url"), arg(container, "--endpoint")) == (
        "https://llm.site-t.fab.internal/models/qwen3-8b", "/v1/chat/completions")
    assert (arg(container, "--model"), arg(container, "--tokenizer")) == ("qwen3-8b", "/work/tokenizer")
    assert (arg(container, "--random-input-len"), arg(container, "--random-output-len")) == ("3000", "150")
    assert {"name": "CLIENT_SECRET", "valueFrom": {"secretKeyRef": {"name": "inference-yield", "key": "client_secret"}}} in container["env"]
    assert 'OPENAI_API_KEY="$(cat /work/token)" vllm "$@"' in container["command"][2]


def test_the_tokenizer_comes_from_the_models_bucket_without_the_weights(check):
    copy = bench(check)["initContainers"][1]
    assert copy["args"][-2:] == ["models/site-t-models/qwen/qwen3-8b", "/work/tokenizer"]
    assert {"--exclude", "*.safetensors"} <= set(copy["args"])
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in copy["env"] if "valueFrom" in e} == {"s3-inference"}


def test_every_object_validates_strictly_and_pods_are_restricted(crd_dir):
    """A site with a CA bundle and two models."""
    raw = small_site()
    add_model(raw, "llama-70b")
    raw["ca_bundle"] = "certs/site-a-ca.pem"
    with contextlib.chdir(PROJECT_DIR):  # ca_bundle is a path relative to the project
        checks = [c for c in criteria(parse_site(raw), 2) if c.id.startswith("02-serving-slo")]
    assert len(checks) == 2
    crds = CrdSchemas(crd_dir)
    restricted = {k: v for k, v in restricted_security_context(0).items() if k not in ("runAsUser", "runAsGroup")}
    for check in checks:
        for obj in check.steps[0].objects:
            assert schema_errors(obj, crds) == [], obj["metadata"]["name"]
        pod = bench(check)
        assert pod["automountServiceAccountToken"] is False
        for container in [*pod["initContainers"], *pod["containers"]]:
            context = {k: v for k, v in container["securityContext"].items() if k not in ("runAsUser", "runAsGroup")}
            assert context == restricted
            assert container["securityContext"]["runAsUser"] != 0
            assert container["resources"]["requests"] and container["resources"]["limits"]


def test_the_site_ca_is_trusted_by_the_copy_the_token_and_the_client():
    raw = small_site()
    raw["ca_bundle"] = "certs/site-a-ca.pem"
    with contextlib.chdir(PROJECT_DIR):
        check = slo(raw)
    pod = bench(check)
    assert {"name": "ca", "mountPath": "/work/.mc/certs/CAs", "readOnly": True} in pod["initContainers"][1]["volumeMounts"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["FAB_CA_FILE"], env["SSL_CERT_FILE"]) == ("/probe/ca.crt", "/probe/ca.crt")
    config_map = next(o for o in check.steps[0].objects if o["kind"] == "ConfigMap")
    assert set(config_map["data"]) == {"probe.py", "vllm_bench_result.py", "ca.crt"}
