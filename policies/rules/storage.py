"""Rules on data: least-privilege bucket access, nothing lost, versioned artifacts, residency (one catalog authority: rules/catalog.py).

Residency: gold leaves the site; models leave it only to the consumers the stack's config names
(`federation.consumers.<site>.replicate_models`, a warm standby for serving), read through rules/_stack.py; nothing else.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    HELM_RELEASE,
    UNKNOWN,
    chart_name,
    containers,
    field,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    plain,
    pod_spec,
    provider_name,
    undecided,
    unknown_paths,
)
from rules._policy import resource_rule, stack_rule
from rules._stack import model_replication

IAM_POLICY = "minio:index/iamPolicy:IamPolicy"
BUCKET = "minio:index/s3Bucket:S3Bucket"
VERSIONING = "minio:index/s3BucketVersioning:S3BucketVersioning"
BUCKET_TAGS = "pulumi-python:dynamic/storage:BucketTags"
VERSIONED_CLASSES = {"models", "checkpoints", "warehouse"}
CLASS_TAG, RESIDENCY_TAG = "fab.internal/class", "fab.internal/residency"
MODELS = "models"
"""The class that leaves the site only to the consumers the stack's config names."""
MODEL_REPLICAS = "replicas"
"""The folder of the models bucket holding the peers' models this site keeps (components/config/names.py MODEL_REPLICAS):
theirs, never this site's to send."""
REPLICATES_TO_LABEL = "fab.internal/replicates-to"
"""The consumer a copy job copies to (components/federation.py)."""


@resource_rule("fab-bucket-least-privilege", "No storage policy grants s3:* or a wildcard bucket.",
               place=250,
               docs="no storage policy grants `s3:*` or a wildcard bucket")
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


STATEFUL_TYPES = {BUCKET: "S3Bucket", "keycloak:index/realm:Realm": "Realm"}
OBJECT_STORE_CHART = "aistor-objectstore"


def stateful_kind(resource_type: str, props: Any) -> str | None:
    """What a resource keeps that must survive the stack (a bucket, a realm, the object store, a PVC, a Postgres cluster),
    by kind, or None. Shared with the render test that checks `retain_on_delete`, which no policy can see."""
    if resource_type in STATEFUL_TYPES:
        return STATEFUL_TYPES[resource_type]
    if resource_type == HELM_RELEASE and chart_name(plain(props).get("chart")) in (OBJECT_STORE_CHART, UNKNOWN):
        return "object store"
    obj = k8s_object(resource_type, props)
    if obj is not None and (obj["kind"] == "PersistentVolumeClaim" or (obj["kind"] == "Cluster" and obj["apiVersion"].startswith("postgresql.cnpg.io/"))):
        return obj["kind"]
    return None


@resource_rule("fab-stateful-protected",
               "Buckets, Postgres clusters, PVCs, the object store and a created realm are protected.",
               place=260,
               docs="buckets, Postgres clusters, PVCs, the object store and a created realm are protected (`retain_on_delete`: "
                    "below)")
