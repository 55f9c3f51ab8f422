"""Rules on who holds and reads data credentials: each engine reads only its own, Airflow's submitter reads none, and each
training team holds and reaches only its own.

A credential Secret is one StorageCluster delivers, `s3-<engine>` or `polaris-<engine>`, marked by the label ENGINE_LABEL
with its engine (training's also with TEAM_LABEL, the team). What reads one is the engine the reader declares: its own
ENGINE_LABEL, else its namespace's (a Helm release's is always its namespace's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import (
    HELM_RELEASE,
    UNKNOWN,
    field,
    label,
    name_of,
    namespace_of,
    objects,
    plain,
    pod_fields,
    pod_spec,
    provider_name,
    skip_unknown,
    undecided,
    unknown_paths,
)
from rules._policy import stack_rule
from rules.network import ENGINE_LABEL
from rules.storage import BUCKET_TAGS, CLASS_TAG, IAM_POLICY

TEAM_LABEL = "fab.internal/team"
NOT_READ = {"metadata", "apiVersion", "kind"}
"""Parts of an object that name it rather than what it reads."""


def _credential_secrets(resources: list[Any], report: ReportViolation) -> tuple[dict[tuple[str, str, str], str], dict[str, set[str]]]:
    """The credential Secrets: (cluster, namespace, name) -> engine, and name -> the engines of the Secrets of that name.

    Unknown values: a Secret whose name, namespace or engine label is unknown fails closed (it may be a credential)."""
    where: dict[tuple[str, str, str], str] = {}
    by_name: dict[str, set[str]] = {}
    for resource, obj in objects(resources):
        if obj["kind"] != "Secret":
            continue
        deciding = {"name": field(obj, "metadata", "name"), "namespace": field(obj, "metadata", "namespace"),
                    "engine": label(obj, ENGINE_LABEL)}
        if problem := undecided(f"Secret {namespace_of(obj)}/{name_of(obj)} on {provider_name(resource)}", deciding):
            report(problem, resource.urn)
            continue
        engine = label(obj, ENGINE_LABEL)
        if isinstance(engine, str):
            where[provider_name(resource), namespace_of(obj), name_of(obj)] = engine
            by_name.setdefault(name_of(obj), set()).add(engine)
    return where, by_name


def _strings(value: Any) -> Iterator[str]:
    """Every string in a value (unknowns skipped: a Secret's name is written in the program, never another resource's output)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


REFERENCE_PATH = re.compile(r"(?i)secret|(\.(env|envFrom|volumes|containers|initContainers|valueFrom|projected|sources)(\[\d+\])?)$")
"""Where an unknown part of a pod template could hide a Secret reference: a whole list of env, envFrom or volumes, an
entry of one, or anything under a key naming a Secret (secretKeyRef, secretRef, secret.secretName)."""


def _unknown_references(obj: dict[str, Any]) -> list[str]:
    """Paths of a workload's pod template where an unknown value could be a Secret reference."""
    pod = pod_spec(obj)
    if pod is None:
        return []
    if pod is UNKNOWN:
        return [".pod"]
    deciding = pod_fields(pod, ("volumes",), ("env", "envFrom"))
    return [p for p in unknown_paths(deciding, ".pod") if REFERENCE_PATH.search(p)]


def _fails_closed(what: str, where: str) -> str:
    """The fail-closed violation of this module's rules: `where` (paths, or a label) can't be known during preview."""
    return undecided(what, UNKNOWN, where) or ""


class _Reader:
    """Something that makes a pod or a controller read Secrets of its namespace: a Kubernetes object or a Helm release."""

    def __init__(self, what: str, cluster: str, namespace: str, own: Any, strings: list[str]):
        self.what, self.cluster, self.namespace, self.own, self.strings = what, cluster, namespace, own, strings


