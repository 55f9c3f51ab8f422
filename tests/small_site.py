"""The smallest site that renders, and the few things a test adds to it: a GPU cluster, a team, a model, a bucket.

`small_site()` is one storage, one compute and one GPU cluster, one team and one small model. A test that shows a
behaviour of the program starts here, adds what the behaviour needs (`small_site(gpu_clusters=2, teams=("yield",
"fdc"), multikueue=True)`, or the helpers below on the raw dict) and changes one thing, so that a production stack
file can grow (a cluster, a team, a model, a bucket) without breaking it. Every cluster gets its own id, ASN and
ranges from its position, so that added clusters never overlap the others.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

CLUSTERS = ("storage", "compute", "gpu")
"""The keys of the smallest site's clusters, which are also their roles."""

NAME = "site-t"
S3_INTERNAL_VIP = "10.30.101.10"
POLARIS_VIP = "10.30.101.11"
GATEWAY_VIP = "10.30.103.10"
INGRESS_VIP = "203.0.113.20"
S3_EXTERNAL_VIP = "198.51.100.10"
GPU_TYPE = "h100"


def cluster_entry(index: int, role: str) -> dict[str, Any]:
    """`clusters.<key>` of the cluster at `index` (its id is index + 1): ranges, ASN and VIPs that no other index uses."""
    return {
        "role": role, "cluster_id": index + 1, "pod_cidr": f"10.{90 + index}.0.0/16", "node_cidr": f"10.30.{index + 1}.0/24",
        "api_server": f"10.30.{index + 1}.10", "bgp_asn": 65301 + index,
        "bgp_peers": {"tor": {"address": f"10.30.{index + 1}.1", "asn": 65300}},
        "lb_pools": {"internal": {"cidrs": [f"10.30.{101 + index}.0/27"]}}, "clustermesh_vip": f"10.30.{101 + index}.2",
    }


QWEN3_8B = {
    "source": "qwen/qwen3-8b/", "served_name": "qwen3-8b", "params_billion": 8.2, "layers": 36, "kv_heads": 8,
    "head_dim": 128, "max_context": 32768, "mean_context": 2048, "concurrent_sequences": 64,
}
"""A small model: one H100 per replica, two replicas."""

_SITE: dict[str, Any] = {
    "name": NAME,
    "domain": f"{NAME}.fab.internal",
    "phase": 5,  # the last phase: a test adds any part without thinking of the roadmap; the phases' own tests lower it
    "minio": {"server": f"s3-admin.{NAME}.fab.internal:9000"},
    "keycloak": {"url": f"https://keycloak.{NAME}.fab.internal"},
    "teams": {},
    "adopt": {"helm_releases": {"storage": ["kube-system/cilium"]}},
    "storage": {
        "s3": {"internal_vip": S3_INTERNAL_VIP},
        "buckets": {f"{NAME}-warehouse": {"class": "warehouse"}, f"{NAME}-models": {"class": "models"},
                    f"{NAME}-checkpoints": {"class": "checkpoints"}, f"{NAME}-pg-backups": {"class": "backups"},
                    f"{NAME}-olap": {"class": "olap"}},
        "polaris": {"vip": POLARIS_VIP, "postgres": {"backup_bucket": f"{NAME}-pg-backups"}},
    },
    "gpu": {"gpu": {
        "nodes": {"gpu-inf-1": {"gpu_type": GPU_TYPE, "gpus": 8, "pool": "inference"},
                  "gpu-trn-1": {"gpu_type": GPU_TYPE, "gpus": 8, "pool": "training"}},
        "system_nodes": ["gpu-sys-1"],
    }},
    "inference": {"cluster": "gpu", "gateway": {"vip": GATEWAY_VIP}, "models": {"qwen3-8b": QWEN3_8B}},
    "compute": {
        "batch_nodes": ["compute-batch-1"],
        "interactive_nodes": ["compute-interactive-1"],
        "ingress": {"vip": INGRESS_VIP},
        "spark": {p: {"guaranteed_vcores": 8, "guaranteed_memory_gib": 32, "max_vcores": 16, "max_memory_gib": 64}
                  for p in ("batch", "interactive")},
    },
    "clusters": {key: cluster_entry(i, key) for i, key in enumerate(CLUSTERS)},
}
_SITE["clusters"]["gpu"]["host_network_namespaces"] = ["gpu-operator", "nvidia-network-operator"]
_SITE["clusters"]["compute"]["bgp_peers"]["edge"] = {"address": "10.30.2.254", "asn": 65399, "kind": "public"}
_SITE["clusters"]["compute"]["lb_pools"]["external"] = {"cidrs": ["203.0.113.16/28"], "visibility": "external"}


