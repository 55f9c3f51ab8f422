"""Small Kubernetes helpers shared by components."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities


class FlatCustomResource(pulumi.CustomResource):
    """A custom resource whose fields sit beside `metadata` instead of under `spec` (Kueue's WorkloadPriorityClass).

    `pulumi_kubernetes.apiextensions.CustomResource` only carries `spec`; the provider itself applies any
    `kubernetes:<apiVersion>:<kind>` object as given, so this registers the object's fields directly.
    """

    def __init__(self, name: str, api_version: str, kind: str, metadata: dict[str, Any], fields: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None):
        props = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_utilities.get_version()))
        super().__init__(f"kubernetes:{api_version}:{kind}", name, props, opts)
