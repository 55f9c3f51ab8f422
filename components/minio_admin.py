"""What the program does on the object store beyond the minio provider (StorageCluster, SiteFederation).

Two small Pulumi dynamic resources over the MinIO Python SDK: `BucketTags`, the tag set of a bucket
(pulumi-minio 0.17.1 manages none), and `MinioNamesFree`, a check that the MinIO users, policies and
buckets the program is about to create do not exist already: the minio provider creates a user or
a policy over an existing one silently (resetting its secret), so an existing one is refused with the
way to adopt it. Both reach the admin endpoint with the credentials of the minio provider's
environment (MINIO_USER, MINIO_PASSWORD), which never enter the resources' state, and trust the
site's CA bundle when one is configured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider, UpdateResult


@dataclass(frozen=True)
class AdminEndpoint:
    """Where the object store's admin API is and how to trust it (no credentials: they come from the environment)."""

    server: str
    ssl: bool
    region: str
    ca_bundle: str | None = None
    """PEM certificates of the site's CA, or None for the system's trust store."""

    def props(self) -> dict[str, Any]:
        return asdict(self)


def _credentials() -> tuple[str, str]:
    user, password = os.environ.get("MINIO_USER"), os.environ.get("MINIO_PASSWORD")
    if not user or not password:
        raise RuntimeError("set MINIO_USER and MINIO_PASSWORD (the object store's admin credentials, as for the minio provider)")
    return user, password


def _http_client(props: dict[str, Any]) -> Any:
    """A urllib3 pool that verifies the server against the site's CA bundle, or None for the SDK's default (certifi).

    Timeouts and retries as the SDK's own pool has them, so that an unreachable endpoint fails the step.
    """
    if not props.get("ca_bundle"):
        return None
    import urllib3

    return urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=props["ca_bundle"], maxsize=10,
                               timeout=urllib3.Timeout(connect=300, read=300),
                               retries=urllib3.Retry(total=5, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]))


def _client(props: dict[str, Any]) -> Any:
    from minio import Minio  # imported where it runs: the engine's dynamic provider process

    user, password = _credentials()
    return Minio(props["server"], access_key=user, secret_key=password, secure=bool(props["ssl"]), region=props["region"],
                 http_client=_http_client(props))


def _admin(props: dict[str, Any]) -> Any:
    from minio.credentials import StaticProvider
    from minio.minioadmin import MinioAdmin

    user, password = _credentials()
    return MinioAdmin(endpoint=props["server"], credentials=StaticProvider(user, password), region=props["region"],
                      secure=bool(props["ssl"]), http_client=_http_client(props))


# --------------------------------------------------------------------------------------------------
# Bucket tags.


def _apply_tags(props: dict[str, Any]) -> None:
    from minio.commonconfig import Tags

    tags = Tags.new_bucket_tags()
    tags.update(props["tags"])
    _client(props).set_bucket_tags(props["bucket"], tags)


class _BucketTagsProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        _apply_tags(props)
        return CreateResult(id_=props["bucket"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [key for key in ("bucket", "tags", "server", "ssl", "region", "ca_bundle") if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=["bucket"] if "bucket" in changed else [], delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        _apply_tags(news)
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        _client(props).delete_bucket_tags(props["bucket"])


class BucketTags(pulumi.dynamic.Resource, module="storage", name="BucketTags"):
    """The complete tag set of one bucket."""

    bucket: pulumi.Output[str]
    tags: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, bucket: pulumi.Input[str], tags: dict[str, str], endpoint: AdminEndpoint,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(_BucketTagsProvider(), name, {"bucket": bucket, "tags": dict(tags), **endpoint.props()}, opts)


# --------------------------------------------------------------------------------------------------
# Names that must be free.

ADOPT_HINT = {
    "user": "adopt.minio_users", "policy": "adopt.minio_policies", "bucket": "adopt.buckets",
}


def _names(props: dict[str, Any], key: str, field: str) -> set[str]:
    return set((props.get(key) or {}).get(field) or [])


def taken_names(props: dict[str, Any], olds: dict[str, Any], exists: Callable[[str, str], bool]) -> list[CheckFailure]:
    """The names about to be created (new to this check, not adopted) that exist already, each as a failure saying
    how to adopt it. A name the stack has had before (created, or adopted and imported) is never asked about again."""
    failures = []
    for field, kind in (("users", "user"), ("policies", "policy"), ("buckets", "bucket")):
        known = _names(olds, "names", field) | _names(props, "adopted", field)
        for name in sorted(_names(props, "names", field) - known):
            if exists(kind, name):
                failures.append(CheckFailure(field, (
                    f"MinIO {kind} {name!r} exists already: creating it would take it over"
                    + (" and reset its secret" if kind == "user" else "")
                    + f"; list it under {ADOPT_HINT[kind]} to import it, or remove it from the object store"
                )))
    return failures


def _exists(props: dict[str, Any]) -> Callable[[str, str], bool]:
    """Whether a user, policy or bucket of that name exists on the object store (read only: the bucket list,
    admin:GetUser, admin:GetPolicy)."""
    from minio.error import MinioAdminException

    buckets: list[set[str]] = []

    def exists(kind: str, name: str) -> bool:
        if kind == "bucket":
            if not buckets:
                buckets.append({b.name for b in _client(props).list_buckets()})
            return name in buckets[0]
        try:
            (_admin(props).user_info if kind == "user" else _admin(props).policy_info)(name)
        except MinioAdminException as exc:
            if exc._code == "404":  # noqa: SLF001 (the SDK keeps the status private)
                return False
            raise
        return True

    return exists


class _NamesFreeProvider(ResourceProvider):
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        # Runs in preview too: an existing name is refused before anything is created.
        return CheckResult(news, taken_names(news, olds, _exists(news)))

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="names", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=json.dumps(olds, sort_keys=True) != json.dumps(news, sort_keys=True))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)


class MinioNamesFree(pulumi.dynamic.Resource, module="storage", name="MinioNamesFree"):
    """Refuses (at preview) MinIO users, policies and buckets that the program would create over existing ones.

    `names` are every user, policy and bucket of its component; `adopted` those among them that are declared
    existing (imported, so never asked about).
    """

    def __init__(self, name: str, names: dict[str, list[str]], adopted: dict[str, list[str]], endpoint: AdminEndpoint,
                 opts: pulumi.ResourceOptions | None = None):
        props = {"names": {k: sorted(v) for k, v in names.items()}, "adopted": {k: sorted(v) for k, v in adopted.items()},
                 **endpoint.props()}
        super().__init__(_NamesFreeProvider(), name, props, opts)


def guard(names_free: MinioNamesFree | None) -> list[pulumi.Resource]:
    """What a MinIO user, policy or bucket waits for: the name check, where there is one."""
    return [names_free] if names_free is not None else []
