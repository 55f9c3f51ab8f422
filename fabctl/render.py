"""The one renderer shared by `fabctl` and the tests (DESIGN section 5.1).

`render()` runs the Pulumi program for a stack under the SDK's mocks in a fresh subprocess (so that
Pulumi's global runtime state never leaks between renders) and returns a `Plan`: every resource with
its cluster, inputs, dependencies and options, plus the stack outputs.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a site is parsed)
from components.config import PROJECT, ConfigError, parse_site
from components.config.fields import CONFIG_KEY
from components.config.load import missing_secrets, required_secrets, site_of_config
from fabctl import runs
from fabctl.stackfile import SITE_KEY, STAND_IN, pulumi_config_env, read_stack_config, stack_file

FABCTL_HOME = runs.FABCTL_HOME
PROJECT_DIR = FABCTL_HOME
"""The checkout whose program and stack files are rendered unless another is named."""
K8S_PROVIDER_TYPE = "pulumi:providers:kubernetes"
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
MOCK_ORGANIZATION = "organization"
"""The organization a render runs in: what `pulumi.get_organization()` answers on a self-managed backend."""


class RenderError(Exception):
    """The program did not render. `user` is True for a user mistake (a config error), False for a crash."""

    def __init__(self, message: str, user: bool):
        super().__init__(message)
        self.user = user


@dataclass(frozen=True)
class RenderStats:
    """What one render cost: the child process's wall time, CPU time and peak resident memory."""

    seconds: float
    peak_rss_mib: float
    cpu_seconds: float = 0.0


SITE_WIDE = "(site-wide)"
"""How plan views (the plan tree, the written releases, the report) name what has no provider: applied by the stack."""