def stateful_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a Helm release whose chart is unknown is held to the object store's rule (fails closed).

    `retain_on_delete` is not in the Analyzer request of the pinned pulumi (AnalyzerResourceOptions), so no policy can
    check it: tests/policies/test_stateful.py checks it on the render."""
    kind = stateful_kind(args.resource_type, args.props)
    if kind is not None and not args.opts.protect:
        on = f" on {provider_name(args)}" if provider_name(args) else ""
        report(f"{kind} {args.name}{on} holds data but has protect: false; resources that hold data are protected "
               "(and retained on delete)")


def _bucket_classes(resources: list[Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in resources:
        if r.resource_type == BUCKET_TAGS:
            props = plain(r.props)
            out[props.get("bucket")] = props.get("tags") if isinstance(props.get("tags"), dict) else {}
    return out


@stack_rule("fab-versioned-artifacts", "Model, checkpoint and warehouse buckets are versioned.",
            place=270,
            docs="model, checkpoint and warehouse buckets are versioned")
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


@stack_rule("fab-residency",
            "Only gold-class buckets, and the models bucket when the stack replicates models to a consumer, are marked replicable.",
            place=280,
            docs="only gold-class buckets are marked replicable or replicate to another site, and the models bucket as "
                 "replicable only while the stack's config copies models to a consumer "
                 "(`federation.consumers.<site>.replicate_models`)")
def residency(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: tags that are unknown fail closed."""
    models = model_replication()
    for resource in args.resources:
        if resource.resource_type != BUCKET_TAGS:
            continue
        props = plain(resource.props)
        if problem := undecided(f"BucketTags {resource.name}", {"bucket": props.get("bucket"), "tags": props.get("tags")}):
            report(problem, resource.urn)
            continue
        tags = props.get("tags") or {}
        if tags.get(RESIDENCY_TAG) == "site-local" or tags.get(CLASS_TAG) == "gold":
            continue
        marked = f"bucket {props.get('bucket')} of class {tags.get(CLASS_TAG)} is marked {tags.get(RESIDENCY_TAG)!r}"
        if tags.get(CLASS_TAG) != MODELS:
            report(f"{marked}; only gold may leave the site", resource.urn)
        elif tags.get(RESIDENCY_TAG) != "replicable" or not models.consumers:
            report(f"{marked}; only gold may leave the site, and models as 'replicable' only while the stack copies them "
                   f"to a consumer with {models.describe()}", resource.urn)


MC_COPY_COMMANDS = {"cp", "mirror", "mv"}
"""MinIO client commands that copy objects from a source to a target."""
MC_VALUE_FLAGS = {
    "attr", "C", "checksum", "config-dir", "custom-header", "enc-c", "enc-kms", "enc-s3", "encrypt", "encrypt-key", "exclude",
    "exclude-bucket", "exclude-storageclass", "H", "legal-hold", "limit-download", "limit-upload", "max-workers",
    "monitoring-address", "newer-than", "older-than", "region", "resolve", "retention-duration", "retention-mode", "rewind",
    "sc", "storage-class", "tags", "version-id", "vid",
}
"""Flags of `mc` and its copy commands that take a value as the next word (`--older-than 7`): that word is no operand."""
SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
"""A Kubernetes `$(VAR)` reference in a container's command or arguments, which the kubelet expands from its env."""


def _is_mc_image(image: Any) -> bool:
    """The MinIO client image, from any registry: a repository named `mc`."""
    if not isinstance(image, str):
        return False
    repository = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return repository.split(":", 1)[0] == "mc"


def _script_calls(script: str) -> list[list[str]]:
    """The words of each `mc` call of a shell script, one call per command between `;`, `&&`, `||`, `|` or a line end."""
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in [*lexer, ";"]:
            if set(token) <= set(";&|()"):
                if current and current[0].rsplit("/", 1)[-1] == "mc":
                    calls.append(current[1:])
                current = []
            else:
                current.append(token)
    return calls


def _mc_calls(container: dict[str, Any]) -> list[list[str]]:
    """The words of each `mc` call a container makes: its args under the client image's entrypoint, an `mc` command, or
    the `mc` calls of a `sh -c` script."""
    command = [str(w) for w in container.get("command") or []]
    words = [*command, *(str(w) for w in container.get("args") or [])]
    if not command:
        return [words] if _is_mc_image(container.get("image")) and words else []
    program = words[0].rsplit("/", 1)[-1]
    if program == "mc":
        return [words[1:]]
    if program in SHELLS and "-c" in words[1:-1]:
        return _script_calls(words[words.index("-c", 1) + 1])
    return []


def _copy_operands(call: list[str]) -> tuple[list[str], str] | None:
    """(sources, target) of an `mc cp|mirror|mv` call, None for any other call."""
    positional, skip = [], False
    for word in call:
        if skip:
            skip = False
        elif word.startswith("-") and len(word) > 1:
            name = word.lstrip("-")
            skip = "=" not in name and name in MC_VALUE_FLAGS
        else:
            positional.append(word)
    if len(positional) < 3 or positional[0] not in MC_COPY_COMMANDS:
        return None
    return positional[1:-1], positional[-1]


def _is_local_path(operand: str) -> bool:
    return operand.startswith(("/", "./", "../", "~")) or operand in (".", "..")


