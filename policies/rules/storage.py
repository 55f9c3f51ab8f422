"""Rules on data: least-privilege bucket access, nothing lost, versioned artifacts, residency (one catalog authority: rules/catalog.py)."""

from __future__ import annotations

import json
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import HELM_RELEASE, UNKNOWN, field, k8s_object, plain, undecided
from rules._policy import resource_rule, stack_rule

IAM_POLICY = "minio:index/iamPolicy:IamPolicy"
BUCKET = "minio:index/s3Bucket:S3Bucket"
VERSIONING = "minio:index/s3BucketVersioning:S3BucketVersioning"
BUCKET_TAGS = "pulumi-python:dynamic/storage:BucketTags"
VERSIONED_CLASSES = {"models", "checkpoints", "warehouse"}
CLASS_TAG, RESIDENCY_TAG = "fab.internal/class", "fab.internal/residency"


@resource_rule("fab-bucket-least-privilege", "No storage policy grants s3:* or a wildcard bucket.")
def bucket_least_privilege(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: an unknown policy document fails closed."""
    if args.resource_type != IAM_POLICY:
        return
    props = plain(args.props)
    if problem := undecided(f"MinIO policy {args.name}", props.get("policy"), ".policy"):
        report(problem)
        return
    document = json.loads(props.get("policy") or "{}")
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = statement.get("Resource", [])
        resources = [resources] if isinstance(resources, str) else resources
        for action in actions:
            if action in ("*", "s3:*"):
                report(f"policy {props.get('name')} grants {action!r}; grant the actions the engine needs")
        for arn in resources:
            bucket = arn.removeprefix("arn:aws:s3:::").split("/", 1)[0]
            if "*" in bucket:
                report(f"policy {props.get('name')} grants the wildcard resource {arn!r}; name the buckets")


def _stateful_kind(args: ResourceValidationArgs) -> str | None:
    if args.resource_type in (BUCKET, "keycloak:index/realm:Realm"):
        return args.resource_type.rsplit(":", 1)[-1]
    if args.resource_type == HELM_RELEASE and plain(args.props).get("chart") in ("aistor-objectstore", UNKNOWN):
        return "object store"
    obj = k8s_object(args.resource_type, args.props)
    if obj is not None and (obj["kind"] == "PersistentVolumeClaim" or (obj["kind"] == "Cluster" and obj["apiVersion"].startswith("postgresql.cnpg.io/"))):
        return obj["kind"]
    return None


@resource_rule("fab-stateful-protected",
               "Buckets, Postgres clusters, PVCs and the object store are protected or retained on delete.")
def stateful_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a Helm release whose chart is unknown is held to the object store's rule (fails closed)."""
    kind = _stateful_kind(args)
    if kind is not None and not args.opts.protect:
        report(f"{kind} {args.name} holds data and must be protected (and retained on delete)")


def _bucket_classes(resources: list[Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in resources:
        if r.resource_type == BUCKET_TAGS:
            props = plain(r.props)
            out[props.get("bucket")] = props.get("tags") if isinstance(props.get("tags"), dict) else {}
    return out


@stack_rule("fab-versioned-artifacts", "Model, checkpoint and warehouse buckets are versioned.")
def versioned_artifacts(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a bucket, its tags or its versioning with an unknown name or setting fails closed."""
    undecidable = set()
    for resource in args.resources:
        if resource.resource_type in (BUCKET, BUCKET_TAGS, VERSIONING):
            props = plain(resource.props)
            deciding = {key: props.get(key) for key in ("bucket", "tags", "versioningConfiguration")}
            if problem := undecided(f"{resource.resource_type.rsplit(':', 1)[-1]} {resource.name}", deciding):
                report(problem, resource.urn)
                undecidable.add(resource.urn)
    known = [r for r in args.resources if r.urn not in undecidable]
    classes = _bucket_classes(known)
    versioned = {
        plain(r.props).get("bucket") for r in known
        if r.resource_type == VERSIONING and field(plain(r.props), "versioningConfiguration", "status") == "Enabled"
    }
    for resource in known:
        if resource.resource_type != BUCKET:
            continue
        bucket = plain(resource.props).get("bucket")
        data_class = classes.get(bucket, {}).get(CLASS_TAG)
        if data_class in VERSIONED_CLASSES and bucket not in versioned:
            report(f"bucket {bucket} holds {data_class} and must be versioned", resource.urn)


@stack_rule("fab-residency", "Only gold-class buckets replicate to another site.")
def residency(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: tags or a replicated bucket name that are unknown fail closed."""
    classes = _bucket_classes(args.resources)
    for resource in args.resources:
        if resource.resource_type == BUCKET_TAGS or "replication" in resource.resource_type.lower():
            props = plain(resource.props)
            if problem := undecided(f"{resource.resource_type.rsplit(':', 1)[-1]} {resource.name}",
                                    {"bucket": props.get("bucket"), "tags": props.get("tags")}):
                report(problem, resource.urn)
                continue
        if resource.resource_type == BUCKET_TAGS:
            tags = plain(resource.props).get("tags") or {}
            if tags.get(RESIDENCY_TAG) != "site-local" and tags.get(CLASS_TAG) != "gold":
                report(f"bucket {resource.props.get('bucket')} of class {tags.get(CLASS_TAG)} is marked "
                       f"{tags.get(RESIDENCY_TAG)!r}; only gold may leave the site", resource.urn)
        if "replication" in resource.resource_type.lower():
            bucket = plain(resource.props).get("bucket")
            if classes.get(bucket, {}).get(CLASS_TAG) != "gold":
                report(f"{resource.name} replicates bucket {bucket}, which is not gold; raw and detailed data stay in their site",
                       resource.urn)
