"""Phase 02's serving SLO: per served model, a load test from compute through the gateway with a team's token (`vllm bench
serve` of the vLLM image the site already serves with), its P90 time to first token, P90 inter-token latency, output
throughput and error rate judged against the model's targets (`acceptance.serving_slo_*`, docs/acceptance.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import versions
from components.constants import MC_CA_DIR, S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY, s3_secret
from components.gpu import INFERENCE_NAMESPACE
from components.kube import restricted_container, restricted_pod_security_context
from components.serving import PRINCIPAL, weights_source
from fabctl.verify.criteria.blocks import (
    PROBE_DIR,
    PROBE_SCRIPT,
    PROBE_USER,
    Site,
    _client_env,
    _dns,
    _figure,
    _job,
    _meta,
    _needs_client,
    _ran,
    _scratch,
    served_name,
)
from fabctl.verify.model import Criterion, Judgement, Manifest, Step

FAMILY = "02-serving-slo"
RESULT_SCRIPT = Path(__file__).parents[1] / "vllm_bench_result.py"
"""Prints the figures of vLLM's result JSON as FAB-RESULT lines, in the pod (tests/fixtures/verify/vllm-bench)."""
RATE_SHARE = 0.5
"""The share of the team's rate the load test sends at: the gateway counts a team's requests to a model per minute, so the
run stays under the limit with the rest left to the team's own traffic (a 429 counts as an error)."""
WORK = "/work"
TOKENIZER_DIR = f"{WORK}/tokenizer"
RESULT_DIR = f"{WORK}/result"
RESULT_FILE = "result.json"
TOKEN_FILE = f"{WORK}/token"
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.h5", "*.msgpack", "*.onnx", "*.ckpt")
"""What the tokenizer copy leaves out of the model's folder: its weights (the tokenizer and config files remain)."""
BENCH_RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
COPY_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


@dataclass(frozen=True)
class Targets:
    """A model's load test and its bounds: `acceptance.serving_slo_models.<model>` over the `serving_slo_*` defaults."""

    concurrency: int
    input_tokens: int
    output_tokens: int
    p90_ttft_ms: float
    p90_itl_ms: float
    min_output_tokens_per_sec: float | None
    max_error_percent: float


def targets(site: Site, model: str) -> Targets:
    acceptance = site.acceptance
    own = acceptance.serving_slo_models.get(model)

    def pick(field: str) -> Any:
        value = getattr(own, field) if own is not None else None
        return value if value is not None else getattr(acceptance, f"serving_slo_{field}")

    return Targets(*(pick(f) for f in Targets.__dataclass_fields__))


def team_rate(site: Site, team: str) -> int:
    """The team's requests a minute to each model at the gateway."""
    inference = site.config.inference
    assert inference is not None
    return inference.team_requests_per_minute.get(team, inference.requests_per_minute)


def request_rate(rate_per_minute: int) -> float:
    """The load test's requests a second: RATE_SHARE of the team's rate."""
    return rate_per_minute * RATE_SHARE / 60


TOKEN_WINDOW_SEC = 240
"""How long the paced requests may last: the token is fetched once, before them, and Keycloak's access tokens live 300 s
by default (the realm's Access Token Lifespan, which the program leaves as it is); a request after that gets 401, which
would count as an error."""


def prompts(site: Site, per_sec: float) -> int:
    """The requests the load test sends: `serving_slo_num_prompts`, fewer where pacing them at `per_sec` would outlast
    the token (TOKEN_WINDOW_SEC)."""
    return max(1, min(site.acceptance.serving_slo_num_prompts, math.floor(per_sec * TOKEN_WINDOW_SEC)))


def tokenizer_secret() -> str:
    """The Secret, in the acceptance namespace on compute, with read-only keys of the models bucket: a copy of the serving
    principal's (`s3-inference` in the inference namespace), from which the load generator reads the model's tokenizer."""
    return s3_secret(PRINCIPAL)


def serving_slo(site: Site) -> list[Criterion | tuple[str, str]]:
    """One load test per served model, in the order of their names."""
    if site.config.inference is None:
        return [(FAMILY, "the site serves no model (no `inference` section): phase 02 adds it")]
    return [model_slo(site, model) for model in sorted(site.config.inference.models)]