def _readers(resources: list[Any], report: ReportViolation) -> Iterator[_Reader]:
    for resource in resources:
        cluster = provider_name(resource) or "an unknown cluster"
        if resource.resource_type == HELM_RELEASE:
            props = plain(resource.props)
            namespace = props.get("namespace")
            if problem := undecided(f"Helm release {resource.name} on {cluster}", namespace, ".namespace"):
                report(problem, resource.urn)
                continue
            strings = list(_strings(skip_unknown(props.get("values"))))
            yield _Reader(f"Helm release {namespace}/{props.get('name')}", cluster, str(namespace or ""), None, strings)
    for resource, obj in objects(resources):
        if obj["kind"] in ("Secret", "Namespace"):
            continue
        what = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}".replace(" /", " ")
        if paths := _unknown_references(obj):
            report(_fails_closed(f"{what} on {provider_name(resource)}", ", ".join(paths)), resource.urn)
            continue
        body = {k: v for k, v in obj.items() if k not in NOT_READ}
        own = label(obj, ENGINE_LABEL)
        yield _Reader(what, provider_name(resource) or "an unknown cluster", namespace_of(obj), own,
                      list(_strings(skip_unknown(body))))


def _namespace_labels(resources: list[Any], key: str) -> dict[tuple[str, str], Any]:
    """(cluster, namespace) -> the value of a label on that Namespace (None without it, UNKNOWN when its labels are unknown)."""
    return {(provider_name(r), name_of(obj)): label(obj, key) for r, obj in objects(resources) if obj["kind"] == "Namespace"}


@stack_rule("fab-engine-reads-own-credentials",
            "Workloads, custom resources and Helm releases read only the credential Secrets (s3-<engine>, polaris-<engine>) of "
            "the engine they run as.",
            place=550,
            docs="a workload, custom resource or Helm release reads (env, envFrom, volumes, any value naming a Secret such as "
                 "`existingSecret`) only the credential Secrets (`s3-<engine>`, `polaris-<engine>`, labelled "
                 "`fab.internal/engine`) of the engine it runs as: its own `fab.internal/engine` label, else its namespace's")
def engine_reads_own_credentials(args: StackValidationArgs, report: ReportViolation) -> None:
    """A reader references a Secret by name anywhere in its spec or values (env, envFrom, volumes, `existingSecret`-style
    keys, a custom resource's credential fields): every string is compared with the names of the credential Secrets of its
    namespace, and of those delivered anywhere (a reference to another engine's Secret is refused even where that Secret is
    missing). It runs as the engine of its own ENGINE_LABEL, else of its namespace's.

    Unknown values: a Secret whose identity is unknown, a release whose namespace is unknown, a pod template whose Secret
    references may be unknown, or a reader of a credential whose engine label (or its namespace's) is unknown, fails closed.
    Other unknown strings are skipped: a Secret's name is written in the program."""
    where, by_name = _credential_secrets(args.resources, report)
    namespaces = _namespace_labels(args.resources, ENGINE_LABEL)
    for reader in _readers(args.resources, report):
        seen = set()
        for text in reader.strings:
            local = where.get((reader.cluster, reader.namespace, text))
            engines = {local} if local else by_name.get(text, set())
            if not engines or text in seen:
                continue
            seen.add(text)
            own, source = reader.own, f"its own {ENGINE_LABEL} label"
            if own is None:
                own, source = namespaces.get((reader.cluster, reader.namespace)), f"the {ENGINE_LABEL} label of namespace {reader.namespace}"
            secret = f"Secret {reader.namespace}/{text}"
            if own is UNKNOWN:
                report(_fails_closed(f"{reader.what} on {reader.cluster} (reads {secret})", source))
            elif own is None:
                report(f"{reader.what} on {reader.cluster} reads {secret}, {' and '.join(sorted(engines))}'s credentials, but "
                       f"neither it nor namespace {reader.namespace} carries a {ENGINE_LABEL} label; label it with the engine it "
                       "runs as, which may read only its own credential Secrets")
            elif own not in engines:
                report(f"{reader.what} on {reader.cluster} reads {secret}, {' and '.join(sorted(engines))}'s credentials, but "
                       f"runs as {own} (by {source}); an engine reads only its own credential Secrets (s3-{own}, polaris-{own})")


