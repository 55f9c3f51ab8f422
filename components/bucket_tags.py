"""BucketTags: the S3 tag set of a bucket, which the minio provider does not manage (StorageCluster).

A small Pulumi dynamic resource over the MinIO Python SDK's bucket tagging calls. It owns the whole
tag set of its bucket. Credentials are read when it runs, from the same environment variables as the
minio provider (MINIO_USER, MINIO_PASSWORD); they never enter the resource's state.
"""

from __future__ import annotations

import os
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult


def _client(props: dict[str, Any]) -> Any:
    from minio import Minio  # imported where it runs: the engine's dynamic provider process

    user, password = os.environ.get("MINIO_USER"), os.environ.get("MINIO_PASSWORD")
    if not user or not password:
        raise RuntimeError("set MINIO_USER and MINIO_PASSWORD (the object store admin credentials) to manage bucket tags")
    return Minio(props["server"], access_key=user, secret_key=password, secure=bool(props["ssl"]), region=props["region"])


def _apply(props: dict[str, Any]) -> None:
    from minio.commonconfig import Tags

    tags = Tags.new_bucket_tags()
    tags.update(props["tags"])
    _client(props).set_bucket_tags(props["bucket"], tags)


class _BucketTagsProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        _apply(props)
        return CreateResult(id_=props["bucket"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [key for key in ("bucket", "tags", "server", "ssl", "region") if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=["bucket"] if "bucket" in changed else [], delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        _apply(news)
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        _client(props).delete_bucket_tags(props["bucket"])


class BucketTags(pulumi.dynamic.Resource, module="storage", name="BucketTags"):
    """The complete tag set of one bucket."""

    bucket: pulumi.Output[str]
    tags: pulumi.Output[dict[str, str]]

    def __init__(
        self,
        name: str,
        bucket: pulumi.Input[str],
        tags: dict[str, str],
        server: str,
        ssl: bool,
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {"bucket": bucket, "tags": dict(tags), "server": server, "ssl": ssl, "region": region}
        super().__init__(_BucketTagsProvider(), name, props, opts)
