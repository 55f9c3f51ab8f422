"""`fabctl access`, S3 area: what the MinIO users whose keys a seat holds may do, per bucket and prefix, by AWS's
evaluation of the policies the plan attaches to them (MinIO follows it; docs/security.md).

The evaluation (`evaluate`): an explicit Deny wins, then an Allow, else the request is denied; `Action`/`NotAction`
match case-insensitively with `*` and `?`, `Resource`/`NotResource` case-sensitively; `${aws:username}` is the user;
a condition block holds when every operator and key holds, a key when any of its values matches; the String*, Arn*,
IpAddress, Bool, Null and Numeric operators, their `IfExists` forms and the `ForAnyValue:`/`ForAllValues:`
qualifiers; a negated operator holds when its key is absent. A statement whose actions are all MinIO admin actions
(`admin:*`) takes no Resource in MinIO and applies to the whole deployment. tests/fabctl/test_access_s3.py proves the
verdicts equal to AWS's own logic (@cloud-copilot/iam-simulate) on every policy of both stacks.

The answer (`accesses`) probes each bucket of the plan at its root, at every prefix any policy names, and at a prefix
none names, with the S3 actions below, from the seat's own ranges (a vendor) or from inside the site (`INSIDE`).
Limits: bucket policies and group attachments are not read (the program writes none); actions not in `ACTIONS` are
not probed, so a wildcard grant shows as the probed actions it covers.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

from fabctl.access.model import Access, Principal
from fabctl.render import Plan

AREA, TARGET = "s3", "minio"
POLICY_TYPE = "minio:index/iamPolicy:IamPolicy"
ATTACHMENT_TYPE = "minio:index/iamUserPolicyAttachment:IamUserPolicyAttachment"
INSIDE = "10.0.0.10"
"""The source address of a request from inside the site (a pod), for `aws:SourceIp` conditions."""
OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                  "s3:ListMultipartUploadParts", "s3:PutObjectRetention", "s3:PutObjectLegalHold", "s3:DeleteObjectVersion")
BUCKET_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads", "s3:ListBucketVersions",
                  "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucket",
                  "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutReplicationConfiguration",
                  "s3:PutBucketObjectLockConfiguration")
ACTIONS = OBJECT_ACTIONS + BUCKET_ACTIONS
"""The actions probed: what the platform's policies grant, and what would let a user widen or destroy a bucket."""
ESCALATING = {"s3:PutBucketPolicy": "rewrites the bucket's policy (any user's access to it)",
              "s3:DeleteBucketPolicy": "removes the bucket's policy",
              "s3:PutReplicationConfiguration": "copies the bucket elsewhere",
              "s3:DeleteBucket": "deletes the bucket"}
ADMIN = "admin"
INTRUDER = "fab-access-unnamed/"
"""A prefix no policy names: a grant on it is a grant on every prefix."""
KEY = "object"


@dataclass(frozen=True)
class Request:
    """One S3 request: an action on a bucket (or an object of it when `key` is given)."""

    action: str
    bucket: str
    key: str | None = None
    prefix: str | None = None
    """`s3:prefix` of a listing (None: a listing without a prefix)."""
    source_ip: str = INSIDE

    @property
    def resource(self) -> str:
        return f"arn:aws:s3:::{self.bucket}" + (f"/{self.key}" if self.key is not None else "")

    def context(self) -> dict[str, str]:
        context = {"aws:SourceIp": self.source_ip}
        if self.prefix is not None:
            context["s3:prefix"] = self.prefix
        return context


def _list(value: Any) -> list[Any]:
    return [value] if isinstance(value, (str, bool, int, float)) else list(value or [])


