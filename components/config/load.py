"""Loading a site stack's config: parse it, turn pydantic's errors into one line per problem, read the
secrets it needs, and the JSON Schema of the stack file (DESIGN section 4, "Config first" and "No secrets
in stack files").
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
import dataclasses
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from components.config import declared, names
from components.config.fields import CONFIG_KEY, PROJECT
from components.config.problems import SiteRuleError, key_location
from components.config.site import SiteConfig

SECRET_KEYS: tuple[str, ...] = (
    "aistorLicense", "aistorRootPassword", "servingRepoToken", "servingRepoWriteToken", "metricsRemoteWritePassword",
    "alertWebhookUrl", "registryPullSecret",
)
"""The project's config keys that hold credentials: set only with `pulumi config set --secret`, never in plain text."""
PROJECT_KEYS: tuple[str, ...] = (CONFIG_KEY, *SECRET_KEYS)
"""Every `fab-platform:` config key the program reads; Pulumi hands any other to the program, which would ignore it."""
CATALOG_PASSWORD_KEY = re.compile(r"trinoCatalogPassword-[a-z][a-z0-9_]{0,39}")
"""The secret config keys of Trino's external catalogs' passwords, one per catalog (`trinoCatalogPassword-<catalog>`)."""
_CREDENTIAL_NAME = re.compile(r"password|passwd|secret|token|licen[cs]e|credential|privatekey|apikey")
"""What the name of another namespace's config key says when its value is a credential (`minio:minioPassword`)."""


class ConfigError(Exception):
    """A site config that cannot be used; `lines` are one problem each, ready to print."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _unwrap(tp: Any) -> Any:
    """Strip Optional[...] and Annotated[...] from a field type."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        else:
            return tp


def _allowed_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The keys the model accepts at the mapping that holds `loc`'s last key."""
    tp: Any = SiteConfig
    for part in loc[:-1]:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            tp = field.annotation if field else None
        elif get_origin(tp) in (dict, list):
            tp = get_args(tp)[-1]
        else:
            return []
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return sorted(f.alias or n for n, f in tp.model_fields.items())
    return []


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        error = err.get("ctx", {}).get("error")
        if isinstance(error, SiteRuleError):
            lines += [f"{key_location(p)}: {msg}" for p, msg in error.problems]
            continue
        is_key = bool(loc) and loc[-1] == "[key]"  # pydantic's marker for a bad mapping key
        loc = loc[:-1] if is_key else loc
        where = key_location(loc)
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc)
            hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{where}: unknown key{hint}")
        elif err["type"] == "missing":
            lines.append(f"{where}: required key is missing")
        else:
            msg = str(error) if isinstance(error, ValueError) else err["msg"]
            msg = f"the key {msg}" if is_key else msg
            lines.append(f"{where}: {msg} (got {_show(err['input'])})")
    return lines


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_site(raw: Any) -> SiteConfig:
    """Validate the raw `fab-platform:site` object; raises ConfigError with one line per problem."""
    if raw is None:
        raise ConfigError([f"{PROJECT}:{CONFIG_KEY}: not set; add it to Pulumi.<stack>.yaml (see docs/configuration.md)"])
    if not isinstance(raw, Mapping):
        raise ConfigError([f"{PROJECT}:{CONFIG_KEY}: must be a mapping of site settings (got {type(raw).__name__})"])
    declared.engines()  # fails closed, naming the fix, before the components are declared (components/catalog.py)
    try:
        return SiteConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_error_lines(exc)) from None


