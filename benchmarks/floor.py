"""The SDK floor: a program with no logic that registers exactly the resources of a recorded render.

Run by the mock renderer in place of the project's `__main__.py`. It reads the render to replay from
the file named by `FAB_FLOOR_PLAN` and makes every registration of it again, in the same order, as an
instance of the provider SDK's own class for that type (`pulumi_kubernetes.core.v1.Service`,
`pulumi_minio.S3Bucket`, ...) made by that class's constructor, so the floor imports what the program
imports for those types and the SDK does its own argument handling as for the program. Each
registration is the recorded one: same type, name, parent and provider, same inputs (wire values), the
inputs that came from other resources as Outputs of those resources and the secret ones as secret
Outputs (so the SDK awaits and tracks them as it does for the program), the same dependencies and the same
options (protect, retain on delete, aliases, additional secret outputs, import ids, custom timeouts, ...). Providers and
custom resources with fields beside `spec` skip the constructor (see `_constructible`): their recorded
inputs go straight to the registration the class would make. What is left is what the SDK itself costs
for that work; the program's time beyond it is its own logic.

The floor first imports what its registrations need (and nothing else: a module the program imports
for its own logic is the program's cost), then makes the program's process-level settings through the
same call (`components.process.settle_after_imports`), then registers. The program loads each
Kubernetes API module on its first kind, after that call (docs/performance.md, "The fair floor").
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pulumi
from pulumi import _types

from components.process import settle_after_imports

PROVIDER_PACKAGES = {
    "kubernetes": "pulumi_kubernetes",
    "minio": "pulumi_minio",
    "keycloak": "pulumi_keycloak",
    "tls": "pulumi_tls",
    "random": "pulumi_random",
}


def replay(records: list[dict[str, Any]]) -> None:
    # Imports every SDK module the registrations need, as the program's imports do.
    classes = [_class(record) for record in records]
    settle_after_imports()
    created: dict[str, pulumi.Resource] = {}
    for record, cls in zip(records, classes):
        type_, name, inputs = record["type"], record["name"], _inputs(record, created)
        through_constructor = cls is not None and _constructible(cls, inputs)
        opts = _options(record, created, sdk_options=through_constructor)
        if record.get("read"):
            resource: pulumi.Resource = pulumi.StackReference(name, stack_name=inputs["name"], opts=opts)
        elif cls is None:
            resource = pulumi.ComponentResource(type_, name, None, opts)
        elif through_constructor:
            resource = _construct(cls, name, inputs, opts)
        else:
            resource = cls.__new__(cls)
            __init__(resource, type_.rsplit(":", 1)[1] if type_.startswith("pulumi:providers:") else type_, name, inputs, opts)
        created[record["urn"]] = resource


def _options(record: dict[str, Any], created: dict[str, pulumi.Resource], sdk_options: bool = False) -> pulumi.ResourceOptions:
    """The recorded registration's options; its dependencies on resources it takes no input from as `depends_on`.

    With `sdk_options` the SDK class's constructor adds its own options, which are left to it: the aliases of the type's
    older API versions (the recorded aliases that name a type only) and its additional secret outputs (the outputs it
    knows are secret; what the program adds to them it repeats, so the set is the same).
    """
    from_inputs = {urn for urns in record.get("property_dependencies", {}).values() for urn in urns}
    aliases = record.get("aliases", [])
    secret_outputs = record.get("additional_secret_outputs") or []
    if sdk_options:
        aliases = [alias for alias in aliases if not _type_alias(alias)]
        secret_outputs = []
    return pulumi.ResourceOptions(
        parent=created.get(record["parent"] or ""),
        provider=created.get(record["provider"] or ""),
        depends_on=[created[urn] for urn in record.get("dependencies", []) if urn not in from_inputs],
        protect=record.get("protect") or None,
        retain_on_delete=record.get("retain_on_delete") or None,
        delete_before_replace=record.get("delete_before_replace") or None,
        ignore_changes=record.get("ignore_changes") or None,
        replace_on_changes=record.get("replace_on_changes") or None,
        additional_secret_outputs=secret_outputs or None,
        aliases=[_alias(alias) for alias in aliases] or None,
        import_=record.get("import_id"),
        custom_timeouts=pulumi.CustomTimeouts(**record["custom_timeouts"]) if record.get("custom_timeouts") else None,
    )


def _type_alias(recorded: dict[str, Any]) -> bool:
    """Whether a recorded alias names an older type only (same name and parent): one an SDK constructor adds itself."""
    spec = recorded.get("spec")
    return spec is not None and not spec.get("parentUrn") and not set(spec) - {"type", "parentUrn"}


def _alias(recorded: dict[str, Any]) -> str | pulumi.Alias:
    """A recorded alias (the `Alias` message as JSON: a URN or a spec) as the SDK's `Alias` that sends the same message."""
    if "urn" in recorded:
        return recorded["urn"]
    spec = recorded["spec"]
    parent = None if spec.get("noParent") else spec.get("parentUrn") or ...
    return pulumi.Alias(name=spec.get("name", ...), type_=spec.get("type", ...), stack=spec.get("stack", ...),
                        project=spec.get("project", ...), parent=parent)


