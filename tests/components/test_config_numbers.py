"""Numbers in the site config: strict (never a boolean or a string), bounded above and below, and the rules between
them (a lending limit within the quota, YuniKorn's guarantee within its maximum); then capacity per node and the
models' OpenAI names, in the base config and in a profile.

Each test starts from the smallest site (small_site.py) and changes one thing.
"""

from __future__ import annotations

import copy
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from components.config import SiteConfig, parse_site
from components.config.problems import key_location
from helpers import config_errors
from small_site import QWEN3_8B, add_gpu_notebooks, add_model, full_site, small_site

KEY = object()
"""A mapping's key in a field path: filled with the first key the test site has there."""


def numeric_fields(tp: Any, path: tuple = (), meta: tuple = ()) -> list[tuple[tuple, type, list[Any]]]:
    """(path, int or float, bounds metadata) of every number the site schema accepts, walked from SiteConfig's fields."""
    meta = list(meta)
    while get_origin(tp) is Annotated:
        tp, *extra = get_args(tp)
        meta += [m for info in extra for m in getattr(info, "metadata", [info])]
    origin = get_origin(tp)
    if origin in (Union, UnionType):
        return [f for arm in get_args(tp) if arm is not type(None) for f in numeric_fields(arm, path, tuple(meta))]
    if origin is dict:
        return numeric_fields(get_args(tp)[1], (*path, KEY))
    if origin is list:
        return numeric_fields(get_args(tp)[0], (*path, 0))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [
            found
            for name, field in tp.model_fields.items()
            for found in numeric_fields(field.annotation, (*path, field.alias or name), tuple(field.metadata))
        ]
    return [(path, tp, meta)] if tp in (int, float) else []


NUMBERS = numeric_fields(SiteConfig)


def numbers_site() -> dict[str, Any]:
    """The site with every optional part (full_site), and an entry in each mapping that holds numbers: a GPU type, a
    profile with replicas and quotas, notebook profiles, a model's canary, a peer's team training here, GPU notebooks
    with a team's quota, Spark RAPIDS, Iceberg maintenance of a namespace, a Trino external catalog, a model's own serving SLO and a serving-loop run to verify."""
    site = full_site()
    site["gpu"]["gpu-train"]["spark_rapids"] = {}
    site["gpu_types"] = {"b200": {"memory_mib": 183359, "product": "NVIDIA-B200"}}
    site["profiles"] = {"night": {"replicas": {"qwen3-8b": 2}, "quotas": {"yield": {"gpu": {"gpus": 4}}}}}
    site["compute"]["jupyterhub"] = {"profiles": {"small": {"cpu": 2, "memory_gib": 8}}}
    site["compute"]["iceberg_maintenance"] = {"targets": [{"namespace": "fdc"}]}
    site["compute"]["trino"] = {"external_catalogs": {"scm": {
        "connector": "postgresql", "host": "scm-db.corp.example", "cidrs": ["172.20.8.0/28"], "database": "scm", "user": "ro"}}}
    add_gpu_notebooks(site)
    site["inference"]["models"]["qwen3-8b"].update(revision="r1", canary={"revision": "r2"})
    site["federation"] = {"peers": {"site-u": {"remote_training": {"yield": {"gpu": {"gpus": 0, "borrowing_limit_gpus": 1}}}}},
                          "ranges": {"site-u": ["172.20.0.0/16"]}, "linked": ["site-u"]}
    site["teams"]["yield"]["serving_loop"] = {
        "training_images": ["registry.site-t.fab.internal/yield/train"],
        "features": {"wafer": {"table": "yield.wafer_features", "sql": "SELECT wafer_id FROM yield.wafers"}}}
    site["acceptance"] = {"serving_slo_models": {"qwen3-8b": {}}, "serving_loop": {
        "team": "yield", "model": "qwen3-8b", "features": "wafer", "training_image": "registry.site-t.fab.internal/yield/train:1.0"}}
    return site


