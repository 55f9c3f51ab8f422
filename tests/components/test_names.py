"""Derived names: every name the program makes from a config key fits its limit, checked on the key (components.config.names).

A site whose keys are exactly as long as the rules allow renders, and every object of its plan fits what
Kubernetes, Helm, S3, Keycloak and DNS accept; one character more on any of those keys is refused with one line
naming the key. A derived name missing from the table would make the render test fail, not the API server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_site
from components.config.names import TEAM_NAMESPACE, derives
from components.config.site import SiteConfig
from fabctl.reference import type_name
from fabctl.render import Plan, render_config
from fabctl.stackfile import SITE_KEY
from helpers import config_errors
from small_site import QWEN3_8B, add_bucket, small_site

LONGEST = {
    "site": "s" * 24,  # `<site>-storage` and `<site>-compute` are Cilium cluster names of 32
    "domain": ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 49]),  # `s3-external.<domain>` is a host name of 253
    "team": "t" * 50,  # `polaris-team-<team>` is a Job of 63
    "model": "m" * 58,  # `vllm-<model>` is a Service of 63
    "consumer": "c" * 44,  # `gold-to-<consumer>` is a CronJob of 52, `federation-<consumer>-polaris` a label value of 63
    "peer": "p" * 30,  # `<site>-replica-<peer>` is a bucket of 63
    "object_store": "o" * 53,  # a Helm release name of 53
    "gpu_type": "g" * 63,
    "flow": "f" * 63,
    "pool": "x" * 63,
    "bgp_peer": "b" * 63,
    "bucket": "k" * 63,
    "node": ".".join(["n" * 63, "n" * 63, "n" * 63, "n" * 61]),  # a node name of 253
}
"""Every key of a derived name at the longest its rules allow."""
SITE, DOMAIN, TEAM, MODEL, CONSUMER, PEER = (LONGEST[k] for k in ("site", "domain", "team", "model", "consumer", "peer"))
SECRETS = {"fab-platform:aistorLicense": {"secure": "v1:license"}, "fab-platform:aistorRootPassword": {"secure": "v1:password"}}


def longest_site(**changed: str) -> dict[str, Any]:
    """The smallest site with MultiKueue, an external S3 endpoint, federation (linked both ways) and its own flow table, every key of a derived
    name at its longest (`LONGEST`, or as `changed`)."""
    key = {**LONGEST, **changed}
    team, model, consumer, peer = key["team"], key["model"], key["consumer"], key["peer"]
    site = small_site(teams=(team,), flow_table=True, multikueue=True, external_s3=True)
    site["name"], site["domain"] = key["site"], key["domain"]
    site["training"]["quotas"] = {team: {"gpu": {"gpus": 8}}}
    site["inference"]["models"] = {model: {**QWEN3_8B, "served_name": "qwen3-8b"}}
    site["gpu_types"] = {key["gpu_type"]: {"memory_mib": 81559, "product": "NVIDIA-H100-80GB-HBM3"}}
    site["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["gpu_type"] = key["gpu_type"]
    site["flows"][key["flow"]] = {"from": ["compute"], "to": ["storage"], "port": 9000, "to_namespace": "aistor"}
    compute = site["clusters"]["compute"]
    compute["lb_pools"][key["pool"]] = compute["lb_pools"].pop("external")
    site["compute"]["ingress"]["pool"] = key["pool"]
    compute["bgp_peers"][key["bgp_peer"]] = compute["bgp_peers"].pop("tor")
    site["compute"]["batch_nodes"] = [key["node"]]
    site["storage"]["object_store"] = {"install": True, "name": key["object_store"]}
    add_bucket(site, key["bucket"], "raw")
    add_bucket(site, "site-t-gold", "gold")
    site["federation"] = {
        "consumers": {consumer: {}}, "peers": {peer: {}}, "linked": [consumer, peer],
        "ranges": {consumer: ["172.20.0.0/16"], peer: ["172.21.0.0/16"]},
    }
    return site


def exports(other: str) -> dict[str, Any]:
    """What a linked site exports to this one."""
    return {"federation": {
        "site": other, "catalog_uri": f"http://polaris.{other}.fab.internal:8181/api/catalog", "warehouse": "fab",
        "gold_namespace": "gold", "s3_endpoint": f"https://s3.{other}.fab.internal:9000",
        "principals": {SITE: {"client_id": "id", "client_secret": "secret"}},
        "replica_targets": {SITE: {"endpoint": f"https://s3.{other}.fab.internal:9000", "bucket": f"{other}-replica-{SITE}",
                                   "access_key": "key", "secret_key": "secret"}},
    }}


@pytest.fixture(scope="module")
def plan() -> Plan:
    references = {f"organization/fab-platform/{other}": exports(other) for other in (CONSUMER, PEER)}
    return render_config("site-t", {SITE_KEY: longest_site(), **SECRETS}, stack_references=references)


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NAME_RULES = {
    # kind: (pattern, longest); every other kind's name is a DNS subdomain of at most 253
    "Namespace": (DNS_LABEL, 63),
    "Service": (DNS_1035_LABEL, 63),
    "CronJob": (DNS_SUBDOMAIN, 52),  # its Jobs are `<name>-<11 digits>`, and a Job's name is a label value
    "Job": (DNS_LABEL, 63),
}
LABEL_MAPS = ("labels", "matchLabels", "nodeLabels", "nodeSelector")


def _label_maps(node: Any) -> list[dict[str, str]]:
    """Every map of label values in an object: its labels, selectors and node selections."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in LABEL_MAPS and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
                out.append(value)
            else:
                out += _label_maps(value)
    elif isinstance(node, list):
        for item in node:
            out += _label_maps(item)
    return out