def small_site(*, gpu_clusters: int = 1, teams: Sequence[str] = ("yield",), multikueue: bool = False,
               flow_table: bool = False, external_s3: bool = False) -> dict[str, Any]:
    """A fresh, mutable copy of the smallest site's `fab-platform:site` object, grown as asked.

    gpu_clusters: the mixed `gpu` cluster plus training-only clusters `gpu-train`, `gpu-train-2`, ...
    teams: the teams, in this order. multikueue: the compute cluster dispatches to every GPU cluster.
    flow_table: the stack lists its own flows (the design's, written out) instead of the defaults.
    external_s3: AIStor also gets an external S3 endpoint, on a public pool of the storage cluster.
    """
    site = copy.deepcopy(_SITE)
    for team in teams:
        add_team(site, team)
    if flow_table:
        write_flow_table(site)
    if multikueue:
        site.setdefault("training", {})["multikueue"] = {"enabled": True, "workers": ["gpu"]}
    for n in range(1, gpu_clusters):
        add_gpu_cluster(site, "gpu-train" if n == 1 else f"gpu-train-{n}")
    if external_s3:
        add_external_s3(site)
    return site


def full_site() -> dict[str, Any]:
    """Every optional part of a site once, for the tests that read one of them from a shared render: a training-only
    GPU cluster joined by MultiKueue, two teams with GPU quotas (yield on both clusters, fdc on gpu only), the stack's
    own flow table, an external S3 endpoint, a bucket of every data class (some with lifecycle rules), fdc's own rate
    limit at the inference gateway and model weights loaded over InfiniBand."""
    site = small_site(gpu_clusters=2, teams=("fdc", "yield"), multikueue=True, flow_table=True, external_s3=True)
    add_weights_over_ib(site)
    site["training"]["quotas"] = {"yield": {"gpu": {"gpus": 4}, "gpu-train": {"gpus": 8}}, "fdc": {"gpu": {"gpus": 4}}}
    site["inference"]["team_requests_per_minute"] = {"fdc": 3000}
    add_bucket(site, f"{NAME}-raw-fdc", "raw", retention_days=730)
    add_bucket(site, f"{NAME}-datasets", "datasets")
    add_bucket(site, f"{NAME}-gold", "gold")
    site["storage"]["buckets"][f"{NAME}-checkpoints"].update(retention_days=90, noncurrent_expiry_days=7)
    return site


def gpu_keys(site: dict[str, Any]) -> list[str]:
    return sorted(k for k, c in site["clusters"].items() if c["role"] in ("gpu", "gpu-train"))


def add_team(site: dict[str, Any], name: str, quotas: dict[str, int] | None = None) -> None:
    """A team, with nominal GPU quotas per GPU cluster key where given."""
    site["teams"][name] = {"description": f"the {name} team"}
    for cluster, gpus in (quotas or {}).items():
        site.setdefault("training", {}).setdefault("quotas", {}).setdefault(name, {})[cluster] = {"gpus": gpus}


def add_gpu_cluster(site: dict[str, Any], key: str, role: str = "gpu-train", training_nodes: int = 1,
                    gpu_type: str = GPU_TYPE) -> None:
    """A GPU cluster with `training_nodes` nodes of 8 GPUs, everything it needs to join the site: its own ranges, ASN
    and VIPs, a MultiKueue worker entry where MultiKueue is on, and its place in the S3, Polaris and MultiKueue flows
    where the site lists its own flows."""
    site["clusters"][key] = {**cluster_entry(len(site["clusters"]), role), "host_network_namespaces": ["gpu-operator", "nvidia-network-operator"]}
    if "observability" in site:
        site["clusters"][key]["host_network_namespaces"].append(NODE_EXPORTER)
    site["gpu"][key] = {
        "nodes": {f"{key}-trn-{n}": {"gpu_type": gpu_type, "gpus": 8, "pool": "training"} for n in range(1, training_nodes + 1)},
        "system_nodes": [f"{key}-sys-1"],
    }
    multikueue = site.get("training", {}).get("multikueue", {})
    if multikueue.get("enabled"):
        multikueue["workers"].append(key)
    flows = site.get("flows")
    if flows is not None:
        for name in ("s3", "polaris"):
            flows[name]["from"].append(key)
        if "multikueue" in flows:
            flows["multikueue"]["to"].append(key)