def with_value(site: dict[str, Any], path: tuple, value: Any) -> tuple:
    """Write `value` at a field path of the site (creating the sections that default), and return the concrete key path."""
    node: Any = site
    concrete: list[str | int] = []
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if part is KEY:
            assert node, f"the test site has no entry at {key_location(tuple(concrete))}: add one to numbers_site()"
            part = sorted(node)[0]
        concrete.append(part)
        if last:
            node[part] = value
        else:
            if isinstance(node, dict) and node.get(part) is None:
                node[part] = {}
            node = node[part]
    return tuple(concrete)


def test_the_numbers_site_is_valid_and_holds_every_number():
    assert NUMBERS
    site = numbers_site()
    parse_site(site)
    for path, _, _ in NUMBERS:
        with_value(copy.deepcopy(site), path, 1)


def test_every_number_has_a_lower_and_an_upper_bound():
    unbounded = [
        key_location(tuple("<key>" if p is KEY else p for p in path))
        for path, _, meta in NUMBERS
        if not {"Ge", "Gt"} & {type(m).__name__ for m in meta} or not {"Le", "Lt"} & {type(m).__name__ for m in meta}
    ]
    assert unbounded == []


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NUMBERS), st.booleans())
def test_fails_when_any_number_is_a_boolean(number, value):
    path, kind, _ = number
    site = numbers_site()
    where = with_value(site, path, value)
    assert config_errors(site) == [
        f"{key_location(where)}: Input should be a valid {'integer' if kind is int else 'number'} (got {value})"
    ]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(NUMBERS))
def test_fails_when_any_number_is_above_its_upper_bound(number):
    path, _, meta = number
    (most,) = [m.le for m in meta if type(m).__name__ == "Le"]
    site = numbers_site()
    where = with_value(site, path, most + 1)
    assert config_errors(site) == [f"{key_location(where)}: Input should be less than or equal to {most} (got {most + 1})"]


def test_fails_when_a_number_is_quoted():
    raw = small_site()
    raw["inference"]["requests_per_minute"] = "600"
    assert config_errors(raw) == ["fab-platform:site.inference.requests_per_minute: Input should be a valid integer (got '600')"]


def test_a_float_key_takes_an_integer():
    raw = small_site()
    raw["inference"]["reserve_gib"] = 4
    assert parse_site(raw).inference.reserve_gib == 4.0


def test_fails_when_a_float_is_a_boolean():
    raw = small_site()
    raw["inference"]["gpu_memory_utilization"] = True
    assert config_errors(raw) == ["fab-platform:site.inference.gpu_memory_utilization: Input should be a valid number (got True)"]


def test_fails_when_a_teams_rate_limit_is_a_boolean():
    raw = small_site()
    raw["inference"]["team_requests_per_minute"] = {"yield": True}
    assert config_errors(raw) == [
        "fab-platform:site.inference.team_requests_per_minute.yield: Input should be a valid integer (got True)"
    ]


def test_fails_when_a_rate_limit_is_above_a_million_a_minute():
    raw = small_site()
    raw["inference"]["requests_per_minute"] = 6_000_000
    assert config_errors(raw) == [
        "fab-platform:site.inference.requests_per_minute: Input should be less than or equal to 1000000 (got 6000000)"
    ]


def test_fails_when_a_profile_serves_a_model_with_no_replica():
    raw = small_site()
    raw["profiles"] = {"night": {"replicas": {"qwen3-8b": 0}}}
    assert config_errors(raw) == [
        "fab-platform:site.profiles.night.replicas.qwen3-8b: Input should be greater than or equal to 1 (got 0)"
    ]


def test_fails_when_a_retention_is_longer_than_a_century():
    raw = small_site()
    raw["storage"]["buckets"]["site-t-checkpoints"]["retention_days"] = 365_000
    assert config_errors(raw) == [
        "fab-platform:site.storage.buckets.site-t-checkpoints.retention_days: Input should be less than or equal to 36500 "
        "(got 365000)"
    ]


def test_fails_when_a_lending_limit_exceeds_the_quota():
    raw = small_site()
    raw["training"] = {"quotas": {"yield": {"gpu": {"gpus": 4, "lending_limit_gpus": 6}}}}
    assert config_errors(raw) == [
        "fab-platform:site.training.quotas.yield.gpu.lending_limit_gpus: 6 is more than the team's nominal quota (gpus: 4); "
        "Kueue refuses a lendingLimit above nominalQuota: lend at most 4"
    ]