def _alias_and_bucket(operand: str, env: dict[str, Any]) -> tuple[Any, Any]:
    """An `alias/bucket/...` operand's alias and bucket, with `$(VAR)` references expanded from the container's literal
    environment (as the kubelet does); UNKNOWN for a part that still holds a reference (to a Secret, a ConfigMap, a shell
    variable or a value unknown during preview); "" for a bucket that is not named (every bucket of the alias)."""
    expanded = VARIABLE.sub(lambda m: env[m.group(1)] if isinstance(env.get(m.group(1)), str) else m.group(0), operand)
    alias, _, path = expanded.partition("/")
    bucket = path.split("/", 1)[0]
    return (UNKNOWN if "$" in alias else alias), (UNKNOWN if "$" in alias or "$" in bucket else bucket)


def _bucket_copies(container: dict[str, Any]) -> list[tuple[str, Any, str, list[str]]]:
    """(source as written, its bucket, target as written, the patterns it excludes) of each copy a container makes from one
    object store to another (different aliases); copies to or from a local path (a cache, a download) are not between
    stores."""
    env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
    copies = []
    for call in _mc_calls(container):
        operands = _copy_operands(call)
        if operands is None or _is_local_path(operands[1]):
            continue
        sources, target = operands
        target_alias, _ = _alias_and_bucket(target, env)
        for source in sources:
            if _is_local_path(source):
                continue
            alias, bucket = _alias_and_bucket(source, env)
            if alias is not UNKNOWN and alias == target_alias:
                continue
            copies.append((source, bucket, target, _excludes(call)))
    return copies


def _copy_deciding(pod: Any) -> Any:
    """What decides whether a pod copies buckets: each container's command and arguments, and its image where it has no
    command (the MinIO client image's entrypoint is `mc`)."""
    if pod is UNKNOWN:
        return UNKNOWN
    out: dict[str, Any] = {}
    for key in ("initContainers", "containers"):
        items = pod.get(key)
        out[key] = items if not isinstance(items, list) else [
            c if not isinstance(c, dict) else {k: c.get(k) for k in ("command", "args", *(() if c.get("command") else ("image",)))}
            for c in items
        ]
    return out


def _excludes(call: list[str]) -> list[str]:
    """The patterns an `mc` call leaves out (`--exclude P`, `--exclude=P`)."""
    out = []
    for i, word in enumerate(call):
        name, equals, value = word.lstrip("-").partition("=")
        if word.startswith("-") and name == "exclude":
            out += [value] if equals else call[i + 1:i + 2]
    return out


def _models_refusal(obj: dict[str, Any], source: str, bucket: str, excludes: list[str], env: dict[str, Any]) -> str | None:
    """Why a copy of the models bucket out of the site is refused (the end of the message), or None: it runs in the copy job
    of a consumer the stack replicates models to (`fab.internal/replicates-to`), and sends this site's own models only,
    never the peers' models it keeps under `replicas/` (a whole-bucket copy leaves that folder out: `--exclude replicas/*`)."""
    models, consumer = model_replication(), label(obj, REPLICATES_TO_LABEL)
    what = f"bucket {bucket} (class {MODELS})"
    if consumer is UNKNOWN:
        return (f", {what}, to a consumer that can't be known during preview (its {REPLICATES_TO_LABEL} label is unknown), "
                "so this rule fails closed")
    if not models.allows(consumer):
        to = f"to consumer {consumer}" if consumer else f"in a workload labelled for no consumer ({REPLICATES_TO_LABEL} is unset)"
        return f", {what}, {to}; models leave the site only in the copy job of a consumer with {models.describe()}"
    expanded = VARIABLE.sub(lambda m: env[m.group(1)] if isinstance(env.get(m.group(1)), str) else m.group(0), source)
    path = expanded.partition("/")[2].partition("/")[2].strip("/")
    if path.split("/", 1)[0] == MODEL_REPLICAS:
        return f", the peers' models this site keeps under {MODEL_REPLICAS}/; only this site's own models leave it"
    if not path and f"{MODEL_REPLICAS}/*" not in excludes:
        return (f", the whole {what} without --exclude {MODEL_REPLICAS}/*: the peers' models this site keeps under "
                f"{MODEL_REPLICAS}/ would leave with it; only this site's own models leave it")
    return None