SUBMITTER = "fab-access/airflow-submitter"
"""Airflow's GPU-job submitter, `<namespace>/<name>` of its ServiceAccount on each GPU cluster (TrainingPool's)."""
SUBMITTER_SETTING = {"submitter": {"type": "string", "default": SUBMITTER,
                                   "description": "namespace/name of the ServiceAccount Airflow submits GPU jobs as"}}
BINDING_KINDS = {"RoleBinding", "ClusterRoleBinding"}
READ_VERBS = {"get", "list", "watch", "*"}


class _BoundRole:
    """A Role or ClusterRole bound to the submitter on a cluster, or the reference to one the stack does not define."""

    def __init__(self, cluster: str, kind: str, namespace: str, name: str, obj: dict[str, Any] | None, urn: str):
        self.cluster, self.kind, self.namespace, self.name, self.obj, self.urn = cluster, kind, namespace, name, obj, urn

    @property
    def what(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name} on {self.cluster}"


def _submitter_roles(args: StackValidationArgs, report: ReportViolation) -> tuple[str, list[_BoundRole]]:
    """The submitter (`namespace/name`) and every role bound to it, once per cluster and role.

    Unknown values: a binding whose subjects or role reference are unknown fails closed (it may bind the submitter), and so
    does a bound role whose rules or aggregation are unknown."""
    submitter = str(args.get_config().get("submitter", SUBMITTER))
    sa_namespace, _, sa_name = submitter.partition("/")
    roles = {(provider_name(r), obj["kind"], namespace_of(obj), name_of(obj)): (r, obj)
             for r, obj in objects(args.resources) if obj["kind"] in ("Role", "ClusterRole")}
    bound: dict[tuple[str, str, str, str], _BoundRole] = {}
    for resource, obj in objects(args.resources):
        if obj["kind"] not in BINDING_KINDS:
            continue
        cluster = provider_name(resource)
        what = f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}".replace(" /", " ")
        if problem := undecided(f"{what} on {cluster}", {"subjects": obj.get("subjects"), "roleRef": obj.get("roleRef")}):
            report(problem, resource.urn)
            continue
        binding_ns = namespace_of(obj)
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and (s.get("namespace") or binding_ns) == sa_namespace
                   for s in obj.get("subjects") or [] if isinstance(s, dict)):
            continue
        ref = obj.get("roleRef") or {}
        kind, role_ns = ref.get("kind", ""), binding_ns if ref.get("kind") == "Role" else ""
        key = (cluster, kind, role_ns, ref.get("name", ""))
        found = roles.get(key)
        role = _BoundRole(*key, found[1] if found else None, found[0].urn if found else resource.urn)
        if role.obj is not None and (problem := undecided(role.what, {"rules": role.obj.get("rules"),
                                                                      "aggregationRule": role.obj.get("aggregationRule")})):
            report(problem, role.urn)
            continue
        bound.setdefault(key, role)
    return submitter, [bound[k] for k in sorted(bound)]


def _rules(role: _BoundRole) -> list[dict[str, Any]]:
    return [r if isinstance(r, dict) else {} for r in (role.obj or {}).get("rules") or []]


def _values(rule: dict[str, Any], key: str) -> list[str]:
    return [str(v) for v in rule.get(key) or []]


@stack_rule("fab-submitter-no-secrets",
            "Airflow's GPU-job submitter is bound to no role that lets it get, list or watch Secrets, or whose rules can't be read.",
            settings=SUBMITTER_SETTING,
            place=560,
            docs="no role bound to Airflow's GPU-job submitter lets it get, list or watch Secrets (core group or `*`, `secrets` "
                 "or `*`); a role the stack does not define or one that aggregates others is refused, since its rules can't be "
                 "read")