def model_slo(site: Site, model: str) -> Criterion:
    inference = site.config.inference
    assert inference is not None
    cid, team = _dns(FAMILY, model), site.team()
    bound, rate = targets(site, model), team_rate(site, team)
    per_sec = request_rate(rate)
    # The run paces its requests at `per_sec` (it cannot finish sooner); the probe's timeout is on top of that.
    sent = prompts(site, per_sec)
    timeout = site.acceptance.timeout_sec + math.ceil(sent / per_sec)
    name = _dns("serving-slo", model)
    config_map = _dns(name, "probe")
    url = site.gateway_url(model)
    pod = _bench_pod(site, model, config_map, bound, per_sec)
    step = Step(site.compute(), (_bench_config(site, config_map, cid), _job(name, site.namespace, cid, pod, timeout)),
                ("Job", name), timeout)

    def judge(results: Mapping[str, str]) -> Judgement:
        token = results.get("0.token_status")
        if token is None:
            return False, _ran(results, 0, "the load test")
        if token != "200":
            return False, f"Keycloak refused team {team}'s client credentials ({token}) at {site.token_url()}"
        if results.get("0.bench_result") == "missing":
            return False, f"{model}: vllm bench serve wrote no result (its log in the Job {name} says why)"
        requests, errors = _figure(results, "0.requests"), _figure(results, "0.errors")
        ttft, itl = _figure(results, "0.p90_ttft_ms"), _figure(results, "0.p90_itl_ms")
        throughput = _figure(results, "0.output_tokens_per_sec")
        if requests is None or errors is None or ttft is None or itl is None or throughput is None:
            return False, _ran(results, 0, "the load test")
        if results.get("0.succeeded") != "true":
            return False, f"{model}: the load test reported its figures but its Job {name} failed (its log says why)"
        error_percent = errors / requests * 100 if requests else 100.0
        if error_percent > bound.max_error_percent:
            return False, (f"{model}: {int(errors)} of {int(requests)} requests failed ({error_percent:.1f} %, a 429 of "
                           f"team {team}'s rate of {rate} a minute counts), above {bound.max_error_percent:g} %")
        if ttft > bound.p90_ttft_ms:
            return False, f"{model}: P90 time to first token {ttft:.1f} ms is above {bound.p90_ttft_ms:g} ms"
        if itl > bound.p90_itl_ms:
            return False, f"{model}: P90 inter-token latency {itl:.1f} ms is above {bound.p90_itl_ms:g} ms"
        floor = bound.min_output_tokens_per_sec
        if floor is not None and throughput < floor:
            return False, f"{model}: output throughput {throughput:.1f} tokens/s is below {floor:g} tokens/s"
        p50_ttft, p50_itl = _figure(results, "0.p50_ttft_ms"), _figure(results, "0.p50_itl_ms")
        medians = f" (P50 {p50_ttft:.1f} and {p50_itl:.1f} ms)" if p50_ttft is not None and p50_itl is not None else ""
        peak = _figure(results, "0.peak_concurrency")
        at_once = f"at most {int(peak)} at once" if peak is not None else "concurrency not reported"
        return True, (f"{model}: P90 time to first token {ttft:.1f} ms, inter-token latency {itl:.1f} ms{medians}, "
                      f"{throughput:.1f} output tokens/s, {int(errors)} of {int(requests)} requests failed ({at_once}; "
                      f"cap {bound.concurrency}, paced at {per_sec:g} a second)")

    shown = (f"P90 TTFT <= {bound.p90_ttft_ms:g} ms, P90 ITL <= {bound.p90_itl_ms:g} ms, errors <= {bound.max_error_percent:g} %"
             + (f", output >= {bound.min_output_tokens_per_sec:g} tokens/s" if bound.min_output_tokens_per_sec is not None else ""))
    needs = (_needs_client(site, team),
             (f"the Secret {tokenizer_secret()} in {site.namespace} on {site.compute()}: a copy of the serving principal's "
              f"read-only keys of the models bucket (the Secret {tokenizer_secret()} in {INFERENCE_NAMESPACE} on "
              f"{inference.cluster}), from which the load generator reads {model}'s tokenizer"))
    return Criterion(2, cid, (f"{model} meets its serving SLO through {url} under load ({sent} requests paced at "
                              f"{per_sec:g} a second, at most {bound.concurrency} at once, {bound.input_tokens} prompt and "
                              f"{bound.output_tokens} output tokens)"),
                     (step,), judge, shown, needs=needs)


def _bench_config(site: Site, name: str, cid: str) -> Manifest:
    """probe.py (the team's token), the result parser and the site's CA bundle, where it has one."""
    data = {"probe.py": PROBE_SCRIPT.read_text(), RESULT_SCRIPT.name: RESULT_SCRIPT.read_text()}
    if site.ca:
        data["ca.crt"] = site.ca
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, site.namespace, cid), "data": data}