@stack_rule("fab-replication-gold-only",
            "Only this site's gold buckets, and its own models to the consumers the stack replicates models to, are copied to "
            "another object store: bucket replication and copy jobs (mc cp, mirror, mv) alike.",
            place=290,
            docs="whatever copies a bucket to another object store copies only this site's gold buckets: bucket replication, and "
                 "every `mc cp`, `mirror` or `mv` between two aliases in any workload (the gold copy job), its source read from "
                 "the job's arguments and literal environment and checked against the buckets' class tags; the models bucket "
                 "only in the copy job of a consumer the stack's config copies models to (the job's `fab.internal/replicates-to` "
                 "label), never with the peers' models the site keeps under `replicas/` (a whole-bucket copy needs `--exclude "
                 "replicas/*`), and never by bucket replication")
def replication_gold_only(args: StackValidationArgs, report: ReportViolation) -> None:
    """A copy of the models bucket passes only in a workload labelled `fab.internal/replicates-to: <consumer>` for a
    consumer with `replicate_models` in the stack's config, and never carries the peers' models kept under `replicas/`.

    Unknown values: a workload whose containers' commands, arguments or images are unknown, a copy whose source bucket
    depends on a value the job does not hold literally, a replicated bucket name, bucket tags or the consumer label of a
    models copy that are unknown: all fail closed."""
    undecidable_tags = False
    for resource in args.resources:
        if resource.resource_type == BUCKET_TAGS:
            props = plain(resource.props)
            undecidable_tags |= bool(unknown_paths({"bucket": props.get("bucket"), "tags": props.get("tags")}))
    classes = _bucket_classes(args.resources)

    def refusal(bucket: str, models: bool) -> str | None:
        """Why copying `bucket` out is refused, or None for a gold bucket of this site, and for its models bucket where
        `models` (a copy job, which `_models_refusal` then judges)."""
        if bucket in classes:
            data_class = classes[bucket].get(CLASS_TAG)
            return None if data_class == "gold" or (models and data_class == MODELS) else f"bucket {bucket} (class {data_class})"
        if undecidable_tags:
            return f"bucket {bucket}, whose class can't be known during preview (its tags are unknown)"
        return f"bucket {bucket} (not a bucket of this site, so of no class)"

    for resource in args.resources:
        if "replication" in resource.resource_type.lower():
            bucket = plain(resource.props).get("bucket")
            if problem := undecided(f"{resource.resource_type.rsplit(':', 1)[-1]} {resource.name}", bucket, ".bucket"):
                report(problem, resource.urn)
            # Bucket replication names no consumer: models leave only through a consumer's copy job.
            elif reason := refusal(str(bucket), models=False):
                report(f"{resource.name} replicates {reason} to another store; only gold buckets leave the site by bucket "
                       "replication (models only by the copy job of a consumer the stack replicates them to)", resource.urn)
    for resource, obj in objects(args.resources):
        pod = pod_spec(obj)
        if pod is None:
            continue
        where = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)} on {provider_name(resource)}"
        if problem := undecided(where, _copy_deciding(pod), ".pod"):
            report(problem, resource.urn)
            continue
        for container in containers(pod):
            env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
            for source, bucket, target, excludes in _bucket_copies(container):
                copy = f"container {container.get('name')} of {where} copies {source} to {target}"
                if bucket is UNKNOWN:
                    report(f"{copy}: its bucket can't be decided from the job (a variable without a literal value), so this "
                           "rule fails closed; name the gold bucket in the job's arguments", resource.urn)
                elif bucket == "":
                    report(f"{copy}, every bucket of that store; only gold buckets, named one by one, leave the site", resource.urn)
                elif reason := refusal(bucket, models=True):
                    report(f"{copy}, {reason}; only gold buckets leave the site, and models to a consumer the stack "
                           "replicates them to", resource.urn)
                elif classes.get(bucket, {}).get(CLASS_TAG) == MODELS and (why := _models_refusal(obj, source, bucket, excludes, env)):
                    report(f"{copy}{why}", resource.urn)