def _is_host_name(name: str) -> bool:
    return len(name) <= 253 and all(len(label) <= 63 for label in name.split(".")) and bool(DNS_SUBDOMAIN.fullmatch(name))


def test_a_site_with_every_key_at_its_longest_loads():
    assert parse_site(longest_site()).name == SITE


def test_every_object_name_of_the_longest_site_fits_its_kind(plan):
    manifests = plan.manifests()
    assert manifests
    too_long = []
    for cluster, obj, _ in manifests:
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        pattern, longest = NAME_RULES.get(obj["kind"], (DNS_SUBDOMAIN, 253))
        if len(name) > longest or not pattern.fullmatch(name):
            too_long.append(f"{cluster} {obj['kind']} {name}")
        if namespace is not None and (len(namespace) > 63 or not DNS_LABEL.fullmatch(namespace)):
            too_long.append(f"{cluster} {obj['kind']} {namespace}/{name}")
    assert too_long == []
    names = {obj["metadata"]["name"] for _, obj, _ in manifests}
    assert {TEAM_NAMESPACE(TEAM), f"vllm-{MODEL}", f"gold-to-{CONSUMER}", LONGEST["node"]} <= names


def test_every_label_value_of_the_longest_site_fits(plan):
    values = [v for _, obj, _ in plan.manifests() for labels in _label_maps(obj) for v in labels.values()]
    assert values
    assert [v for v in values if len(v) > 63 or not LABEL_VALUE.fullmatch(v)] == []
    assert {TEAM, MODEL, LONGEST["gpu_type"], LONGEST["flow"], LONGEST["pool"], f"federation-{CONSUMER}-polaris"} <= set(values)


def test_every_host_name_of_the_longest_site_fits(plan):
    routes = [h for obj in plan.objects("HTTPRoute") for h in obj["spec"]["hostnames"]]
    listeners = [listener["hostname"] for obj in plan.objects("Gateway") for listener in obj["spec"]["listeners"]]
    records = list(plan.outputs["dns_records"])
    hosts = [*routes, *listeners, *records]
    assert hosts
    assert [h for h in hosts if not _is_host_name(h)] == []
    assert f"s3-external.{DOMAIN}" in hosts


def test_every_helm_release_name_of_the_longest_site_fits(plan):
    releases = plan.of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    assert [r["inputs"]["name"] for r in releases if len(r["inputs"]["name"]) > 53 or not DNS_LABEL.fullmatch(r["inputs"]["name"])] == []
    assert LONGEST["object_store"] in {r["inputs"]["name"] for r in releases}