def submitter_no_secrets(args: StackValidationArgs, report: ReportViolation) -> None:
    """Airflow holds the submitter's token for every GPU cluster and acts for every team: if it could read Secrets in team
    namespaces, any DAG could read every team's training credentials. A role is read rule by rule: a rule reads Secrets when
    its API groups include the core group (or `*`), its resources `secrets` (or `*`) and its verbs get, list or watch (or
    `*`), with or without resource names. A role the stack does not define (a built-in such as `edit`) or one that aggregates
    others can't be read here, so it is refused too."""
    submitter, roles = _submitter_roles(args, report)
    for role in roles:
        if role.obj is None:
            report(f"the submitter {submitter} is bound to {role.what}, which the stack does not define, so its rules can't be "
                   "checked; bind it only to roles the program defines", role.urn)
            continue
        if role.obj.get("aggregationRule"):
            report(f"{role.what}, bound to the submitter {submitter}, aggregates other roles, whose rules can't be checked here; "
                   "give it its rules directly", role.urn)
            continue
        for i, rule in enumerate(_rules(role)):
            groups, resources, verbs = _values(rule, "apiGroups"), _values(rule, "resources"), _values(rule, "verbs")
            reads = sorted(READ_VERBS & set(verbs))
            if {"", "*"} & set(groups) and {"secrets", "*"} & set(resources) and reads:
                report(f"{role.what}, bound to the submitter {submitter}, lets it {', '.join(reads)} Secrets (rule {i}: apiGroups "
                       f"{groups}, resources {resources}, verbs {verbs}); the submitter creates, watches and deletes jobs and never "
                       "reads Secrets", role.urn)


@stack_rule("fab-submitter-no-wildcards",
            "Every role bound to Airflow's GPU-job submitter names the API groups, resources and verbs it grants (no wildcard).",
            settings=SUBMITTER_SETTING,
            place=570,
            docs="every role bound to Airflow's GPU-job submitter names its API groups, resources and verbs (no `*`)")
def submitter_no_wildcards(args: StackValidationArgs, report: ReportViolation) -> None:
    """A wildcard grants whatever the API servers add later (new kinds, subresources, verbs such as `escalate`), so the
    submitter's rules name each of them. Roles that can't be read are `fab-submitter-no-secrets`' to refuse."""
    submitter, roles = _submitter_roles(args, report)
    for role in roles:
        for i, rule in enumerate(_rules(role)):
            for key in ("apiGroups", "resources", "verbs"):
                if wild := [v for v in _values(rule, key) if "*" in v]:
                    report(f"{role.what}, bound to the submitter {submitter}, grants the wildcard {key} {wild} in rule {i}; name "
                           "the API groups, resources and verbs the submitter needs", role.urn)


@stack_rule("fab-team-namespace-own-credentials",
            "A team namespace holds only credential Secrets of its own team (fab.internal/team on both).",
            place=580,
            docs="a credential Secret in a team namespace (labelled `fab.internal/team`) carries that same team: no other team's "
                 "keys, and no keys of no team")
def team_namespace_own_credentials(args: StackValidationArgs, report: ReportViolation) -> None:
    """A team namespace is a Namespace labelled TEAM_LABEL; a credential Secret in it must carry the same team, so that no
    team's jobs hold another team's keys, nor keys of no team (an engine's, which reach every team's data).

    Unknown values: a credential Secret (or a Secret whose engine label is unknown) in a namespace whose team label is
    unknown, or in a team namespace with an unknown team label, fails closed."""
    teams = _namespace_labels(args.resources, TEAM_LABEL)
    for resource, obj in objects(args.resources):
        if obj["kind"] != "Secret":
            continue
        cluster, namespace = provider_name(resource), namespace_of(obj)
        team, engine = teams.get((cluster, namespace)), label(obj, ENGINE_LABEL)
        if team is None or engine is None:  # not a team namespace, or not a credential Secret
            continue
        where = f"Secret {namespace}/{name_of(obj)} on {cluster}"
        if problem := undecided(where, {"namespace team": team, "engine": engine, "team": label(obj, TEAM_LABEL)}):
            report(problem, resource.urn)
            continue
        owner = label(obj, TEAM_LABEL)
        if owner == team:
            continue
        whose = f"team {owner}'s" if owner else f"no team's (no {TEAM_LABEL} label)"
        report(f"{where} holds {whose} {engine} credentials in team {team}'s namespace; a team namespace holds only its own "
               f"team's credential Secrets ({TEAM_LABEL}={team})", resource.urn)


