"""The smallest site that renders: one storage, one compute and one GPU cluster, one team, one small model.

Tests that show a behaviour of the program start here and change one thing, so that a production stack file
can grow (a cluster, a team, a model) without breaking them.
"""

from __future__ import annotations

import copy
from typing import Any

CLUSTERS = ("storage", "compute", "gpu")

_SITE: dict[str, Any] = {
    "name": "site-t",
    "domain": "site-t.fab.internal",
    "minio": {"server": "s3-admin.site-t.fab.internal:9000"},
    "keycloak": {"url": "https://keycloak.site-t.fab.internal"},
    "teams": {"yield": {}},
    "adopt": {"helm_releases": {"storage": ["kube-system/cilium"]}},
    "storage": {
        "s3": {"internal_vip": "10.30.101.10"},
        "buckets": {"site-t-warehouse": {"class": "warehouse"}, "site-t-models": {"class": "models"},
                    "site-t-checkpoints": {"class": "checkpoints"}, "site-t-pg-backups": {"class": "backups"},
                    "site-t-olap": {"class": "olap"}},
        "polaris": {"vip": "10.30.101.11", "postgres": {"backup_bucket": "site-t-pg-backups"}},
    },
    "gpu": {"gpu": {
        "nodes": {"gpu-inf-1": {"gpu_type": "h100", "gpus": 8, "pool": "inference"},
                  "gpu-trn-1": {"gpu_type": "h100", "gpus": 8, "pool": "training"}},
        "system_nodes": ["gpu-sys-1"],
        "infiniband": {"ipoib_range": "10.30.203.0/24"},
    }},
    "inference": {"cluster": "gpu", "gateway": {"vip": "10.30.103.10"}, "models": {"qwen3-8b": {
        "source": "qwen/qwen3-8b/", "served_name": "qwen3-8b", "params_billion": 8.2, "layers": 36, "kv_heads": 8,
        "head_dim": 128, "max_context": 32768, "mean_context": 2048, "concurrent_sequences": 64,
    }}},
    "compute": {
        "batch_nodes": ["compute-batch-1"],
        "ingress": {"vip": "203.0.113.20"},
        "spark": {p: {"guaranteed_vcores": 8, "guaranteed_memory_gib": 32, "max_vcores": 16, "max_memory_gib": 64}
                  for p in ("batch", "interactive")},
    },
    "clusters": {
        key: {
            "role": key, "cluster_id": i + 1, "pod_cidr": f"10.{90 + i}.0.0/16", "node_cidr": f"10.30.{i + 1}.0/24",
            "api_server": f"10.30.{i + 1}.10", "bgp_asn": 65301 + i,
            "bgp_peers": {"tor": {"address": f"10.30.{i + 1}.1", "asn": 65300}},
            "lb_pools": {"internal": {"cidrs": [f"10.30.{101 + i}.0/27"]}}, "clustermesh_vip": f"10.30.{101 + i}.2",
        }
        for i, key in enumerate(CLUSTERS)
    },
}
_SITE["clusters"]["compute"]["bgp_peers"]["edge"] = {"address": "10.30.2.254", "asn": 65399, "kind": "public"}
_SITE["clusters"]["compute"]["lb_pools"]["external"] = {"cidrs": ["203.0.113.16/28"], "visibility": "external"}


def small_site() -> dict[str, Any]:
    """A fresh, mutable copy of the smallest site's `fab-platform:site` object."""
    return copy.deepcopy(_SITE)
