"""A ValidatingAdmissionPolicy evaluated as the API server does, by a real CEL engine: `common-expression-language`
(module `cel`, the Python bindings of the Rust CEL interpreter; requirements-dev.txt).

What is the API server's here, from `k8s.io/apiserver/pkg/admission/plugin/policy/validating` (Kubernetes 1.34):
- the admission configuration kinds (webhooks, policies, their bindings) are exempt from every policy;
- the policy's `matchConstraints` (resourceRules, excludeResourceRules, `*` and `*/*` resources, operations), then the
  binding's `matchResources` where it has them, select the request;
- `variables` are evaluated in order and bound as `variables.<name>` (one that errors makes an expression that reads it
  error);
- the `namespaceSelector` of matchConstraints and of the binding's matchResources: a namespaced request by its
  namespace's labels (the request's `namespace_object`), a Namespace by its own, other cluster-scoped requests always;
- `matchConditions`: any false skips the policy; otherwise any error applies the failurePolicy; they see
  `namespaceObject` as null, as the API server evaluates them without it;
- `validations`: each must be true; false refuses with the messageExpression's string (when it evaluates to a non-empty
  string), else `message`, else `failed expression: <expression>`; an error applies the failurePolicy;
- the binding's `validationActions`: Deny refuses, Warn and Audit let the request through;
- the variables an expression reads: `object` (null for DELETE and CONNECT), `oldObject` (null but for UPDATE and
  DELETE), `request` (the AdmissionRequest: kind, resource, subResource, name, namespace, operation, userInfo, dryRun,
  options), `params` (null: no policy here has a paramKind), `namespaceObject` (null for a cluster-scoped object),
  `variables`.

What this engine lacks of Kubernetes' CEL environment, and what is done about it:
- the global `matches(string, regex)` overload: a shim that runs the engine's own `string.matches(regex)`;
- `authorizer` (and `authorizer.requestResource`), Kubernetes' libraries (quantity, url, ip and cidr, semver, format,
  lists' isSorted/sum/min/max/indexOf, regex find/findAll, strings' ext functions such as split, lowerAscii, join), sets,
  base64, and optional syntax (`obj.?field`): not available. An expression that calls a function outside `SUPPORTED`
  or reads `authorizer` is refused with `NotCovered` before anything is evaluated, so a policy that needs them fails its
  test instead of being judged wrongly;
- type checking against the objects' schemas (the API server refuses a policy whose expression does not type-check at
  creation): not done; the engine is dynamically typed, and an ill-typed expression errors only when evaluated;
- cost limits: not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cel

EXEMPT = {("admissionregistration.k8s.io", r) for r in (
    "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
    "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")}
"""What no admission policy or webhook is called for (so that a bad policy can always be fixed)."""

SUPPORTED = {
    # operators and standard functions of CEL that the engine implements
    "!_", "-_", "@not_strictly_false", "@in", "_&&_", "_||_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_",
    "_*_", "_/_", "_%_", "_?_:_", "_[_]", "size", "contains", "startsWith", "endsWith", "matches", "string", "int", "uint",
    "double", "bool", "bytes", "type", "duration", "timestamp",
}
"""The functions an expression may call here; the global `matches` is the shim below."""


class NotCovered(Exception):
    """The expression needs what the engine lacks of Kubernetes' CEL environment."""


@dataclass(frozen=True)
class Request:
    """An admission request as the API server builds it."""

    operation: str
    group: str
    version: str
    resource: str
    kind: str
    name: str
    username: str
    namespace: str = ""
    subresource: str = ""
    groups: tuple[str, ...] = ("system:authenticated",)
    dry_run: bool = False
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    namespace_object: dict[str, Any] | None = None

    def binding(self) -> dict[str, Any]:
        gvk = {"group": self.group, "version": self.version, "kind": self.kind}
        gvr = {"group": self.group, "version": self.version, "resource": self.resource}
        request = {
            "uid": "0e3c1a0c-0000-4000-8000-000000000000", "kind": gvk, "resource": gvr, "subResource": self.subresource,
            "requestKind": gvk, "requestResource": gvr, "requestSubResource": self.subresource, "name": self.name,
            "namespace": self.namespace, "operation": self.operation,
            "userInfo": {"username": self.username, "uid": "", "groups": list(self.groups), "extra": {}},
            "dryRun": self.dry_run,
        }
        return {"object": self.object, "oldObject": self.old_object, "request": request, "params": None,
                "namespaceObject": self.namespace_object}


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    matched: bool = True
    """Whether the policy applied at all (its constraints and match conditions selected the request)."""
    warnings: tuple[str, ...] = field(default=())


def _rule_matches(rule: dict[str, Any], request: Request) -> bool:
    def among(values: list[str], value: str) -> bool:
        return "*" in values or value in values

    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    resources = rule.get("resources") or []
    resource_ok = resource in resources or (
        "*/*" in resources if request.subresource else "*" in resources) or (
        request.subresource and (f"{request.resource}/*" in resources or f"*/{request.subresource}" in resources))
    scope = rule.get("scope", "*")
    scope_ok = scope == "*" or (scope == "Namespaced") == bool(request.namespace)
    return (among(rule.get("operations") or [], request.operation) and among(rule.get("apiGroups") or [], request.group)
            and among(rule.get("apiVersions") or [], request.version) and bool(resource_ok) and scope_ok)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) as the API server applies it."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        found = {"In": key in labels and labels[key] in values, "NotIn": key not in labels or labels[key] not in values,
                 "Exists": key in labels, "DoesNotExist": key not in labels}
        if not found[operator]:
            return False
    return True