def _inputs(record: dict[str, Any], created: dict[str, pulumi.Resource]) -> dict[str, Any]:
    """The recorded inputs, each secret one a secret Output and each one taken from other resources an Output of them."""
    inputs = dict(record["inputs"])
    for path in record.get("secret_inputs", []):
        inputs = _replaced(inputs, path, pulumi.Output.secret)
    for key, urns in record.get("property_dependencies", {}).items():
        if key in inputs:
            inputs[key] = pulumi.Output.all(*(created[urn].urn for urn in urns)).apply(lambda _, value=inputs[key]: value)
    return inputs


def _replaced(value: Any, path: str, wrap: Any) -> Any:
    """`value` with the part at `path` (as the renderer records secret paths: `stringData.tls.crt`, `env[0].value`) wrapped.

    A key may hold dots itself (`tls.crt`), so each step takes the key of the mapping that the path continues from.
    """
    if path in ("", "."):
        return wrap(value)
    if isinstance(value, dict):
        for key in value:
            if path == key or path.startswith((f"{key}.", f"{key}[")):
                rest = path[len(key):].removeprefix(".")
                return {**value, key: _replaced(value[key], rest, wrap)}
    if isinstance(value, list) and path.startswith("["):
        index, _, rest = path[1:].partition("]")
        items = list(value)
        items[int(index)] = _replaced(items[int(index)], rest.removeprefix("."), wrap)
        return items
    raise ValueError(f"the recorded secret path {path!r} is not in the recorded inputs")


def _class(record: dict[str, Any]) -> type | None:
    """The SDK class a record is registered as; None for a stack read or a component."""
    type_ = record["type"]
    if record.get("read"):
        return None
    if type_.startswith("pulumi:providers:"):
        return getattr(importlib.import_module(PROVIDER_PACKAGES[type_.rsplit(":", 1)[1]]), "Provider", pulumi.ProviderResource)
    if record["custom"] or type_.split(":")[0] in PROVIDER_PACKAGES:  # a resource, or a provider's component (yaml/v2)
        module, name = _sdk_class(type_)
        return getattr(module, name, pulumi.CustomResource)
    return None


SDK_PACKAGES = tuple(PROVIDER_PACKAGES.values())


