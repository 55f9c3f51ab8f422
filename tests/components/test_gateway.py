"""The inference gateway's per-team rate limits: counted once across its replicas by Envoy Gateway's rate limit service,
whose counters live in a Valkey store on the inference cluster, with a per-proxy backstop (docs/architecture.md)."""

from __future__ import annotations

from components.constants import GATEWAY_NAMESPACE
from components.gateway import RATE_LIMIT_STORE, _store_config
from components.inference import team_allow_rules


def release_values(plan, cluster: str) -> dict:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                  if r["inputs"]["name"] == "envoy-gateway" and plan.cluster(r) == cluster]
    return release["inputs"]["values"]


def rate_limit(plan) -> dict:
    (policy,) = [p for p in plan.objects("BackendTrafficPolicy", "site-t-gpu") if p["metadata"]["name"] == "vllm-qwen3-8b"]
    return policy["spec"]["rateLimit"]


def test_each_team_is_limited_at_its_rate_across_all_gateway_replicas(full_plan):
    assert rate_limit(full_plan)["global"]["rules"] == [
        {"clientSelectors": [{"headers": [
            {"name": "x-fab-team", "type": "Distinct"},
            {"name": "x-fab-team", "type": "Exact", "value": "fdc", "invert": True},
        ]}], "limit": {"requests": 600, "unit": "Minute"}},
        {"clientSelectors": [{"headers": [{"name": "x-fab-team", "type": "Exact", "value": "fdc"}]}],
         "limit": {"requests": 3000, "unit": "Minute"}},
    ]


def test_each_proxy_backstops_the_same_limits_on_its_own(full_plan):
    limits = rate_limit(full_plan)
    assert limits["local"] == limits["global"]


def test_the_gateway_admits_the_teams_128_to_a_rule():
    teams = [f"t{n:03d}" for n in range(129)]
    rules = team_allow_rules(teams)
    assert [(r["name"], r["principal"]["jwt"]["claims"][1]["values"]) for r in rules] == [
        ("team-clients", teams[:128]), ("team-clients-2", teams[128:]),
    ]


def test_the_inference_gateway_runs_the_rate_limit_service_on_its_store(small_plan):
    assert release_values(small_plan, "site-t-gpu")["config"]["envoyGateway"] == {
        "rateLimit": {
            "backend": {"type": "Redis", "redis": {"url": "ratelimit-valkey.envoy-gateway-system.svc:6379"}},
            "failClosed": False,
        },
        "provider": {"type": "Kubernetes", "kubernetes": {"rateLimitDeployment": {
            "replicas": 2,
            "container": {"env": [
                {"name": "REDIS_AUTH", "valueFrom": {"secretKeyRef": {"name": "ratelimit-valkey", "key": "password"}}},
            ]},
        }}},
    }


def test_the_compute_ingress_runs_no_rate_limit_service(small_plan):
    assert "config" not in release_values(small_plan, "site-t-compute")
    assert not [o for o in small_plan.objects("Deployment", "site-t-compute") if o["metadata"]["name"] == RATE_LIMIT_STORE]


def test_the_store_is_the_service_the_rate_limit_service_dials(small_plan):
    (service,) = [s for s in small_plan.objects("Service", "site-t-gpu") if s["metadata"]["name"] == RATE_LIMIT_STORE]
    assert (service["metadata"]["namespace"], service["spec"]["type"]) == (GATEWAY_NAMESPACE, "ClusterIP")
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(6379, "redis")]


def test_the_store_keeps_its_counters_in_memory_only(small_plan):
    (store,) = [d for d in small_plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == RATE_LIMIT_STORE]
    pod = store["spec"]["template"]["spec"]
    assert [(v["name"], sorted(set(v) - {"name"})) for v in pod["volumes"]] == [("config", ["secret"]), ("data", ["emptyDir"])]
    assert pod["volumes"][0]["secret"]["secretName"] == RATE_LIMIT_STORE
    assert pod["containers"][0]["args"] == ["/etc/valkey/valkey.conf"]


def test_the_store_requires_the_password_and_never_writes_to_disk():
    config = _store_config("s3cr3t").splitlines()
    assert {"requirepass s3cr3t", "protected-mode yes", 'save ""', "appendonly no"} <= set(config)


def test_the_store_password_is_kept_as_a_pulumi_secret(small_plan):
    (secret,) = [s for s in small_plan.of_type("kubernetes:core/v1:Secret") if s["inputs"]["metadata"]["name"] == RATE_LIMIT_STORE]
    assert sorted(secret["inputs"]["stringData"]) == ["password", "valkey.conf"]
    assert secret["secret_inputs"] == ["stringData"]