IPOIB_RANGE = "10.30.203.0/24"
S3_IPOIB_ADDRESS = "10.30.203.250"


def add_weights_over_ib(site: dict[str, Any]) -> None:
    """The inference cluster loads weights over InfiniBand: its IPoIB network, partition and service level, and the
    object store's IPoIB address."""
    site["gpu"][site["inference"]["cluster"]]["infiniband"] = {
        "inference_weights_over_ib": True, "ipoib_range": IPOIB_RANGE, "ipoib_partition_key": "0x0a01",
        "s3_ipoib_address": S3_IPOIB_ADDRESS, "storage_qos_service_level": 1,
    }


def add_model(site: dict[str, Any], name: str, **profile: Any) -> None:
    """A served model: the small one's profile under another name, with `profile` changed."""
    site["inference"]["models"][name] = {**QWEN3_8B, "source": f"acme/{name}/", "served_name": name, **profile}


SERVING_REPO = f"https://git.{NAME}.fab.internal/platform/serving.git"
SERVING_REPO_TOKEN = {"fab-platform:servingRepoToken": {"secure": "v1:c2VydmluZy1yZXBvLXRva2Vu"}}
"""The secret config a site with Argo CD's serving repository renders with, beside `fab-platform:site`."""


def with_argocd(site: dict[str, Any]) -> dict[str, Any]:
    """Serving through Git: Argo CD on compute with the serving repository, and inference delivered by it (render with
    `SERVING_REPO_TOKEN` in the config)."""
    site["compute"]["argocd"] = {"enabled": True, "serving_repo": {"url": SERVING_REPO}}
    site["inference"]["delivery"] = "argocd"
    return site


def add_bucket(site: dict[str, Any], name: str, data_class: str, **settings: Any) -> None:
    site["storage"]["buckets"][name] = {"class": data_class, **settings}


def write_flow_table(site: dict[str, Any]) -> None:
    """The stack's own flow table: the design's four flows written out for the site's clusters as they are now."""
    gpus = gpu_keys(site)
    site["flows"] = {
        "s3": {"from": ["compute", *gpus], "to": ["storage"], "port": 9000, "to_namespace": "aistor"},
        "polaris": {"from": ["compute", *gpus], "to": ["storage"], "port": 8181, "to_namespace": "polaris"},
        "inference": {"from": ["compute"], "to": ["gpu"], "port": 443, "target_port": 10443,
                      "to_namespace": "envoy-gateway-system", "to_labels": {"app.kubernetes.io/name": "envoy"}},
        "multikueue": {"from": ["compute"], "to": gpus, "port": 6443, "target": "kube-apiserver",
                       "from_namespace": "kueue-system", "from_labels": {"control-plane": "controller-manager"}},
    }


def add_external_s3(site: dict[str, Any]) -> None:
    """An external S3 endpoint for instruments and vendors: a public pool and peer on storage, and its world flow."""
    storage = site["clusters"]["storage"]
    storage["bgp_peers"]["edge"] = {"address": "10.30.1.254", "asn": 65399, "kind": "public"}
    storage["lb_pools"]["external"] = {"cidrs": ["198.51.100.0/28"], "visibility": "external"}
    site["storage"]["s3"].update({"external_pool": "external", "external_vip": S3_EXTERNAL_VIP})
    if site.get("flows") is not None:
        site["flows"]["s3-external"] = {"from": ["world"], "to": ["storage"], "port": 9000, "to_namespace": "aistor",
                                        "world_reason": "The fab's instruments upload from addresses nobody lists."}