def config_key_problems(keys: Iterable[str], is_secret: Callable[[str], bool]) -> list[str]:
    """One line per stack config key that is wrong, apart from what is inside the site object.

    `keys` are full keys (`namespace:name`), as Pulumi hands them to the program; `is_secret` tells which were given
    encrypted. A credential in plain text is refused without showing its value; a `fab-platform:` key the program does
    not read, or a project key under another namespace, is refused because Pulumi would pass it on and nothing read it.
    Other namespaces' keys (the providers', `pulumi:`) are allowed, as long as a credential among them is encrypted.
    """
    lines = []
    known = ", ".join(f"{PROJECT}:{name}" for name in sorted(PROJECT_KEYS))
    for key in sorted(keys):
        namespace, _, name = key.partition(":")
        if namespace == PROJECT:
            if CATALOG_PASSWORD_KEY.fullmatch(name):
                if not is_secret(key):
                    lines.append(_plaintext(key, name))
            elif name not in PROJECT_KEYS:
                close = difflib.get_close_matches(name, PROJECT_KEYS, n=1)
                hint = f" (did you mean {PROJECT}:{close[0]}?)" if close else ""
                lines.append(f"{key}: unknown config key of {PROJECT}{hint}; known keys: {known}")
            elif name in SECRET_KEYS and not is_secret(key):
                lines.append(_plaintext(key, name))
        elif name in PROJECT_KEYS or difflib.SequenceMatcher(None, namespace.lower(), PROJECT).ratio() >= 0.8:
            lines.append(f"{key}: {namespace!r} is not this project's namespace; write the key as {PROJECT}:{name}")
        elif _CREDENTIAL_NAME.search(re.sub(r"[-_]", "", name.lower())) and not is_secret(key):
            lines.append(_plaintext(key, key))
    return lines


def _plaintext(key: str, command_key: str) -> str:
    return (f"{key}: a credential written in plain text (value not shown); delete it from Pulumi.<stack>.yaml, rotate it "
            f"if the file was ever committed, and set it encrypted with: pulumi config set --secret {command_key} <value>")


def load_site() -> SiteConfig:
    """Read and validate `fab-platform:site` from the running stack's config, after the stack's other config keys.

    A user mistake ends the program with `pulumi.RunError`: the Pulumi CLI prints its lines and no traceback.
    """
    import pulumi

    try:
        return site_of_config(pulumi.runtime.get_config_env(), pulumi.runtime.is_config_secret, pulumi.Config(PROJECT).get(CONFIG_KEY))
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None


def site_of_config(keys: Iterable[str], is_secret: Callable[[str], bool], site_text: str | None) -> SiteConfig:
    """The site of a stack's config as the Pulumi CLI hands it to the program: its full keys, which of them are secret,
    and `fab-platform:site` as text (structured config arrives as JSON). Raises ConfigError with one line per problem:
    the stack's other keys first (`config_key_problems`), then the site object's. The program (`load_site`) and
    `fabctl`, which refuses a config before it starts a render, decide with this one function."""
    problems = config_key_problems(keys, is_secret)
    if problems:
        raise ConfigError(problems)
    raw = None
    if site_text is not None:
        try:
            raw = json.loads(site_text)
        except ValueError:
            from pulumi import ConfigTypeError  # what pulumi.Config.get_object raises, for its message

            error = ConfigTypeError(f"{PROJECT}:{CONFIG_KEY}", site_text, "JSON object")
            raise ConfigError([f"{PROJECT}:{CONFIG_KEY}: not a valid structured value ({error})"]) from None
    return parse_site(raw)


@dataclass(frozen=True)
class SiteSecrets:
    """Secrets the program needs beyond the stack file, from `pulumi config set --secret`."""

    aistor_license: Any = None
    aistor_root_password: Any = None
    serving_repo_token: Any = None
    """The token Argo CD reads the serving repository with."""
    serving_repo_write_token: Any = None
    """The token the serving-loop DAG pushes its serving changes with (optional: without it the DAG prints them)."""
    metrics_remote_write_password: Any = None
    """The password of `observability.remote_write.username` at the site's metrics store."""
    alert_webhook_url: Any = None
    """Where Alertmanager sends alerts (the site's alert hub): a URL that often carries a token."""
    registry_pull_secret: Any = None
    """The Docker config.json (`{"auths": {...}}`) of the site registry's pull Secret (`registry.pull_secret`)."""
    catalog_passwords: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Trino's external catalog -> the password of its account (`trinoCatalogPassword-<catalog>`)."""


