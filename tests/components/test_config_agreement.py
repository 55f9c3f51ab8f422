"""Config that agrees with itself (issue 16, classes 4, 6, 8, 9 and 10): flows open what their service listens on,
lists hold each entry once, pass-through Kubernetes syntax follows Kubernetes' rules, the design's roles hold, and
endpoints are parsed. Each test starts from the smallest site (small_site.py) and changes one thing."""

from __future__ import annotations

from components.config import parse_site
from helpers import config_errors
from small_site import add_bucket, full_site, small_site


def test_fails_when_the_s3_flow_opens_another_port_than_the_object_stores():
    raw = small_site(flow_table=True)
    raw["storage"]["object_store"] = {"s3_port": 9443}
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3.port: 9000 is not the port of the object store's S3 endpoint (9443, "
        "storage.object_store.s3_port); clients dial 9443"
    ]


def test_fails_when_the_polaris_flow_opens_another_namespace():
    raw = small_site(flow_table=True)
    raw["flows"]["polaris"]["to_namespace"] = "catalog"
    assert config_errors(raw) == [
        "fab-platform:site.flows.polaris.to_namespace: 'catalog' is not where the Polaris REST endpoint runs ('polaris', "
        "storage.polaris.namespace)"
    ]


def test_fails_when_the_inference_flow_opens_the_listener_port_on_the_pods():
    raw = small_site(flow_table=True)
    del raw["flows"]["inference"]["target_port"]
    assert config_errors(raw) == [
        "fab-platform:site.flows.inference.target_port: 443 is not the port the inference gateway's pods listen on (10443); "
        "Cilium policy sees the pods' port after load balancing"
    ]


def test_fails_when_the_inference_flow_leaves_out_the_serving_cluster():
    raw = small_site(gpu_clusters=2, flow_table=True)
    raw["flows"]["inference"]["to"] = ["gpu-train"]
    assert config_errors(raw) == [
        "fab-platform:site.flows.inference.to: ['gpu-train'] leaves out clusters.gpu, where the inference gateway runs; add it"
    ]


def test_a_flow_of_another_name_may_reach_a_service_of_the_design():
    raw = small_site(flow_table=True)
    raw["flows"]["s3-batch"] = {"from": ["compute"], "to": ["storage"], "port": 9000, "to_namespace": "aistor"}
    assert parse_site(raw).flows["s3-batch"].port == 9000


def test_fails_when_a_flow_of_another_name_opens_another_port_of_a_service():
    raw = small_site(flow_table=True)
    raw["flows"]["s3-console"] = {"from": ["compute"], "to": ["storage"], "port": 9001, "to_namespace": "aistor"}
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3-console.port: 9001 is not the port of the object store's S3 endpoint (9000, "
        "storage.object_store.s3_port); clients dial 9000"
    ]


def test_fails_when_a_flow_comes_from_a_source_the_design_does_not_admit():
    raw = small_site(flow_table=True)
    raw["flows"]["inference"]["from"] = ["compute", "storage"]
    assert config_errors(raw) == [
        "fab-platform:site.flows.inference.from[1]: 'storage': the design does not let clusters.storage (storage) reach the "
        "inference gateway; it admits compute clusters"
    ]


def test_fails_when_an_api_server_flow_comes_from_another_cluster_than_the_manager():
    raw = small_site(flow_table=True)
    raw["flows"]["multikueue"]["from"] = ["compute", "storage"]
    assert config_errors(raw) == [
        "fab-platform:site.flows.multikueue.from[1]: 'storage': only the MultiKueue manager (clusters.compute) reaches other "
        "clusters' API servers; remove it"
    ]


def test_fails_when_a_list_names_an_entry_twice():
    raw = small_site()
    raw["gpu"]["gpu"]["system_nodes"] = ["gpu-sys-1", "gpu-sys-2", "gpu-sys-1"]
    assert config_errors(raw) == [
        "fab-platform:site.gpu.gpu.system_nodes: lists 'gpu-sys-1' twice (items 0 and 2); remove the duplicate "
        "(got ['gpu-sys-1', 'gpu-sys-2', 'gpu-sys-1'])"
    ]


def test_fails_when_a_topology_level_is_not_a_label_key():
    raw = small_site()
    raw["training"] = {"topology_levels": ["Fab.Internal/rack"]}
    assert config_errors(raw) == [
        "fab-platform:site.training.topology_levels[0]: is not a Kubernetes label key: its prefix 'Fab.Internal' must be a "
        "lowercase DNS subdomain of at most 253 characters, such as fab.internal (got 'Fab.Internal/rack')"
    ]


def test_fails_when_the_hostname_level_is_not_the_narrowest():
    raw = small_site()
    raw["training"] = {"topology_levels": ["kubernetes.io/hostname", "fab.internal/rack"]}
    assert config_errors(raw) == [
        "fab-platform:site.training.topology_levels[0]: 'kubernetes.io/hostname' is not the last level; Kueue allows the "
        "node's own label only as the narrowest level: move it last"
    ]