def test_a_team_may_lend_its_whole_quota():
    raw = small_site()
    raw["training"] = {"quotas": {"yield": {"gpu": {"gpus": 4, "lending_limit_gpus": 4}}}}
    assert parse_site(raw).training.quotas["yield"]["gpu"].lending_limit_gpus == 4


def test_fails_when_a_profiles_lending_limit_exceeds_its_quota():
    raw = small_site()
    raw["profiles"] = {"night": {"quotas": {"yield": {"gpu": {"gpus": 2, "lending_limit_gpus": 3}}}}}
    assert config_errors(raw) == [
        "fab-platform:site.profiles.night.quotas.yield.gpu.lending_limit_gpus: 3 is more than the team's nominal quota "
        "(gpus: 2); Kueue refuses a lendingLimit above nominalQuota: lend at most 2"
    ]


def test_fails_when_a_yunikorn_queue_is_guaranteed_more_cores_than_its_maximum():
    raw = small_site()
    raw["compute"]["spark"]["batch"]["guaranteed_vcores"] = 32
    assert config_errors(raw) == [
        "fab-platform:site.compute.spark.batch.guaranteed_vcores: 32 is more than max_vcores 16; YuniKorn refuses a queue "
        "guaranteed more than its maximum: lower guaranteed_vcores or raise max_vcores"
    ]


def test_fails_when_a_yunikorn_queue_is_guaranteed_more_memory_than_its_maximum():
    raw = small_site()
    raw["compute"]["spark"]["interactive"]["guaranteed_memory_gib"] = 128
    assert config_errors(raw) == [
        "fab-platform:site.compute.spark.interactive.guaranteed_memory_gib: 128 GiB is more than max_memory_gib 64 GiB; "
        "YuniKorn refuses a queue guaranteed more than its maximum: lower guaranteed_memory_gib or raise max_memory_gib"
    ]


def test_a_yunikorn_queue_may_be_guaranteed_its_maximum():
    raw = small_site()
    raw["compute"]["spark"]["batch"].update(guaranteed_vcores=16, guaranteed_memory_gib=64)
    assert parse_site(raw).compute.spark.batch.guaranteed_vcores == 16


# Capacity per node: a tensor-parallel group lives on one node.

LLAMA_70B = {
    "source": "meta/llama-3.3-70b/", "params_billion": 70, "layers": 80, "kv_heads": 8, "head_dim": 128,
    "max_context": 32768, "concurrent_sequences": 40,
}
"""Four H100s per replica (TP4) and 14 full-context sequences each: 40 sequences take three replicas."""


def six_gpu_nodes(raw: dict[str, Any], count: int = 2) -> None:
    """The inference pool as `count` nodes of 6 H100s, serving the 70B model alone."""
    nodes = raw["gpu"]["gpu"]["nodes"]
    del nodes["gpu-inf-1"]
    for n in range(1, count + 1):
        nodes[f"gpu-inf-{n}"] = {"gpu_type": "h100", "gpus": 6, "pool": "inference"}
    raw["inference"]["models"] = {"llama-70b": dict(LLAMA_70B)}


def test_fails_when_replicas_fit_the_pools_gpus_but_not_its_nodes():
    raw = small_site()
    six_gpu_nodes(raw)
    assert config_errors(raw) == [
        "fab-platform:site.inference.models: the models need 12 GPUs (llama-70b 3 x TP4 = 12) and inference pool "
        "gpu/inference has 12 (2 nodes of 6 GPUs), but a replica never spans nodes: a node of 6 GPUs holds 1 replica at "
        "TP4, so 1 x TP4 of llama-70b is left without a node; add inference nodes or serve fewer replicas"
    ]


def test_one_replica_per_node_serves_when_there_are_enough_nodes():
    raw = small_site()
    six_gpu_nodes(raw, count=3)
    assert parse_site(raw).model_capacity()["llama-70b"].replicas == 3