def bench_args(site: Site, model: str, bound: Targets, per_sec: float) -> list[str]:
    """`vllm bench serve` against the model's URL on the gateway: random prompts of the model's own tokenizer (the
    served model's files, TOKENIZER_DIR), streamed chat completions, the team's token from OPENAI_API_KEY."""
    return [
        "bench", "serve", "--backend", "openai-chat",
        "--base-url", site.gateway_url(model).removesuffix("/v1"), "--endpoint", "/v1/chat/completions",
        "--model", served_name(site, model), "--served-model-name", served_name(site, model), "--tokenizer", TOKENIZER_DIR,
        "--dataset-name", "random", "--random-input-len", str(bound.input_tokens),
        "--random-output-len", str(bound.output_tokens), "--random-range-ratio", "0", "--ignore-eos",
        "--num-prompts", str(prompts(site, per_sec)), "--request-rate", f"{per_sec:g}",
        "--max-concurrency", str(bound.concurrency),
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,90",
        "--disable-tqdm", "--save-result", "--result-dir", RESULT_DIR, "--result-filename", RESULT_FILE,
    ]


def _bench_pod(site: Site, model: str, config_map: str, bound: Targets, per_sec: float) -> dict[str, Any]:
    """The tokenizer copied from the models bucket (mc, as the serving pods copy their weights), then one container: the
    team's token (probe.py), the load test, its figures."""
    inference = site.config.inference
    assert inference is not None
    spec = inference.models[model]
    volumes, mounts = _scratch(("work", WORK), ("tmp", "/tmp"))
    volumes.append({"name": "probe", "configMap": {"name": config_map}})
    probe_mount = {"name": "probe", "mountPath": PROBE_DIR, "readOnly": True}
    mc_env = [
        {"name": "MC_CONFIG_DIR", "value": f"{WORK}/.mc"},
        *({"name": k, "valueFrom": {"secretKeyRef": {"name": tokenizer_secret(), "key": k}}} for k in (S3_ACCESS_KEY, S3_SECRET_KEY, S3_ENDPOINT)),
    ]
    mc_mounts = [*mounts]
    if site.ca:
        volumes.append({"name": "ca", "configMap": {"name": config_map, "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        mc_mounts.append({"name": "ca", "mountPath": MC_CA_DIR, "readOnly": True})
    mc_image = site.registry.image(versions.WEIGHTS_SYNC_IMAGE)
    excludes = [arg for pattern in WEIGHT_FILES for arg in ("--exclude", pattern)]
    init = [
        restricted_container("tokenizer-alias", mc_image, PROBE_USER, resources=COPY_RESOURCES, env=mc_env, volumeMounts=mc_mounts,
                             args=["alias", "set", "models", f"$({S3_ENDPOINT})", f"$({S3_ACCESS_KEY})", f"$({S3_SECRET_KEY})"]),
        restricted_container("tokenizer-copy", mc_image, PROBE_USER, resources=COPY_RESOURCES, env=mc_env, volumeMounts=mc_mounts,
                             args=["mirror", *excludes, weights_source(site.bucket("models"), spec.source, spec.revision), TOKENIZER_DIR]),
    ]
    env = [
        {"name": "HOME", "value": WORK}, {"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, *_client_env(site, site.team()),
    ]
    if site.ca:
        # probe.py's token call and vLLM's client (aiohttp, Python's default context) trust the site's CA.
        env += [{"name": "FAB_CA_FILE", "value": f"{PROBE_DIR}/ca.crt"}, {"name": "SSL_CERT_FILE", "value": f"{PROBE_DIR}/ca.crt"}]
    script = "\n".join([
        f"python3 {PROBE_DIR}/probe.py token {TOKEN_FILE}",
        f"[ -s {TOKEN_FILE} ] || exit 0",
        f'OPENAI_API_KEY="$(cat {TOKEN_FILE})" vllm "$@"',
        "rc=$?",
        f"python3 {PROBE_DIR}/{RESULT_SCRIPT.name} {RESULT_DIR}/{RESULT_FILE}",
        "exit $rc",
    ])
    bench = restricted_container(
        "vllm-bench", site.registry.image(versions.VLLM_IMAGE), PROBE_USER, command=["/bin/bash", "-c", script, "vllm-bench"],
        args=bench_args(site, model, bound, per_sec), env=env, resources=BENCH_RESOURCES, volumeMounts=[*mounts, probe_mount],
    )
    return {
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(),
        **site.registry.pod_fields(),
        "initContainers": init,
        "containers": [bench],
        "volumes": volumes,
    }