IAM_USER = "minio:index/iamUser:IamUser"
IAM_ATTACHMENT = "minio:index/iamUserPolicyAttachment:IamUserPolicyAttachment"
PREFIXED_CLASSES = ("checkpoints", "models")
"""The bucket classes where each training team has a prefix of its own, `<bucket>/<team>/`."""
READ_ACTION = re.compile(r"^s3:(Get|List)[A-Za-z]*$")
"""Actions that only read; any other (Put, Delete, Abort, `s3:*`, `*`) writes."""
SHARED_READ_CLASSES = ("models",)
"""The prefixed classes whose other paths, those of no team (the served models' weights), every team may read."""


def _bucket_classes(resources: list[Any], report: ReportViolation) -> dict[str, Any]:
    """Bucket -> its class tag (UNKNOWN when its tags are unknown, which a rule deciding on the class fails closed on)."""
    classes: dict[str, Any] = {}
    for resource in resources:
        if resource.resource_type == BUCKET_TAGS:
            props = plain(resource.props)
            if problem := undecided(f"BucketTags {resource.name}", props.get("bucket"), ".bucket"):
                report(problem, resource.urn)
                continue
            tags = props.get("tags")
            classes[str(props.get("bucket"))] = UNKNOWN if tags is UNKNOWN or not isinstance(tags, dict) else tags.get(CLASS_TAG)
    return classes


def _team_policies(resources: list[Any], report: ReportViolation) -> Iterator[tuple[str, str, Any, dict[str, Any]]]:
    """(team, user, policy resource, policy document) for every MinIO policy attached to a user tagged with a team.

    Unknown values: a user's name or tags, an attachment's names, or the document of a team's policy, unknown, fail closed."""
    users: dict[str, str] = {}
    for resource in resources:
        if resource.resource_type == IAM_USER:
            props = plain(resource.props)
            if problem := undecided(f"MinIO user {resource.name}", {"name": props.get("name"), "tags": props.get("tags")}):
                report(problem, resource.urn)
                continue
            team = (props.get("tags") or {}).get(TEAM_LABEL)
            if team:
                users[str(props.get("name"))] = str(team)
    attached: dict[str, set[str]] = {}
    for resource in resources:
        if resource.resource_type == IAM_ATTACHMENT:
            props = plain(resource.props)
            if problem := undecided(f"MinIO policy attachment {resource.name}",
                                    {"userName": props.get("userName"), "policyName": props.get("policyName")}):
                report(problem, resource.urn)
                continue
            if props.get("userName") in users:
                attached.setdefault(str(props.get("policyName")), set()).add(str(props.get("userName")))
    for resource in resources:
        if resource.resource_type != IAM_POLICY:
            continue
        props = plain(resource.props)
        for user in sorted(attached.get(str(props.get("name")), ())):
            if problem := undecided(f"MinIO policy {resource.name}", props.get("policy"), ".policy"):
                report(problem, resource.urn)
                break
            yield users[user], user, resource, json.loads(props.get("policy") or "{}")


def _listed_prefixes(statement: dict[str, Any]) -> list[str] | None:
    """The `s3:prefix` values a statement's condition confines listing to, or None when it does not confine it (no prefix,
    or any other condition operator, which could widen or negate it)."""
    condition = statement.get("Condition")
    if not isinstance(condition, dict) or not condition or set(condition) - {"StringLike", "StringEquals"}:
        return None
    prefixes = []
    for operator in condition.values():
        if not isinstance(operator, dict) or set(operator) != {"s3:prefix"}:
            return None
        values = operator["s3:prefix"]
        prefixes += [values] if isinstance(values, str) else list(values)
    return prefixes or None


