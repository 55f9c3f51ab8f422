"""Image values of the charts of the storage part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

from components import versions
from components.registry import Registry

CNPG_OPERATOR_REPOSITORY = "ghcr.io/cloudnative-pg/cloudnative-pg"
"""The cloudnative-pg chart's `image.repository` (its tag defaults to the chart's appVersion)."""
AISTOR_REPOSITORY = "quay.io/minio/aistor"
"""Where every AIStor image lives: the aistor-operator chart's `repositories.aistor` (hostname quay.io, pathPrefix
minio/aistor/), which each entry of its `images` table (operator, minio, minio-sidecar, kes, kes-sidecar, minwall, mc,
warp, ...) is resolved against."""


def _image(registry: Registry, reference: str) -> dict[str, str]:
    """A chart's `image` as repository and tag, from the mirror."""
    ref = registry.ref(reference)
    return {"repository": f"{ref.registry}/{ref.repository}", "tag": ref.tag}


def _cloudnative_pg(registry: Registry) -> dict[str, Any]:
    """The operator's image (its Deployment, and `OPERATOR_IMAGE_NAME`, which every Postgres pod's bootstrap init container
    runs) and the operator's default Postgres image (`POSTGRES_IMAGE_NAME`) from the mirror. The program's Cluster names its
    image and pull Secret itself (components/polaris.py), so the operator copies no pull Secret (`PULL_SECRET_NAME`)."""
    values: dict[str, Any] = {
        "image": {"repository": registry.image(CNPG_OPERATOR_REPOSITORY)},
        "config": {"data": {"POSTGRES_IMAGE_NAME": registry.image(versions.CNPG_POSTGRES_IMAGE)}},
    }
    if registry.pull_secret:
        values["imagePullSecrets"] = registry.pull_secrets
    return values


def _polaris(registry: Registry) -> dict[str, Any]:
    """The server (the program's POLARIS_SERVER_IMAGE) and the maintenance CronJobs' admin tool from the mirror; the chart's
    `imagePullSecrets` is a list of Secret names, read by both."""
    values: dict[str, Any] = {
        "image": _image(registry, versions.POLARIS_SERVER_IMAGE),
        "maintenance": {"image": _image(registry, versions.POLARIS_ADMIN_TOOL_IMAGE)},
    }
    if registry.pull_secret:
        values["imagePullSecrets"] = [registry.pull_secret]
    return values


def _aistor_operator(registry: Registry) -> dict[str, Any]:
    """Every AIStor image from the mirror through the one repository they all resolve against: the operator's own, and
    those it launches at run time, which the chart writes into its per-operator ConfigMaps (object-store-operator: minio,
    minio-sidecar, kes, kes-sidecar, minwall; adminjob-operator: mc). The repository's pull Secrets go on the operator's pods
    and, through those ConfigMaps, on every pod the operator creates."""
    aistor: dict[str, Any] = {"hostname": registry.image(AISTOR_REPOSITORY), "pathPrefix": ""}
    if registry.pull_secret:
        aistor["imagePullSecrets"] = registry.pull_secrets
    return {"repositories": {"aistor": aistor}}


def _aistor_objectstore(registry: Registry) -> dict[str, Any]:
    """The ObjectStore's pull Secret. Its images are the operator's (`_aistor_operator`): the program sets no
    `objectStore.image`, so the MinIO version moves with the operator chart."""
    return {"objectStore": {"imagePullSecret": {"name": registry.pull_secret}}} if registry.pull_secret else {}


VALUES: dict[str, Any] = {
    "cloudnative-pg": _cloudnative_pg,
    "polaris": _polaris,
    "aistor-operator": _aistor_operator,
    "aistor-objectstore": _aistor_objectstore,
}
