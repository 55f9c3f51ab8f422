"""Reading `Pulumi.<stack>.yaml` the way the Pulumi CLI hands it to the program (as PULUMI_CONFIG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from components.config import CONFIG_KEY, PROJECT


class StackFileError(Exception):
    """A stack file that cannot be read; the message is one line for the user."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which plain YAML loading silently overwrites."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise StackFileError(f"{mark.name}:{mark.line + 1}: duplicate key {key!r}; each key may appear once")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def stack_names(project_dir: Path) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def stack_file(project_dir: Path, stack: str) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"


def read_stack_config(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a stack file; raises StackFileError with a one-line reason."""
    if not path.is_file():
        stacks = ", ".join(stack_names(path.parent)) or "none"
        raise StackFileError(f"no stack file {path.name} in {path.parent}; stacks: {stacks}")
    try:
        doc = yaml.load(path.read_text(), Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}" if mark else path.name
        raise StackFileError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except StackFileError as exc:
        raise StackFileError(str(exc).replace("<unicode string>", path.name)) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise StackFileError(f"{path.name}: must be a mapping with a 'config:' mapping")
    return doc.get("config") or {}


def pulumi_config_env(config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Config as the CLI passes it (every value a string, objects as JSON) and the keys that are secret.

    Encrypted values (`secure:`) cannot be decrypted offline; they are rendered as a redacted secret.
    """
    env: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            env[full] = "[secret]"
            secret_keys.append(full)
        elif isinstance(value, str):
            env[full] = value
        else:
            env[full] = json.dumps(value)
    return env, secret_keys


SITE_KEY = f"{PROJECT}:{CONFIG_KEY}"