def _listify(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value or []]


@stack_rule("fab-team-policy-own-prefixes",
            "A training team's MinIO policy reaches the checkpoint and model buckets only under <bucket>/<team>/, and writes "
            "nowhere else.",
            place=590,
            docs="the MinIO policy of a user tagged with a team reaches the checkpoint and model buckets only under "
                 "`<bucket>/<team>/` (objects there; the bucket itself only by `ListBucket` confined to that prefix), except "
                 "that it may list and read paths of no team in the models bucket (the served weights, for offline batch "
                 "inference), and writes nowhere else")
def team_policy_own_prefixes(args: StackValidationArgs, report: ReportViolation) -> None:
    """The team of a policy is the `fab.internal/team` tag of the user it is attached to. In a bucket of class checkpoints or
    models (by its tags; a bucket ARN with wildcards counts for every bucket it matches), every object resource is under
    `<bucket>/<team>/`, and the bucket itself is reached only by ListBucket confined to `<team>/` prefixes, except that in
    the models bucket a team may list and read (never write) paths of no team (first segment neither a team nor a
    wildcard): the served models' weights, which offline batch inference loads with the team's keys. Outside them, the
    policy only reads.

    Unknown values: a user, attachment or team policy whose deciding fields are unknown, or the class of a bucket a team's
    policy reaches, fails closed."""
    classes = _bucket_classes(args.resources, report)
    policies = list(_team_policies(args.resources, report))
    teams = {team for team, *_ in policies}

    def shared(buckets: list[str], key: str) -> bool:
        """A path of the models bucket that is no team's: its first segment names it, wildcard-free, and is not a team."""
        first = key.split("/", 1)[0]
        return (all(classes[b] in SHARED_READ_CLASSES for b in buckets) and "/" in key and first not in teams
                and not any(c in first for c in "*?"))

    for team, user, resource, document in policies:
        name, own = plain(resource.props).get("name"), f"{team}/"
        who = f"MinIO policy {name} of team {team}'s user {user}"
        for statement in document.get("Statement", []):
            if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                continue
            actions = _listify(statement.get("Action"))
            writes = [a for a in actions if not READ_ACTION.match(a)]
            for arn in _listify(statement.get("Resource")):
                bucket, slash, key = arn.removeprefix("arn:aws:s3:::").partition("/")
                matched = [b for b in sorted(classes) if fnmatchcase(b, bucket)]
                if any(classes[b] is UNKNOWN for b in matched):
                    report(_fails_closed(f"{who} (grants {arn})", "the class tag of a bucket it matches"), resource.urn)
                    continue
                prefixed = [b for b in matched if classes[b] in PREFIXED_CLASSES]
                if prefixed and slash and not key.startswith(own) and not (not writes and shared(prefixed, key)):
                    report(f"{who} grants {', '.join(actions)} on {arn}, outside the team's prefix {own} of {', '.join(prefixed)}; "
                           "a team reaches the checkpoint and model buckets only under its own prefix", resource.urn)
                elif prefixed and not slash and (actions != ["s3:ListBucket"] or not all(
                        p.startswith(own) or shared(prefixed, p) for p in _listed_prefixes(statement) or [""])):
                    report(f"{who} grants {', '.join(actions)} on bucket {bucket} beyond the team's prefix (only s3:ListBucket "
                           f"with s3:prefix under {own}); a team reaches the checkpoint and model buckets only under its own "
                           "prefix", resource.urn)
                elif not prefixed and writes:
                    report(f"{who} grants {', '.join(writes)} on {arn}; a team writes only under its own prefix of the "
                           "checkpoint and model buckets", resource.urn)