def _constructible(cls: type, inputs: dict[str, Any]) -> bool:
    """Whether the registration goes through the SDK class's own constructor, as the program's does.

    Every class of the provider SDKs does, except their providers (the program configures them with values the render
    does not record, such as kubeconfigs) and `apiextensions.CustomResource` for an object with fields beside `spec`
    (the class carries `spec` only: the program registers those through a `pulumi.CustomResource` of its own).
    """
    from pulumi_kubernetes.apiextensions import CustomResource

    if not cls.__module__.startswith(SDK_PACKAGES) or issubclass(cls, pulumi.ProviderResource | pulumi.ComponentResource):
        return False
    return not issubclass(cls, CustomResource) or not set(inputs) - {"apiVersion", "kind", "metadata", "spec"}


def _construct(cls: type, name: str, inputs: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """An instance of the SDK class made by its constructor from the recorded inputs: top-level keys by their Python
    names (`api_version`, `secret_key`), nested values as recorded (wire names, as the program writes them)."""
    from pulumi_kubernetes.apiextensions import CustomResource

    if issubclass(cls, CustomResource):
        return cls(name, api_version=inputs["apiVersion"], kind=inputs["kind"], metadata=inputs.get("metadata"),
                   spec=inputs.get("spec"), opts=opts)
    return cls(name, opts=opts, **_by_python_name(_args_class(cls), inputs))


def __init__(resource: Any, type_: str, name: str, inputs: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
    """Stands in for the provider class's constructor, which the real program goes through.

    The SDK records the stack of every registration made by a resource class constructor and finds
    it by counting `__init__` frames; calling the base class directly would skip that work and make
    the floor cheaper than any real program.
    """
    if isinstance(resource, pulumi.ComponentResource):  # a component the provider builds (remote)
        pulumi.ComponentResource.__init__(resource, type_, name, _args(type(resource), inputs), opts, remote=True)
        return
    base = pulumi.ProviderResource if isinstance(resource, pulumi.ProviderResource) else pulumi.CustomResource
    base.__init__(resource, type_, name, _args(type(resource), inputs), opts)


def _args(cls: type, inputs: dict[str, Any]) -> Any:
    """The inputs as the class's own args object (`ServiceInitArgs`, `S3BucketArgs`), as its constructor passes them."""
    args_cls = _args_class(cls)
    if args_cls is None:
        return inputs
    args = args_cls.__new__(args_cls)
    args.__dict__.update(_by_python_name(args_cls, inputs))
    return args


def _args_class(cls: type) -> type | None:
    """The class's own args type (`ServiceInitArgs`, `S3BucketArgs`), None where it has none."""
    module = sys.modules[cls.__module__]
    args_cls = getattr(module, f"{cls.__name__}InitArgs", None) or getattr(module, f"{cls.__name__}Args", None)
    return args_cls if args_cls is not None and _types.is_input_type(args_cls) else None


def _by_python_name(args_cls: type | None, inputs: dict[str, Any]) -> dict[str, Any]:
    """The recorded top-level inputs keyed by the args type's Python names (`apiVersion` -> `api_version`)."""
    py_names = {wire: py for py, wire in _types.input_type_py_to_pulumi_names(args_cls).items()} if args_cls else {}
    return {py_names.get(key, key): value for key, value in inputs.items()}


def _sdk_class(type_: str) -> tuple[Any, str]:
    """The module and class name the provider SDK uses for a type token (`pkg:module:Name`)."""
    package, module, name = type_.split(":")
    if package == "kubernetes":
        group, version = module.rsplit("/", 1)
        try:
            sdk = importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}")
            if hasattr(sdk, name):
                return sdk, name
        except ImportError:
            pass
        return importlib.import_module("pulumi_kubernetes.apiextensions"), "CustomResource"
    if package in PROVIDER_PACKAGES:
        prefix = module.split("/")[0]
        return importlib.import_module(PROVIDER_PACKAGES[package] + ("" if prefix == "index" else f".{prefix}")), name
    return importlib.import_module("pulumi.dynamic"), "Resource"  # dynamic resources (the program's own providers)


if __name__ == "__main__":  # as the mock renderer runs it
    replay(json.loads(Path(os.environ["FAB_FLOOR_PLAN"]).read_text(encoding="utf-8")))
