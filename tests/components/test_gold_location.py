"""The `gold` namespace's bucket is configured or the only gold bucket, never the first by name."""

from __future__ import annotations

from components.config import parse_site
from components.data_access import polaris_setup_plan
from helpers import config_errors
from small_site import small_site


def _with_gold(*names: str, chosen: str | None = None) -> dict:
    raw = small_site()
    for name in names:
        raw["storage"]["buckets"][name] = {"class": "gold"}
    if chosen is not None:
        raw["storage"]["polaris"]["gold_bucket"] = chosen
    return raw


def _gold_location(raw: dict) -> str:
    site = parse_site(raw)
    plan = polaris_setup_plan(site.storage, "https://s3.example", "us-east-1", {})
    (namespace,) = plan["namespaces"]
    return namespace["properties"]["location"]


def test_the_only_gold_bucket_holds_the_gold_namespace():
    assert _gold_location(_with_gold("site-t-gold")) == "s3://site-t-gold/gold/"


def test_a_gold_bucket_that_sorts_first_does_not_move_the_gold_namespace():
    assert _gold_location(_with_gold("site-t-gold", "aaa-gold", chosen="site-t-gold")) == "s3://site-t-gold/gold/"


def test_fails_when_several_gold_buckets_and_none_is_named():
    assert config_errors(_with_gold("site-t-gold", "aaa-gold")) == [
        "fab-platform:site.storage.polaris.gold_bucket: is required with several gold buckets (aaa-gold, site-t-gold): "
        "name the one that holds the gold namespace"
    ]


def test_fails_when_the_named_gold_bucket_is_not_a_gold_bucket():
    assert config_errors(_with_gold("site-t-gold", chosen="site-t-warehouse")) == [
        "fab-platform:site.storage.polaris.gold_bucket: 'site-t-warehouse' is not a gold bucket of storage.buckets; gold buckets: site-t-gold"
    ]