def _namespace_selected(selector: dict[str, Any], request: Request) -> bool:
    """`namespaceSelector`: a namespaced request by its namespace's labels, a Namespace by its own; any other
    cluster-scoped request always matches (k8s.io/apiserver, admission/plugin/webhook/predicates/namespace)."""
    if request.namespace:
        if request.namespace_object is None:
            raise NotCovered("a namespaceSelector needs the request's namespace_object")
        return _selects(selector, (request.namespace_object.get("metadata") or {}).get("labels") or {})
    if request.resource == "namespaces" and request.group == "":
        return _selects(selector, ((request.object or request.old_object or {}).get("metadata") or {}).get("labels") or {})
    return True


def _resources_match(match: dict[str, Any] | None, request: Request) -> bool:
    if not match:
        return True
    if match.get("objectSelector"):
        raise NotCovered("objectSelector is not modelled here")
    if match.get("namespaceSelector") and not _namespace_selected(match["namespaceSelector"], request):
        return False
    if match.get("matchPolicy", "Equivalent") != "Equivalent":
        raise NotCovered("matchPolicy other than Equivalent is not modelled here")
    included = not match.get("resourceRules") or any(_rule_matches(r, request) for r in match["resourceRules"])
    return included and not any(_rule_matches(r, request) for r in match.get("excludeResourceRules") or [])


def _matches(text: str, regex: str) -> bool:
    """Kubernetes' global `matches(string, regex)`: the engine's own `string.matches(regex)`."""
    return bool(cel.evaluate("text.matches(regex)", {"text": text, "regex": regex}))


def _compile(expression: str) -> Any:
    program = cel.compile(expression)
    references = program.references()
    missing = sorted(set(references["functions"]) - SUPPORTED)
    if "authorizer" in references["variables"]:
        missing.append("authorizer")
    if missing:
        raise NotCovered(f"{expression!r} needs {', '.join(missing)}, which the engine here lacks (tests/admission.py)")
    return program


class _Error(Exception):
    pass


def _evaluate(expression: str, context: cel.Context) -> Any:
    _compile(expression)
    try:
        return cel.evaluate(expression, context)
    except Exception as exc:  # noqa: BLE001 - any failure of the engine is a CEL evaluation error
        raise _Error(f"expression '{expression}' resulted in error: {exc}") from None


def admit(policy: dict[str, Any], binding: dict[str, Any], request: Request) -> Decision:
    """The policy's verdict on `request` under `binding` (both objects as applied)."""
    spec, bound = policy["spec"], binding["spec"]
    assert bound["policyName"] == policy["metadata"]["name"], "the binding names another policy"
    if bound.get("paramRef") or spec.get("paramKind"):
        raise NotCovered("policies with params are not modelled here")
    if (request.group, request.resource) in EXEMPT:
        return Decision(allowed=True, matched=False)
    if not _resources_match(spec.get("matchConstraints"), request) or not _resources_match(bound.get("matchResources"), request):
        return Decision(allowed=True, matched=False)
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    context = cel.Context()
    context.add_function("matches", _matches)
    for name, value in request.binding().items():
        context.add_variable(name, value)
    variables: dict[str, Any] = {}
    for variable in spec.get("variables") or []:
        context.add_variable("variables", variables)
        try:
            variables[variable["name"]] = _evaluate(variable["expression"], context)
        except _Error:
            pass  # an expression that reads it errors
    context.add_variable("variables", variables)

    def refused(message: str) -> Decision:
        actions = bound["validationActions"]
        if "Deny" in actions:
            return Decision(allowed=False, message=message)
        return Decision(allowed=True, message=message, warnings=(message,) if "Warn" in actions else ())

    # The API server evaluates match conditions without the namespace object (k8s.io/apiserver v0.34,
    # admission/plugin/webhook/matchconditions/matcher.go: ForInput(..., nil namespace, ...)): it is null there.
    conditions = cel.Context()
    conditions.add_function("matches", _matches)
    for name, value in {**request.binding(), "namespaceObject": None}.items():
        conditions.add_variable(name, value)
    errors = []
    for condition in spec.get("matchConditions") or []:
        try:
            if _evaluate(condition["expression"], conditions) is False:
                return Decision(allowed=True, matched=False)
        except _Error as exc:
            errors.append(str(exc))
    if errors:
        return refused(errors[0]) if fail else Decision(allowed=True)
    for validation in spec.get("validations") or []:
        try:
            result = _evaluate(validation["expression"], context)
        except _Error as exc:
            if fail:
                return refused(str(exc))
            continue
        if result is True:
            continue
        if result is not False:
            message = f"expression '{validation['expression']}' resulted in error: no such overload (not a bool)"
            return refused(message) if fail else Decision(allowed=True)
        message = ""
        if validation.get("messageExpression"):
            try:
                said = _evaluate(validation["messageExpression"], context)
                message = said.strip() if isinstance(said, str) and "\n" not in said.strip() else ""
            except _Error:
                message = ""
        message = message or validation.get("message") or f"failed expression: {validation['expression']}"
        return refused(message)
    return Decision(allowed=True)


def policies_in(objects: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each ValidatingAdmissionPolicy among `objects` by name, with the bindings that name it."""
    found = {o["metadata"]["name"]: (o, []) for o in objects if o.get("kind") == "ValidatingAdmissionPolicy"}
    for o in objects:
        if o.get("kind") == "ValidatingAdmissionPolicyBinding" and o["spec"]["policyName"] in found:
            found[o["spec"]["policyName"]][1].append(o)
    return found


def crd_request(operation: str, crd: dict[str, Any], old: dict[str, Any] | None, username: str) -> Request:
    """A CustomResourceDefinition create or update."""
    return Request(operation=operation, group="apiextensions.k8s.io", version="v1", resource="customresourcedefinitions",
                   kind="CustomResourceDefinition", name=crd["metadata"]["name"], username=username, object=crd, old_object=old)