def _glob(pattern: str, value: str, case: bool) -> bool:
    """IAM's wildcard match: `*` any run of characters, `?` one character, nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _variables(text: str, user: str) -> str:
    return text.replace("${aws:username}", user)


def _in_network(value: str, network: str) -> bool:
    try:
        return ipaddress.ip_address(value) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False


def _match(operator: str, expected: str, actual: str) -> bool:
    if operator in ("StringEquals", "ArnEquals"):
        return actual == expected
    if operator in ("StringLike", "ArnLike"):
        return _glob(expected, actual, case=True)
    if operator == "StringEqualsIgnoreCase":
        return actual.lower() == expected.lower()
    if operator == "IpAddress":
        return _in_network(actual, expected)
    if operator == "Bool":
        return actual.lower() == str(expected).lower()
    numeric = {"NumericEquals": float.__eq__, "NumericLessThan": float.__lt__, "NumericLessThanEquals": float.__le__,
               "NumericGreaterThan": float.__gt__, "NumericGreaterThanEquals": float.__ge__}
    if operator in numeric:
        try:
            return numeric[operator](float(actual), float(expected))
        except ValueError:
            return False
    raise ValueError(f"condition operator {operator!r} is not evaluated by fabctl access")


NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
           "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike", "NotIpAddress": "IpAddress", "NumericNotEquals": "NumericEquals"}


def _condition(operator: str, key: str, values: list[Any], context: dict[str, str], user: str) -> bool:
    qualifier = ""
    if ":" in operator and operator.split(":", 1)[0] in ("ForAnyValue", "ForAllValues"):
        qualifier, operator = operator.split(":", 1)
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    expected = [_variables(str(v), user) for v in values]
    if operator == "Null":
        return (key not in context) == (str(values[0]).lower() == "true")
    if key not in context:
        return if_exists or qualifier == "ForAllValues" or operator in NEGATED
    actual = context[key]
    if operator in NEGATED:
        return not any(_match(NEGATED[operator], e, actual) for e in expected)
    return any(_match(operator, e, actual) for e in expected)


def _conditions(block: dict[str, dict[str, Any]], context: dict[str, str], user: str) -> bool:
    return all(_condition(operator, key, _list(values), context, user)
               for operator, keys in block.items() for key, values in keys.items())


def _admin_only(statement: dict[str, Any]) -> bool:
    actions = _list(statement.get("Action"))
    return bool(actions) and all(str(a).startswith("admin:") for a in actions)


def _applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, str], user: str) -> bool:
    if "Action" in statement:
        if not any(_glob(a, action, case=False) for a in _list(statement["Action"])):
            return False
    elif any(_glob(a, action, case=False) for a in _list(statement.get("NotAction"))):
        return False
    if "Resource" in statement:
        if not any(_glob(_variables(r, user), resource, case=True) for r in _list(statement["Resource"])):
            return False
    elif "NotResource" in statement:
        if any(_glob(_variables(r, user), resource, case=True) for r in _list(statement["NotResource"])):
            return False
    elif not _admin_only(statement):
        return False  # AWS requires a Resource; MinIO takes none only for admin actions
    return _conditions(statement.get("Condition") or {}, context, user)


def evaluate(documents: list[dict[str, Any]], user: str, request: Request) -> str:
    """`Allowed`, `ExplicitlyDenied` or `ImplicitlyDenied`: the verdict on `request` of `user` holding `documents`."""
    allowed = False
    for document in documents:
        for statement in _list(document.get("Statement")) if not isinstance(document.get("Statement"), dict) else [document["Statement"]]:
            if _applies(statement, request.action, request.resource, request.context(), user):
                if statement.get("Effect") == "Deny":
                    return "ExplicitlyDenied"
                allowed = allowed or statement.get("Effect") == "Allow"
    return "Allowed" if allowed else "ImplicitlyDenied"


# --- the plan's users ---------------------------------------------------------------------------------------------------

def policies(plan: Plan) -> dict[str, dict[str, Any]]:
    """MinIO policy name -> document, of every IamPolicy of the plan."""
    return {r["inputs"]["name"]: json.loads(r["inputs"]["policy"]) for r in plan.of_type(POLICY_TYPE)}


def attached(plan: Plan) -> dict[str, list[str]]:
    """MinIO user -> the policies attached to it."""
    found: dict[str, list[str]] = {}
    for r in plan.of_type(ATTACHMENT_TYPE):
        found.setdefault(r["inputs"]["userName"], []).append(r["inputs"]["policyName"])
    return found


def buckets(plan: Plan) -> list[str]:
    return sorted({r["inputs"]["bucket"] for r in plan.of_type("minio:index/s3Bucket:S3Bucket")})


def named_prefixes(documents: list[dict[str, Any]]) -> list[str]:
    """Every object prefix a policy names, in a Resource or an `s3:prefix` condition."""
    found = set()
    for document in documents:
        for statement in _list(document.get("Statement")):
            for resource in _list(statement.get("Resource")):
                if (match := re.match(r"arn:aws:s3:::[^/]+/(.+?)\*?$", str(resource))) and match.group(1):
                    found.add(match.group(1).rstrip("*"))
            for keys in (statement.get("Condition") or {}).values():
                found |= {str(v).rstrip("*") for v in _list(keys.get("s3:prefix"))}
    return sorted(p for p in found if p)


def probes(bucket_names: list[str], prefixes: list[str], source_ip: str) -> list[tuple[str, str, Request]]:
    """(bucket, prefix, request) of every request probed: "" is the bucket itself (its root for objects)."""
    found = []
    for bucket in bucket_names:
        for action in BUCKET_ACTIONS:
            if action != "s3:ListBucket":
                found.append((bucket, "", Request(action, bucket, source_ip=source_ip)))
        for prefix in ["", *prefixes, INTRUDER]:
            found.append((bucket, prefix, Request("s3:ListBucket", bucket, prefix=prefix or None, source_ip=source_ip)))
            for action in OBJECT_ACTIONS:
                found.append((bucket, prefix, Request(action, bucket, key=f"{prefix}{KEY}", source_ip=source_ip)))
    return found


def _sources(principal: Principal) -> list[tuple[str, str]]:
    """(address, how it is named) of where the seat's requests come from."""
    if principal.source_cidrs:
        return [(str(next(iter(ipaddress.ip_network(c, strict=False).hosts()), ipaddress.ip_network(c, strict=False).network_address)),
                 f"from {c}") for c in principal.source_cidrs]
    return [(INSIDE, "from inside the site")]


