#!/usr/bin/env python3
"""Helm post-renderer: drop the GPU Operator chart's ClusterPolicy, which the program owns as its own resource.

The gpu-operator chart renders `cluster-policy` unconditionally from its values; the platform wants the
ClusterPolicy as a first-class, schema-checked object instead, so the release is rendered without it.
Reads the rendered manifests on stdin and writes them on stdout. Standard library only.
"""

import re
import sys

_KIND = re.compile(r"^kind:\s*ClusterPolicy\s*$", re.MULTILINE)
_API = re.compile(r"^apiVersion:\s*nvidia\.com/", re.MULTILINE)


def drop_cluster_policy(rendered: str) -> str:
    documents = re.split(r"^---\s*$", rendered, flags=re.MULTILINE)
    kept = [doc for doc in documents if not (_KIND.search(doc) and _API.search(doc))]
    return "---".join(kept)


if __name__ == "__main__":
    sys.stdout.write(drop_cluster_policy(sys.stdin.read()))
