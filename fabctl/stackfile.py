"""Reading `Pulumi.<stack>.yaml` the way the Pulumi CLI hands it to the program (as PULUMI_CONFIG).

Whatever an operator writes in the file ends in one line per problem, never a traceback: bytes that are not UTF-8,
YAML that does not parse, tags and keys that are not plain data, aliases that expand without end, a top level or a
`config:` that is not a mapping, keys under another project's namespace, credentials in plain text. The YAML is read
as the Pulumi CLI reads it (YAML 1.2 scalars, as Go's yaml.v3 does): `yes`, `on` and `2024-01-01` are text, not a
boolean or a date, so that the offline render sees the values `pulumi up` would.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from components.config import CONFIG_KEY, PROJECT, config_key_problems

SITE_KEY = f"{PROJECT}:{CONFIG_KEY}"
STACK_FILE_KEYS = ("config", "encryptedkey", "encryptionsalt", "environment", "secretsprovider")
"""The top-level keys of a stack file that the Pulumi CLI reads."""
MAX_VALUES = 100_000
"""More values than any site needs (a full site has a few hundred): YAML aliases that expand past this are refused."""
MAX_DEPTH = 64
"""Deeper nesting than any site needs (a site is about 8 deep)."""


class StackFileError(Exception):
    """A stack file whose content cannot be used; each line of the message is one problem for the user."""


class NoStackFile(StackFileError):
    """No stack file to read: a usage mistake (the wrong stack name or folder), not a config one."""


_YAML = "tag:yaml.org,2002:"
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_TAGS = {f"{_YAML}{name}" for name in ("null", "bool", "int", "float", "str", "seq", "map")}


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader reading YAML as the Pulumi CLI does: plain data only, YAML 1.2 scalars, no duplicate keys, and every
    value that cannot be read (`!!int 3.5`, `!!binary`) a one-line YAML error at its line."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    yaml_constructors = {tag: c for tag, c in yaml.SafeLoader.yaml_constructors.items() if tag in _PLAIN_TAGS}

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, LookupError, AttributeError, OverflowError):  # PyYAML's constructors on bad scalars
            tag = node.tag.replace(_YAML, "!!")
            raise ConstructorError(None, None, f"{node.value!r} is not a valid {tag} value; fix the value or remove the tag",
                                   node.start_mark) from None

    def construct_undefined(self, node: yaml.Node) -> Any:
        raise ConstructorError(None, None, f"the tag {node.tag.replace(_YAML, '!!')} is not allowed in a stack file; "
                               "write the value as plain text, a number, a list or a mapping", node.start_mark)


# YAML 1.2's core schema, as yaml.v3 resolves plain scalars: only true/false are booleans; no sexagesimal numbers,
# no timestamps, no `=` value key (PyYAML's YAML 1.1 would read `on` as true, `1:30` as 90 and `2024-01-01` as a date).
for _tag, _pattern, _first in (
    ("null", r"~|null|Null|NULL|", "~nN"),
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?(?:0b[0-1_]*[0-1][0-1_]*|0x[0-9a-fA-F_]*[0-9a-fA-F][0-9a-fA-F_]*|0[0-7_]+|0|[1-9][0-9_]*)", "-+0123456789"),
    ("float", r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+|[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?)"
              r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", "-+0123456789."),
    ("merge", r"<<", "<"),
):
    _StrictLoader.add_implicit_resolver(f"{_YAML}{_tag}", re.compile(f"^(?:{_pattern})$"), [*_first])
_StrictLoader.add_implicit_resolver(f"{_YAML}null", re.compile("^$"), [""])  # an empty value


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag == f"{_YAML}merge":  # `<<: *defaults`: its keys may be overridden, so they are no duplicates
            continue
        key = loader.construct_object(key_node, deep=True)
        mark = key_node.start_mark
        if not isinstance(key, str):
            raise StackFileError(f"{mark.name}:{mark.line + 1}: the key {_describe(key)} is not text; keys are names: "
                                 f"quote it or rename it")
        if key in seen:
            raise StackFileError(f"{mark.name}:{mark.line + 1}: duplicate key {key!r}; each key may appear once")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(f"{_YAML}map", _mapping)
_StrictLoader.add_constructor(None, _StrictLoader.construct_undefined)


def _describe(value: Any) -> str:
    """A YAML value as the operator wrote it, and what YAML made of it."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return f"{value} (a number)"
    return f"{json.dumps(value, default=str)} (a {'list' if isinstance(value, list) else 'mapping'})"


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), "nothing" if value is None else type(value).__name__)


def stack_names(project_dir: Path) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def stack_file(project_dir: Path, stack: str) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"