def test_the_leftover_gpus_of_a_node_serve_a_smaller_model():
    raw = small_site()
    six_gpu_nodes(raw, count=3)
    add_model(raw, "qwen3-8b", min_replicas=2, concurrent_sequences=8)  # 2 x TP1 in the GPUs the TP4 groups leave
    assert {k: v.gpus for k, v in parse_site(raw).model_capacity().items()} == {"llama-70b": 12, "qwen3-8b": 2}


def test_fails_when_a_profiles_replicas_do_not_pack_onto_the_nodes():
    raw = small_site()
    six_gpu_nodes(raw)
    raw["inference"]["models"]["llama-70b"]["concurrent_sequences"] = 20  # two replicas: one per node
    raw["profiles"] = {"peak": {"replicas": {"llama-70b": 3}}}
    assert config_errors(raw) == [
        "fab-platform:site.profiles.peak: the models need 12 GPUs (llama-70b 3 x TP4 = 12) and inference pool "
        "gpu/inference has 12 (2 nodes of 6 GPUs), but a replica never spans nodes: a node of 6 GPUs holds 1 replica at "
        "TP4, so 1 x TP4 of llama-70b is left without a node; add inference nodes or serve fewer replicas (profile peak)"
    ]


def test_fails_when_a_profile_takes_the_node_a_replica_needs():
    raw = small_site()
    six_gpu_nodes(raw, count=3)
    raw["profiles"] = {"night": {"node_pools": {"gpu": {"gpu-inf-3": "training"}}}}
    assert config_errors(raw) == [
        "fab-platform:site.profiles.night: the models need 12 GPUs (llama-70b 3 x TP4 = 12) and inference pool "
        "gpu/inference has 12 (2 nodes of 6 GPUs), but a replica never spans nodes: a node of 6 GPUs holds 1 replica at "
        "TP4, so 1 x TP4 of llama-70b is left without a node; add inference nodes or serve fewer replicas (profile night)"
    ]


def test_fails_when_a_model_needs_a_larger_group_than_a_node_has():
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["gpus"] = 6
    add_model(raw, "big-180b", params_billion=180, layers=96, max_context=8192, concurrent_sequences=4)
    assert config_errors(raw) == [
        "fab-platform:site.inference.models: model big-180b does not fit: it needs 84.6 GiB per GPU (weights and one "
        "8192-token sequence at tensor parallel 4, the largest group within a node of 6 GPUs) but a H100 offers 69.7 GiB "
        "(gpu_memory_utilization 0.9, 2 GiB reserved); use more GPUs per node, a smaller dtype or a shorter max_context"
    ]


# The models' OpenAI names.

def test_fails_when_two_models_share_a_served_name():
    raw = small_site()
    add_model(raw, "qwen3-8b-fp8", served_name="qwen3-8b", dtype="fp8")
    assert config_errors(raw) == [
        "fab-platform:site.inference.models.qwen3-8b-fp8.served_name: 'qwen3-8b' is already the served_name of "
        "inference.models.qwen3-8b; the OpenAI API routes by model name, so give each model its own"
    ]


def test_fails_when_a_served_name_is_another_models_key():
    raw = small_site()
    del raw["inference"]["models"]["qwen3-8b"]["served_name"]
    add_model(raw, "qwen3-8b-fp8", served_name="qwen3-8b", dtype="fp8")
    assert config_errors(raw) == [
        "fab-platform:site.inference.models.qwen3-8b-fp8.served_name: 'qwen3-8b' is already the key of "
        "inference.models.qwen3-8b, which has no served_name and is served as its key; the OpenAI API routes by model "
        "name, so give each model its own"
    ]


def test_a_key_may_equal_another_models_served_name_when_its_own_is_set():
    raw = small_site()
    raw["inference"]["models"]["qwen3"] = {**QWEN3_8B, "served_name": "qwen3-8b-instruct"}
    raw["inference"]["models"]["qwen3-8b"]["served_name"] = "qwen3"
    assert sorted(m.served_name for m in parse_site(raw).inference.models.values()) == ["qwen3", "qwen3-8b-instruct"]