def test_every_bucket_of_the_longest_site_is_an_s3_bucket_name(plan):
    buckets = [r["inputs"]["bucket"] for r in plan.of_type("minio:index/s3Bucket:S3Bucket")]
    assert f"{SITE}-replica-{PEER}" in buckets
    assert [b for b in buckets if not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", b)] == []


def test_every_keycloak_name_of_the_longest_site_fits(plan):
    clients = [r["inputs"]["clientId"] for r in plan.of_type("keycloak:openid/client:Client")]
    groups = [r["inputs"]["name"] for r in plan.of_type("keycloak:index/group:Group")]
    assert f"inference-{TEAM}" in clients and f"team-{TEAM}" in groups
    assert [n for n in [*clients, *groups] if len(n) > 255] == []


ONE_LONGER = {
    "team": f"teams.{TEAM}z: Job 'polaris-team-{TEAM}z' ('polaris-team-' + key) has 64 characters; Kubernetes allows at most "
            "63: use a key of at most 50 characters",
    "model": f"inference.models.{MODEL}z: Service 'vllm-{MODEL}z' ('vllm-' + key) has 64 characters; Kubernetes allows at "
             "most 63: use a key of at most 58 characters",
    "consumer": f"federation.consumers.{CONSUMER}z: CronJob 'gold-to-{CONSUMER}z' ('gold-to-' + key) has 53 characters; "
                "Kubernetes allows at most 52: use a key of at most 44 characters",
    "peer": f"federation.peers.{PEER}z: bucket '{SITE}-replica-{PEER}z' (site name + '-replica-' + key) has 64 characters; "
            "S3 allows at most 63: use a shorter key",
    "object_store": f"storage.object_store.name: Helm release name '{LONGEST['object_store']}z' has 54 characters; Helm "
                    "allows at most 53: use a name of at most 53 characters",
    "domain": f"domain: host name 's3-external.{DOMAIN}z' ('s3-external.' + domain) has 254 characters; DNS allows at most "
              "253: use a domain of at most 241 characters",
}


@pytest.mark.parametrize("key", sorted(ONE_LONGER))
def test_fails_when_a_key_is_one_character_longer_than_its_names_allow(key):
    assert config_errors(longest_site(**{key: LONGEST[key] + "z"})) == [f"fab-platform:site.{ONE_LONGER[key]}"]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(set(ONE_LONGER) - {"domain"})), st.integers(1, 70))
def test_a_key_is_refused_exactly_when_a_name_made_from_it_would_not_fit(key, length):
    try:
        parse_site(longest_site(**{key: "a" * length}))
        accepted = True
    except ConfigError:
        accepted = False
    assert accepted == (length <= len(LONGEST[key]))


def test_fails_when_a_service_made_from_a_key_would_not_start_with_a_letter():
    site = small_site()
    site["storage"]["object_store"] = {"name": "1-store"}
    assert config_errors(site) == [
        "fab-platform:site.storage.object_store.name: Service '1-store-s3' (name + '-s3') must start with a letter, as "
        "Kubernetes requires of a Service name: use a name that starts with a letter"
    ]


def test_fails_when_a_domain_label_is_longer_than_63_characters():
    site = small_site()
    site["domain"] = "d" * 64 + ".fab.internal"
    assert config_errors(site) == [
        "fab-platform:site.domain: has a label of 64 characters ('dddddddddddddddddddd'...); each label of a DNS name has "
        f"at most 63: shorten it (got '{'d' * 64}.fab.internal')"
    ]


def test_the_reference_states_a_keys_limit_next_to_it():
    teams = SiteConfig.model_fields["teams"].annotation
    assert type_name(teams) == (
        "map of DNS label, at most 50 characters (Job `polaris-team-<key>`), to [Team](#team)"
    )


def test_the_reference_states_both_limits_of_a_key_paired_with_the_site_name():
    key = derives(SiteConfig.model_fields["clusters"].annotation.__args__[0])
    assert key is not None
    assert key.summary("key") == (
        "at most 48 characters (volume `gpu-<key>-kubeconfig`), cluster name `<site>-<key>` at most 32 characters"
    )