def required_secrets(site: SiteConfig) -> dict[str, str]:
    """Secret config key -> why the site needs it."""
    required = {}
    if site.storage.object_store.install:
        required.update(dict.fromkeys(("aistorLicense", "aistorRootPassword"), "storage.object_store.install is true"))
    argocd = site.compute.argocd
    if argocd.enabled and argocd.serving_repo is not None:
        required["servingRepoToken"] = "compute.argocd.enabled is true with a serving_repo"
    observability = site.observability
    if observability is not None and observability.metrics == "remote-write" and observability.remote_write is not None \
            and observability.remote_write.username is not None:
        required["metricsRemoteWritePassword"] = "observability.remote_write.username is set"
    if site.registry is not None and site.registry.pull_secret is not None:
        required["registryPullSecret"] = "registry.pull_secret is set"
    if site.compute.trino.enabled:
        for catalog in sorted(site.compute.trino.external_catalogs):
            required[names.external_catalog_password_key(catalog)] = f"compute.trino.external_catalogs.{catalog} is set"
    return required


def missing_secrets(site: SiteConfig, is_set: Callable[[str], bool]) -> list[str]:
    """One line per secret config key the site needs and the stack does not set, with the command that sets it."""
    required = required_secrets(site)
    return [f"{PROJECT}:{key}: required because {why}; set it with: pulumi config set --secret {key} <value>"
            for key, why in required.items() if not is_set(key)]


def load_secrets(site: SiteConfig) -> SiteSecrets:
    """The secret config values the site needs; a missing one ends the program with the command that sets it."""
    import pulumi

    required = required_secrets(site)
    config = pulumi.Config(PROJECT)
    values = {key: config.get_secret(key) for key in required}
    missing = missing_secrets(site, lambda key: values[key] is not None)
    if missing:
        raise pulumi.RunError("\n".join(missing))
    # Optional: only the serving-loop DAG writes to the serving repository, Argo CD only reads it.
    write_token = config.get_secret("servingRepoWriteToken") if "servingRepoToken" in required else None
    # Optional: without a webhook, alerts stay in Alertmanager and Grafana.
    webhook = config.get_secret("alertWebhookUrl") if site.observability is not None else None
    return SiteSecrets(aistor_license=values.get("aistorLicense"), aistor_root_password=values.get("aistorRootPassword"),
                       serving_repo_token=values.get("servingRepoToken"), serving_repo_write_token=write_token,
                       metrics_remote_write_password=values.get("metricsRemoteWritePassword"), alert_webhook_url=webhook,
                       registry_pull_secret=values.get("registryPullSecret"),
                       catalog_passwords={catalog: values[names.external_catalog_password_key(catalog)]
                                          for catalog in sorted(site.compute.trino.external_catalogs)
                                          if names.external_catalog_password_key(catalog) in values})


def _secret_schema(name: str) -> dict[str, Any]:
    """A secret config key as `pulumi config set --secret` writes it in a stack file: `{secure: <ciphertext>}`."""
    return {
        "description": f"Encrypted: set with pulumi config set --secret {name} <value>, never written in plain text.",
        "type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"], "additionalProperties": False,
    }


def stack_file_schema() -> dict[str, Any]:
    """JSON Schema of a `Pulumi.<stack>.yaml` file whose `fab-platform:site` follows SiteConfig."""
    declared.engines()  # SiteConfig's engine sections are complete once the components are declared
    site = SiteConfig.model_json_schema(by_alias=True)
    defs = site.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fab-platform stack file",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {f"{PROJECT}:{CONFIG_KEY}": site, **{f"{PROJECT}:{name}": _secret_schema(name) for name in SECRET_KEYS}},
                "patternProperties": {
                    f"^{PROJECT}:{CATALOG_PASSWORD_KEY.pattern}$": _secret_schema("trinoCatalogPassword-<catalog>"),
                },
                "required": [f"{PROJECT}:{CONFIG_KEY}"],
            },
        },
        "required": ["config"],
        "$defs": defs,
    }
