"""The SDK floor: a program with no logic that registers exactly the resources of a recorded render.

Run by the mock renderer in place of the project's `__main__.py`. It reads the render to replay from
the file named by `FAB_FLOOR_PLAN` and registers every resource in the same order, with the same
type, name, parent, provider and inputs (wire values, as recorded), as an instance of the provider
SDK's own class for that type (`pulumi_kubernetes.core.v1.Service`, `pulumi_minio.S3Bucket`, ...),
so the floor imports what the program imports for those types. Only the program's argument
handling is skipped: the recorded inputs go straight to the registration the class would make.
What is left is what the SDK itself costs for that work; the program's time beyond it is its own logic.

Like the program, the floor first imports what its registrations need (and nothing else: a module
the program imports for its own logic is the program's cost), then makes the program's process-level
settings through the same call (`components.process.settle_after_imports`), then registers.
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
    classes = [_class(record) for record in records]  # imports every SDK module the registrations need, as the program's imports do
    settle_after_imports()
    created: dict[str, pulumi.Resource] = {}
    for record, cls in zip(records, classes):
        opts = pulumi.ResourceOptions(parent=created.get(record["parent"] or ""), provider=created.get(record["provider"] or ""))
        type_, name, inputs = record["type"], record["name"], record["inputs"]
        if record.get("read"):
            resource: pulumi.Resource = pulumi.StackReference(name, stack_name=inputs["name"], opts=opts)
        elif cls is None:
            resource = pulumi.ComponentResource(type_, name, None, opts)
        else:
            resource = cls.__new__(cls)
            __init__(resource, type_.rsplit(":", 1)[1] if type_.startswith("pulumi:providers:") else type_, name, inputs, opts)
        created[record["urn"]] = resource


def _class(record: dict[str, Any]) -> type | None:
    """The SDK class a record is registered as; None for a stack read or a component."""
    type_ = record["type"]
    if record.get("read"):
        return None
    if type_.startswith("pulumi:providers:"):
        return getattr(importlib.import_module(PROVIDER_PACKAGES[type_.rsplit(":", 1)[1]]), "Provider", pulumi.ProviderResource)
    if record["custom"]:
        module, name = _sdk_class(type_)
        return getattr(module, name, pulumi.CustomResource)
    return None


def __init__(resource: Any, type_: str, name: str, inputs: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
    """Stands in for the provider class's constructor, which the real program goes through.

    The SDK records the stack of every registration made by a resource class constructor and finds
    it by counting `__init__` frames; calling the base class directly would skip that work and make
    the floor cheaper than any real program.
    """
    base = pulumi.ProviderResource if isinstance(resource, pulumi.ProviderResource) else pulumi.CustomResource
    base.__init__(resource, type_, name, _args(type(resource), inputs), opts)


def _args(cls: type, inputs: dict[str, Any]) -> Any:
    """The inputs as the class's own args object (`ServiceInitArgs`, `S3BucketArgs`), as its constructor passes them."""
    module = sys.modules[cls.__module__]
    args_cls = getattr(module, f"{cls.__name__}InitArgs", None) or getattr(module, f"{cls.__name__}Args", None)
    if args_cls is None or not _types.is_input_type(args_cls):
        return inputs
    py_names = {wire: py for py, wire in _types.input_type_py_to_pulumi_names(args_cls).items()}
    args = args_cls.__new__(args_cls)
    for key, value in inputs.items():
        args.__dict__[py_names.get(key, key)] = value
    return args


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