def test_fails_when_a_label_value_has_a_space():
    raw = small_site()
    raw["gpu_types"] = {"b200": {"memory_mib": 183359, "product": "NVIDIA B200"}}
    assert config_errors(raw) == [
        "fab-platform:site.gpu_types.b200.product: is not a Kubernetes label value: at most 63 letters, digits, '-', '_' or "
        "'.', starting and ending with a letter or digit (got 'NVIDIA B200')"
    ]


def test_a_label_key_may_have_a_long_prefix_and_a_63_character_name():
    raw = small_site()
    level = f"{'a' * 60}.fab.internal/{'r' * 63}"
    raw["training"] = {"topology_levels": [level]}
    assert parse_site(raw).training.topology_levels == [level]


def test_fails_when_the_multikueue_manager_is_a_gpu_cluster():
    raw = small_site(gpu_clusters=2)
    raw["training"] = {"multikueue": {"enabled": True, "manager": "gpu", "workers": ["gpu-train"]}}
    assert config_errors(raw) == [
        "fab-platform:site.training.multikueue.manager: 'gpu' is a gpu cluster; the MultiKueue manager is the compute "
        "cluster, where jobs are submitted: leave manager unset"
    ]


def test_fails_when_gold_is_replicated_without_a_gold_bucket():
    raw = small_site()
    raw["federation"] = {"consumers": {"site-x": {}}, "ranges": {"site-x": ["10.200.0.0/16"]}}
    assert config_errors(raw) == [
        "fab-platform:site.federation.consumers.site-x.replicate_gold: unset (on from phase 05) copies this site's gold to site-x, "
        "but storage.buckets has no bucket of class gold: add one, or set replicate_gold: false"
    ]


def test_a_consumer_without_replication_needs_no_gold_bucket():
    raw = small_site()
    raw["federation"] = {"consumers": {"site-x": {"replicate_gold": False}}, "ranges": {"site-x": ["10.200.0.0/16"]}}
    assert parse_site(raw).federation.consumers["site-x"].replicate_gold is False


def test_fails_when_the_minio_server_has_a_scheme():
    raw = small_site()
    raw["minio"]["server"] = "https://s3-admin.site-t.fab.internal:9000"
    assert config_errors(raw) == [
        "fab-platform:site.minio.server: must be host:port without a scheme, such as s3-admin.site-a.fab.internal:9000 "
        "(TLS is set by `ssl`) (got 'https://s3-admin.site-t.fab.internal:9000')"
    ]


def test_fails_when_the_keycloak_url_ends_with_a_slash():
    raw = small_site()
    raw["keycloak"]["url"] = "https://keycloak.site-t.fab.internal/"
    assert config_errors(raw) == [
        "fab-platform:site.keycloak.url: ends with '/'; write the base URL without it, such as "
        "https://keycloak.site-a.fab.internal (got 'https://keycloak.site-t.fab.internal/')"
    ]


def test_a_keycloak_url_may_have_a_port_and_a_base_path():
    raw = small_site()
    raw["keycloak"]["url"] = "https://10.30.1.50:8443/auth"
    assert parse_site(raw).keycloak.url == "https://10.30.1.50:8443/auth"


def test_fails_when_a_model_source_is_an_s3_url():
    raw = small_site()
    raw["inference"]["models"]["qwen3-8b"]["source"] = "s3://site-t-models/qwen/qwen3-8b/"
    assert config_errors(raw) == [
        "fab-platform:site.inference.models.qwen3-8b.source: must be a path inside the bucket, such as "
        "meta/llama-3.3-70b-instruct/: no scheme or bucket, no leading '/', no '.' or '..', no spaces and no '*' or '?' "
        "(got 's3://site-t-models/qwen/qwen3-8b/')"
    ]


def test_fails_when_a_model_source_holds_a_policy_wildcard():
    # Every team's keys read the served weights' path (batch inference): a '?' or '*' in it would widen the grant.
    raw = small_site()
    raw["inference"]["models"]["qwen3-8b"]["source"] = "qwen/qwen3-8b?realm=fab"
    assert config_errors(raw) == [
        "fab-platform:site.inference.models.qwen3-8b.source: must be a path inside the bucket, such as "
        "meta/llama-3.3-70b-instruct/: no scheme or bucket, no leading '/', no '.' or '..', no spaces and no '*' or '?' "
        "(got 'qwen/qwen3-8b?realm=fab')"
    ]


def test_the_full_site_with_a_gold_bucket_replicates():
    raw = full_site()
    raw["federation"] = {"consumers": {"site-x": {}}, "ranges": {"site-x": ["10.200.0.0/16"]}}
    add_bucket(raw, "site-t-gold-2", "gold")
    raw["storage"]["polaris"]["gold_bucket"] = "site-t-gold"
    assert parse_site(raw).replicates_gold("site-x") is True
