"""Reads the result JSON of `vllm bench serve --save-result` (vllm/benchmarks/serve.py: the `result_json` it dumps, run
with `--percentile-metrics ttft,tpot,itl --metric-percentiles 50,90`) and prints the serving SLO's figures as
`FAB-RESULT key=value` lines. It runs in the load generator's pod, with the vLLM image's Python, beside probe.py in the
step's ConfigMap; it never judges (phase 02's serving SLO criterion does).

    python vllm_bench_result.py RESULT_JSON

`requests` is every request sent (completed and failed), `errors` the failed ones: a request the gateway refused (429 above
the team's rate, 401) is a failed one, as vLLM's client counts it. Without the file (the tool stopped before the end),
`bench_result=missing`.
"""

from __future__ import annotations

import json
import sys

FIGURES = {
    "p50_ttft_ms": "p50_ttft_ms", "p90_ttft_ms": "p90_ttft_ms", "p50_itl_ms": "p50_itl_ms", "p90_itl_ms": "p90_itl_ms",
    "output_tokens_per_sec": "output_throughput", "peak_concurrency": "max_concurrent_requests",
}
"""FAB-RESULT key: the result JSON's key."""


def main(path: str) -> None:
    try:
        with open(path) as source:
            result = json.load(source)
    except (OSError, ValueError):
        print("FAB-RESULT bench_result=missing", flush=True)
        return
    figures = {"requests": result["completed"] + result["failed"], "errors": result["failed"]}
    figures.update({key: result[name] for key, name in FIGURES.items() if result.get(name) is not None})
    for key, value in figures.items():
        print(f"FAB-RESULT {key}={value:.2f}" if isinstance(value, float) else f"FAB-RESULT {key}={value}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