def read_stack_config(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a stack file, every key in its full `namespace:name` form (a key without a namespace
    is the project's, as for the Pulumi CLI); raises StackFileError with one line per problem."""
    if not path.is_file():
        stacks = ", ".join(stack_names(path.parent)) or "none"
        raise NoStackFile(f"no stack file {path.name} in {path.parent}; stacks: {stacks}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NoStackFile(f"{path.name}: cannot be read ({exc.strerror})") from None
    doc = _load(path.name, _text(path.name, data))
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise StackFileError(f"{path.name}: the file holds {_kind(doc)}, not a mapping; a stack file is a mapping that starts "
                             "with config:")
    for key in doc:
        if ":" in key:
            raise StackFileError(f"{path.name}: {key} is at the top level; indent it under config:")
        if key not in STACK_FILE_KEYS:
            raise StackFileError(f"{path.name}: unknown top-level key {key!r}; a stack file has {', '.join(STACK_FILE_KEYS)}")
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name}: config: must be a mapping of keys such as {SITE_KEY} (got {_kind(config)})")
    budget = [MAX_VALUES]
    full: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, value in config.items():
        name = _full_key(path.name, key)
        if name in full:
            raise StackFileError(f"{path.name}: config: {written[name]} and {key} are the same key (a key without a namespace "
                                 f"is {PROJECT}'s); keep one of them")
        _check_plain(path.name, name, value, name, budget, [])
        full[name], written[name] = value, key
    env, secret_keys = pulumi_config_env(full)
    problems = [*_secure_problems(full), *config_key_problems(env, set(secret_keys).__contains__)]
    if problems:
        raise StackFileError("\n".join(problems))
    return full


def _text(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")  # the Pulumi CLI skips a byte-order mark too
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise StackFileError(f"{name}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                             "save the file as UTF-8") from None


def _load(name: str, text: str) -> Any:
    loader = None
    try:
        loader = _StrictLoader(text)  # reads the whole text: a control character fails here
        loader.name = name  # the marks of every later error name the file
        return loader.get_single_data()
    except ConstructorError as exc:
        problem = _one_line(exc.problem)
        if problem.startswith("found unconstructable recursive node"):  # a mapping holding an alias of itself
            problem = "a value contains itself through a YAML alias; write the value out"
        raise StackFileError(f"{name}:{_line(exc)}: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a control character: it has a position, not a mark
        line = text[: exc.position].count("\n") + 1
        raise StackFileError(f"{name}:{line}: not valid YAML (the control character U+{exc.character:04X} is not allowed; "
                             "remove it)") from None
    except yaml.YAMLError as exc:
        where = f"{name}:{_line(exc)}" if getattr(exc, "problem_mark", None) else name
        raise StackFileError(f"{where}: not valid YAML ({_one_line(getattr(exc, 'problem', None) or str(exc))})") from None
    except RecursionError:
        raise StackFileError(f"{name}: nested more than {MAX_DEPTH} levels deep; no stack file needs that") from None
    finally:
        if loader is not None:
            loader.dispose()


def _line(exc: yaml.MarkedYAMLError) -> int:
    mark = exc.problem_mark or exc.context_mark
    return mark.line + 1 if mark else 1


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _full_key(name: str, key: str) -> str:
    """A stack file's config key as the Pulumi CLI reads it: `site` is the project's, `ns:config:key` an old spelling."""
    parts = key.split(":")
    if len(parts) == 1:
        return f"{PROJECT}:{key}"
    if len(parts) == 2:
        return key
    if len(parts) == 3 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    raise StackFileError(f"{name}: config: {key!r} is not a config key; a key is <namespace>:<name>, such as {SITE_KEY}")


def _check_plain(name: str, key: str, value: Any, where: str, budget: list[int], path: list[int]) -> None:
    """Refuse in config `key` what it cannot hold as JSON: values that contain themselves, aliases that expand past
    MAX_VALUES (counted over the whole file in `budget`), nesting past MAX_DEPTH, NaN and infinities, and text with
    lone surrogates (a `"\\ud800"` escape), which cannot be encoded."""
    budget[0] -= 1
    if budget[0] < 0:
        raise StackFileError(f"{name}: {key}: YAML aliases expand it to more than {MAX_VALUES} values; write the values out")
    if isinstance(value, float) and not math.isfinite(value):
        written = ".nan" if math.isnan(value) else f"{'-' if value < 0 else ''}.inf"
        raise StackFileError(f"{name}: {where}: {written} is not a finite number, and config reaches the program as JSON, "
                             "which has none; write a number")
    for text in (value, *value) if isinstance(value, dict) else (value,):
        if isinstance(text, str) and not text.isascii() and _SURROGATE.search(text):
            raise StackFileError(f"{name}: {where}: holds an escape of half a UTF-16 pair (\\ud800 to \\udfff), which is no "
                                 "character; write the character itself")
    if not isinstance(value, (dict, list)):
        return
    if len(path) == MAX_DEPTH:
        raise StackFileError(f"{name}: nested more than {MAX_DEPTH} levels deep; no stack file needs that")
    if id(value) in path:
        raise StackFileError(f"{name}: {where}: contains itself through a YAML alias; write the value out")
    path.append(id(value))
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for at, item in items:
        _check_plain(name, key, item, f"{where}.{at}" if isinstance(value, dict) else f"{where}[{at}]", budget, path)
    path.pop()


def _secure_problems(config: dict[str, Any]) -> list[str]:
    return [f"{key}: secure: must be the encrypted text that pulumi config set --secret writes (got {_kind(value['secure'])})"
            for key, value in config.items() if _is_secure(value) and not isinstance(value["secure"], str)]


STAND_IN = "fabctl-offline-stand-in"
"""The `secure:` text of a secret an offline render stands in for (fabctl.render.with_secret_stand_ins): never decrypted,
it renders as a redacted secret like every encrypted value."""


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def pulumi_config_env(config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Config as the CLI passes it (every value a string, objects as JSON) and the keys that are secret.

    Encrypted values (`secure:`) cannot be decrypted offline; they are rendered as a redacted secret.
    """
    env: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if _is_secure(value):
            env[full] = "[secret]"
            secret_keys.append(full)
        elif isinstance(value, str):
            env[full] = value
        else:
            env[full] = json.dumps(value)
    return env, secret_keys