@dataclass
class Plan:
    """Everything a render registered, in registration order."""

    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any] = field(default_factory=dict)
    stats: RenderStats | None = None
    config: dict[str, str] = field(default_factory=dict)
    """The stack's config as the Pulumi CLI hands it to the program and to a policy pack (`PULUMI_CONFIG`: every value
    a string, objects as JSON). A copy of a plan that keeps its stack keeps this too: `dataclasses.replace(plan, ...)`."""
    stand_ins: tuple[str, ...] = ()
    """The secret config keys the site needs and its stack file does not set, rendered as a redacted stand-in
    (`with_secret_stand_ins`); a real `pulumi preview` stops on each until it is set."""

    @cached_property
    def by_urn(self) -> dict[str, dict[str, Any]]:
        return {r["urn"]: r for r in self.resources}

    @cached_property
    def cluster_of_provider(self) -> dict[str, str]:
        """Kubernetes provider URN -> provider logical name (`<site>-<cluster>`)."""
        return {r["urn"]: r["name"] for r in self.resources if r["type"] == K8S_PROVIDER_TYPE}

    @cached_property
    def provider_names(self) -> dict[str, str]:
        """Any provider URN -> its logical name (`site-a-gpu`, `site-a-minio`, ...)."""
        return {r["urn"]: r["name"] for r in self.resources if r["type"].startswith("pulumi:providers:")}

    def cluster(self, resource: dict[str, Any]) -> str | None:
        """The cluster (kubernetes provider name) a resource is applied to, if any."""
        return self.cluster_of_provider.get(resource.get("provider") or "")

    def target(self, resource: dict[str, Any]) -> str | None:
        """What a resource is applied to: a cluster, the object store or Keycloak (by provider name)."""
        return self.provider_names.get(resource.get("provider") or "")

    def waits_for(self, resource: dict[str, Any]) -> set[str]:
        """URNs the engine creates before `resource`: its dependencies (the SDK expands a component into
        its children) and property dependencies, transitively."""
        seen: set[str] = set()
        todo = [resource]
        while todo:
            current = todo.pop()
            direct = {*current.get("dependencies", []), *(u for urns in current.get("property_dependencies", {}).values() for u in urns)}
            for urn in direct - seen:
                seen.add(urn)
                if urn in self.by_urn:
                    todo.append(self.by_urn[urn])
        return seen

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_]

    def component(self, resource: dict[str, Any]) -> dict[str, Any] | None:
        """The top-level component a resource belongs to (its outermost non-stack ancestor)."""
        top = None
        parent = resource.get("parent")
        while parent in self.by_urn:
            top = self.by_urn[parent]
            parent = top.get("parent")
        return top

    def manifests(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(cluster, Kubernetes object, resource) for every Kubernetes object the program applies."""
        out = []
        for r in self.resources:
            if r["custom"] and r["type"].startswith("kubernetes:") and r["type"] != HELM_RELEASE_TYPE:
                inputs = r["inputs"]
                if "apiVersion" in inputs and "kind" in inputs:
                    out.append((self.cluster(r) or "", inputs, r))
        return out

    def objects(self, kind: str, cluster: str | None = None) -> list[dict[str, Any]]:
        return [obj for c, obj, _ in self.manifests() if obj["kind"] == kind and (cluster is None or c == cluster)]

    def to_json(self) -> dict[str, Any]:
        return {"project": PROJECT, "stack": self.stack, "resources": self.resources, "outputs": self.outputs}


def render_config(stack: str, config: dict[str, Any], project_dir: Path = PROJECT_DIR,
                  stack_references: dict[str, dict[str, Any]] | None = None, program: Path | None = None,
                  reveal_outputs: bool = False) -> Plan:
    """Render the program with the given stack `config:` mapping (keys as in a stack file).

    `stack_references` supplies the outputs of other stacks (by `org/project/stack` name) that the
    program reads through `pulumi.StackReference`; a stack not given has no outputs, as before its first
    update. Left out, the linked federated sites whose stack files are in `project_dir` are rendered for
    their outputs (see `linked_stack_outputs`). `program` runs another script in place of the project's
    `__main__.py` (the benchmarks' SDK floor). `reveal_outputs` keeps secret outputs (mock values) readable.
    The returned plan's `stats` say what the render cost (wall time, CPU time, peak memory).
    """
    env, secret_keys = pulumi_config_env(config)
    refused = _refusal(env, secret_keys, project_dir) if program is None else []  # another program decides for itself
    if refused:
        raise RenderError("\n".join(refused), user=True)
    if stack_references is None:
        stack_references = linked_stack_outputs(config, project_dir)
    request = {"project_dir": str(project_dir), "project": PROJECT, "stack": stack, "config": env, "secret_keys": secret_keys,
               "stack_references": stack_references, "program": str(program) if program else None,
               "organization": MOCK_ORGANIZATION, "reveal_outputs": reveal_outputs}
    done = runs.run(request)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RenderError(f"the renderer failed (exit {done.returncode}):\n{done.stderr.strip()}", user=False) from None
    seconds = done.seconds
    seed = runs.registration_order_seed()
    if seed is not None:
        result["resources"] = runs.perturbed(result["resources"], seed)
    stats = RenderStats(seconds=seconds, peak_rss_mib=result.get("peak_rss_kib", 0) / 1024, cpu_seconds=result.get("cpu_seconds", 0.0))
    error = result.get("error")
    if error:
        raise RenderError(error["message"], user=error["kind"] == "user")
    return Plan(stack=stack, resources=result["resources"], outputs=result["outputs"], stats=stats, config=env)

def _refusal(env: dict[str, str], secret_keys: list[str], project_dir: Path) -> list[str]:
    """The lines the program would refuse the config with before registering anything (its config keys, the site object,
    a missing secret), found here without starting it: the same functions decide (`site_of_config`, `missing_secrets`).
    Only for a program that is this checkout's, whose config model this process has imported; another program (a git
    ref's, a changed copy) decides for itself in its render."""
    if not runs.same_program(project_dir):
        return []
    try:
        with contextlib.chdir(project_dir):  # the config's file paths are relative to the project
            site = site_of_config(env, lambda key: key in secret_keys, env.get(f"{PROJECT}:{CONFIG_KEY}"))
    except ConfigError as exc:
        return exc.lines
    return missing_secrets(site, lambda key: f"{PROJECT}:{key}" in env)


def linked_stack_outputs(config: dict[str, Any], project_dir: Path) -> dict[str, dict[str, Any]]:
    """Outputs of the federated sites a stack's config links, from their own stack files in `project_dir`.

    Each linked site is rendered as on its own first deployment (nothing linked: what a site exports to
    others does not depend on what it reads from them), with its secret outputs kept as mock values.
    A site without a stack file here has no outputs, so the program reports it as not deployed.
    """
    try:
        with contextlib.chdir(project_dir):  # the config's file paths are relative to the project
            federation = parse_site(config.get(SITE_KEY)).federation
    except ConfigError:
        return {}  # the render itself reports the config's problems
    outputs: dict[str, dict[str, Any]] = {}
    for other in federation.linked:
        path = stack_file(project_dir, other)
        if not path.is_file():
            continue
        peer_config, _ = with_secret_stand_ins(copy.deepcopy(read_stack_config(path)), project_dir)
        peer_site = peer_config.get(SITE_KEY)
        peer_federation = peer_site.get("federation") if isinstance(peer_site, dict) else None
        if isinstance(peer_federation, dict):  # a broken peer is refused by its own render below
            peer_federation.pop("linked", None)
        try:
            plan = render_config(other, peer_config, project_dir, stack_references={}, reveal_outputs=True)
        except RenderError:
            continue
        outputs[f"{federation.organization or MOCK_ORGANIZATION}/{PROJECT}/{other}"] = plan.outputs
    return outputs


def with_secret_stand_ins(config: dict[str, Any], project_dir: Path = PROJECT_DIR) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The stack `config:` with a stand-in for each secret config key the site needs and the config does not set, and
    those keys.

    Secrets are set per stack with `pulumi config set --secret` and encrypted with the stack's own key, so a stack file
    in Git cannot carry them for an offline render (ciphertext of another key, or a fake one, stops a real preview): the
    render takes them as set and redacted, which is all it can know of a set secret. A config the program refuses gets
    none; its render says why.
    """
    try:
        with contextlib.chdir(project_dir):  # the config's file paths are relative to the project
            site = parse_site(config.get(SITE_KEY))
    except ConfigError:
        return config, ()
    missing = tuple(key for key in required_secrets(site) if key not in config and f"{PROJECT}:{key}" not in config)
    return {**config, **{key: {"secure": STAND_IN} for key in missing}}, missing


def render(stack: str, project_dir: Path = PROJECT_DIR, config: dict[str, Any] | None = None) -> Plan:
    """Render `Pulumi.<stack>.yaml` of the project (or `config` in its place), with stand-ins for the secrets it does not
    set (`with_secret_stand_ins`)."""
    full, stand_ins = with_secret_stand_ins(read_stack_config(stack_file(project_dir, stack)) if config is None else config, project_dir)
    return dataclasses.replace(render_config(stack, full, project_dir), stand_ins=stand_ins)