def add_profile_schedule(site: dict[str, Any]) -> None:
    """Day (the base config) and night (one vLLM replica fewer, yield's quota doubled) switched on a schedule: day at
    07:00 on weekdays, night at 19:00, Berlin time; yield has 4 GPUs of quota by day."""
    site.setdefault("training", {})["quotas"] = {"yield": {"gpu": {"gpus": 4}}}
    site["profiles"] = {"day": {"description": "office hours"},
                        "night": {"replicas": {"qwen3-8b": 1}, "quotas": {"yield": {"gpu": {"gpus": 8}}}}}
    site["active_profile"] = "day"
    site["profile_schedule"] = {"timezone": "Europe/Berlin", "switches": {"day": "0 7 * * 1-5", "night": "0 19 * * *"}}


NODE_EXPORTER = "node-exporter"
RECEIVER_VIP = "10.30.102.20"
"""compute's Prometheus for the other clusters, in compute's internal pool."""
STORE = {"url": "https://mimir.site-t.fab.internal/api/v1/push", "query_url": "https://mimir.site-t.fab.internal/prometheus"}
METRICS_PASSWORD = {"fab-platform:metricsRemoteWritePassword": {"secure": "v1:bWV0cmljcy1wYXNzd29yZA=="}}
"""The secret config a site whose metrics store has a user renders with, beside `fab-platform:site`."""


def add_observability(site: dict[str, Any], metrics: str = "in-cluster", **settings: Any) -> None:
    """The metrics stack (issue 19): kept in compute's Prometheus at `RECEIVER_VIP`, or written to the site's store
    (`STORE`), with `settings` changed; every cluster allow-lists node-exporter's namespace."""
    observability = {"metrics": metrics, **({"receiver_vip": RECEIVER_VIP} if metrics == "in-cluster" else {"remote_write": dict(STORE)})}
    site["observability"] = {**observability, **settings}
    for cluster in site["clusters"].values():
        cluster.setdefault("host_network_namespaces", []).append(NODE_EXPORTER)


NOTEBOOKS_VIP = "10.30.103.11"


def add_gpu_notebooks(site: dict[str, Any], quotas: dict[str, int] | None = None, nodes: int = 1, **sharing: Any) -> None:
    """GPU notebooks on `gpu`: `nodes` notebooks-pool nodes of 8 GPUs shared as `sharing` says (time-slicing by default),
    a hub at NOTEBOOKS_VIP, and a quota of notebooks per team (each team is added where missing)."""
    quotas = quotas or {"yield": 4}
    for team in quotas:
        if team not in site["teams"]:
            add_team(site, team)
    for n in range(1, nodes + 1):
        site["gpu"]["gpu"]["nodes"][f"gpu-nb-{n}"] = {"gpu_type": GPU_TYPE, "gpus": 8, "pool": "notebooks"}
    if sharing:
        site["gpu"]["gpu"]["sharing"] = sharing
    site["compute"].setdefault("jupyterhub", {})["gpu_notebooks"] = {"cluster": "gpu", "vip": NOTEBOOKS_VIP, "team_quotas": quotas}


def add_vendor(site: dict[str, Any], name: str = "etch-tools", tables: Sequence[str] = ("gold.chamber_health_daily",),
               views: Sequence[str] = ("gold.chamber_health_etch_tools",)) -> None:
    """An equipment vendor reading a gold table and a view of it (needs a gold bucket and the external S3 endpoint,
    which this adds where the site has none)."""
    if not any(bucket["class"] == "gold" for bucket in site["storage"]["buckets"].values()):
        add_bucket(site, f"{NAME}-gold", "gold")
    if "external_pool" not in site["storage"]["s3"]:
        add_external_s3(site)
    site["storage"].setdefault("vendors", {})[name] = {
        "description": "Etch chamber vendor: daily chamber health of its tools", "tables": list(tables), "views": list(views),
        "source_cidrs": ["198.51.100.64/28"],
    }


SITE_CA = "certs/site-b-ca.pem"
"""A PEM bundle of the project's (site-b's PKI), which a test site names as its own `ca_bundle`."""


def trusting_site() -> dict[str, Any]:
    """A site with its own CA (`SITE_CA`) and every kind of client of it the program runs: the inference gateway's JWT
    policies, Grafana, both hubs, Argo CD with the serving repository on the site's Git server (render with
    `SERVING_REPO_TOKEN`), Trino's OAuth2 sign-in and Polaris' database backups."""
    site = with_argocd(small_site())
    site["ca_bundle"] = SITE_CA
    add_observability(site)
    add_gpu_notebooks(site)
    return site