def user_accesses(user: str, names: list[str], documents: list[dict[str, Any]], bucket_names: list[str],
                  source_ip: str, origin: str) -> list[Access]:
    """What `user` may do, summed up per bucket (every prefix: `bucket/*`) and per prefix (`bucket/prefix*`)."""
    via = f"MinIO user {user}: {', '.join(names)} ({origin})"
    allowed: dict[tuple[str, str], set[str]] = {}
    prefixes = named_prefixes(documents)
    for bucket, prefix, request in probes(bucket_names, prefixes, source_ip):
        if evaluate(documents, user, request) == "Allowed":
            allowed.setdefault((bucket, prefix), set()).add(request.action)
    found = []
    for (bucket, prefix), actions in sorted(allowed.items()):
        root = allowed.get((bucket, ""), set())
        if prefix == "":
            scopes = [(bucket, {a for a in actions if a in BUCKET_ACTIONS}), (f"{bucket}/*", actions - set(BUCKET_ACTIONS))]
        elif prefix == INTRUDER:  # allowed under a prefix nobody is given, not at the root: under every prefix
            scopes = [(f"{bucket}/<any prefix>/*", actions - root)]
        else:
            scopes = [(f"{bucket}/{prefix}*", actions - root - allowed.get((bucket, INTRUDER), set()))]
        for scope, own in scopes:
            if own:
                escalation = "; ".join(f"{a}: {ESCALATING[a]}" for a in sorted(own) if a in ESCALATING)
                found.append(Access(AREA, TARGET, scope, ",".join(sorted(own)), via, escalation))
    admin = sorted({str(a) for d in documents for s in _list(d.get("Statement")) if _admin_only(s) and s.get("Effect") == "Allow"
                    for a in _list(s.get("Action"))})
    if admin:
        found.append(Access(AREA, TARGET, ADMIN, ",".join(admin), via,
                            "MinIO admin actions apply to the whole deployment" if any(a != "admin:Prometheus" for a in admin) else ""))
    return found


def accesses(plan: Plan, principal: Principal) -> list[Access]:
    """Per bucket and prefix, the S3 actions the seat's MinIO users are allowed."""
    documents, attachments, bucket_names = policies(plan), attached(plan), buckets(plan)
    found = []
    for user in principal.minio_users:
        names = sorted(attachments.get(user, []))
        mine = [documents[n] for n in names if n in documents]
        for source_ip, origin in _sources(principal):
            found += user_accesses(user, names, mine, bucket_names, source_ip, origin)
    return sorted(found)
