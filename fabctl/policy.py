"""Run the CrossGuard policy pack the way the Pulumi CLI does (DESIGN section 5.3).

The pack is started as `python -u -m pulumi.policy 127.0.0.1:0 .` in `policies/`, with the interpreter of
the virtualenv its PulumiPolicy.yaml names and the stack's config in its environment (as the CLI starts it);
it prints the port of its Analyzer gRPC service, which gets every resource of a render (`Analyze` per
resource, then `AnalyzeStack` once). `fabctl plan`, CI and the tests share this one runner.

`analyze_in_process` runs the same policies on the same requests in this process, for the test suite's many analyses
of small changes: the policy SDK's servicer deserializes the whole stack again for each of its stack policies (47 of
them), which is most of an analysis; here each resource is deserialized once, by the SDK's own functions, and every
policy gets it. Its results are the gRPC service's (the tests compare both on whole stacks), not a model of them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.config import PROJECT
from fabctl.render import FABCTL_HOME, MOCK_ORGANIZATION, Plan

POLICIES_DIR = FABCTL_HOME / "policies"
STARTUP_SECONDS = 60


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    message: str
    urn: str

    @property
    def mandatory(self) -> bool:
        return self.level == "mandatory"


class PolicyPackError(Exception):
    """The pack could not be started or answered with an error (a crash is a finding, never a pass)."""


def pack_python(policies_dir: Path = POLICIES_DIR) -> Path:
    """The interpreter the Pulumi CLI runs the pack with: `bin/python` of the virtualenv its PulumiPolicy.yaml names,
    relative to the pack's folder (the CLI installs nothing for a local pack)."""
    project = yaml.safe_load((policies_dir / "PulumiPolicy.yaml").read_text())
    virtualenv = ((project.get("runtime") or {}).get("options") or {}).get("virtualenv")
    if not virtualenv:
        raise PolicyPackError(f"{policies_dir / 'PulumiPolicy.yaml'} names no virtualenv; the CLI would run the pack with no dependencies")
    python = (policies_dir / virtualenv).resolve() / "bin" / "python"
    if not python.is_file():
        raise PolicyPackError(f"the policy pack's virtualenv {(policies_dir / virtualenv).resolve()} does not exist; create it with: make setup")
    return python


def pack_environment(plan: Plan) -> dict[str, str]:
    """What the Pulumi CLI adds to a policy pack's environment when it previews a stack (`constructEnv` in
    sdk/go/common/resource/plugin/analyzer_plugin.go): the stack's config as PULUMI_CONFIG (left out when the stack has
    none), the organization, project and stack, and that this is a preview. The policy SDK hands the config to the
    pack's `pulumi.Config` (`_configure_runtime_settings`), which is how rules read the stack's own allow-lists."""
    env = {"PULUMI_ORGANIZATION": MOCK_ORGANIZATION, "PULUMI_PROJECT": PROJECT, "PULUMI_STACK": plan.stack, "PULUMI_DRY_RUN": "true"}
    if plan.config:
        env["PULUMI_CONFIG"] = json.dumps(plan.config)
    return env


@contextmanager
def started_pack(policies_dir: Path = POLICIES_DIR, environment: Mapping[str, str] | None = None) -> Iterator[Any]:
    """One started policy pack and a stub of its Analyzer service, run as the CLI runs it: in the pack's virtualenv, with
    `environment` (a stack's, from `pack_environment`) added to this process's environment; none for a pack asked
    about itself only (`pulumi policy publish` starts it so)."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    env = {key: value for key, value in os.environ.items() if key not in _STACK_VARIABLES}
    proc = subprocess.Popen(
        [str(pack_python(policies_dir)), "-u", "-m", "pulumi.policy", "127.0.0.1:0", "."],
        cwd=policies_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, **(environment or {})},
    )
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        if not line.isdigit():
            proc.kill()
            raise PolicyPackError(f"the policy pack did not start: {line} {proc.stderr.read() if proc.stderr else ''}".strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(channel).result(timeout=STARTUP_SECONDS)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        proc.kill()
        proc.wait()


_STACK_VARIABLES = ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS", "PULUMI_ORGANIZATION", "PULUMI_PROJECT", "PULUMI_STACK",
                    "PULUMI_DRY_RUN")
"""A stack's variables, never inherited from the caller: a pack sees only the stack it is started for."""


class PolicyPacks:
    """The policy pack started for each stack analyzed, as the CLI starts it for the stack it previews: a pack reads the
    stack's config when it starts, so renders of different stacks (or configs) get different processes; a render of a
    stack analyzed before reuses that stack's pack. Every pack stops when the `analyzer()` block ends."""

    def __init__(self, policies_dir: Path, stack: ExitStack):
        self._policies_dir, self._stack = policies_dir, stack
        self._started: dict[str, Any] = {}

    def _pack(self, environment: dict[str, str]) -> Any:
        key = json.dumps(environment, sort_keys=True)
        if key not in self._started:
            self._started[key] = self._stack.enter_context(started_pack(self._policies_dir, environment))
        return self._started[key]

    def for_plan(self, plan: Plan) -> Any:
        """The Analyzer stub of the pack started for `plan`'s stack and config."""
        return self._pack(pack_environment(plan))

    def GetAnalyzerInfo(self, request: Any) -> Any:
        """The pack's description and rules, from a pack started without a stack."""
        return self._pack({}).GetAnalyzerInfo(request)


@contextmanager
def analyzer(policies_dir: Path = POLICIES_DIR) -> Iterator[PolicyPacks]:
    """Policy packs started on demand, one per stack analyzed (`analyze_with`), all stopped when the block ends."""
    with ExitStack() as stack:
        yield PolicyPacks(policies_dir, stack)


_LEVELS = {0: "advisory", 1: "mandatory", 2: "disabled", 3: "remediate"}


def _as_engine_sends(value: Any) -> Any:
    """The render's `[unknown]` placeholders as the engine's sentinel for a value that can't be known during preview."""
    from pulumi.runtime.rpc import UNKNOWN

    from fabctl._mockrun import UNKNOWN_VALUE

    if isinstance(value, dict):
        return {k: _as_engine_sends(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_engine_sends(v) for v in value]
    return UNKNOWN if value == UNKNOWN_VALUE else value


def _resources(plan: Plan) -> list[Any]:
    from google.protobuf import json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2

    by_urn = plan.by_urn
    out = []
    for record in plan.resources:
        properties = struct_pb2.Struct()
        json_format.ParseDict(_as_engine_sends(record["inputs"]), properties)
        provider = None
        if record.get("provider") in by_urn:
            p = by_urn[record["provider"]]
            provider_props = struct_pb2.Struct()
            json_format.ParseDict(p["inputs"], provider_props)
            provider = analyzer_pb2.AnalyzerProviderResource(type=p["type"], properties=provider_props, urn=p["urn"], name=p["name"])
        out.append(
            analyzer_pb2.AnalyzerResource(
                type=record["type"],
                properties=properties,
                urn=record["urn"],
                name=record["name"],
                options=analyzer_pb2.AnalyzerResourceOptions(
                    protect=record["protect"], parent=record.get("parent") or "",
                    deleteBeforeReplace=record.get("delete_before_replace", False),
                    additionalSecretOutputs=record.get("additional_secret_outputs", []),
                ),
                provider=provider,
                parent=record.get("parent") or "",
                dependencies=record.get("dependencies", []),
                propertyDependencies={
                    key: analyzer_pb2.AnalyzerPropertyDependencies(urns=urns)
                    for key, urns in (record.get("property_dependencies") or {}).items()
                },
            )
        )
    return out


def _violations(response: Any) -> list[Violation]:
    return [
        Violation(policy=d.policyName, level=_LEVELS.get(d.enforcementLevel, str(d.enforcementLevel)), message=d.message, urn=d.urn)
        for d in response.diagnostics
    ]


def analyze_with(packs: PolicyPacks, plan: Plan) -> list[Violation]:
    """Every violation the pack started for the render's stack reports: per resource, then for the whole stack."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2

    stub = packs.for_plan(plan)
    resources = _resources(plan)
    found: list[Violation] = []
    try:
        for r in resources:
            request = analyzer_pb2.AnalyzeRequest(
                type=r.type, properties=r.properties, urn=r.urn, name=r.name, options=r.options, provider=r.provider
            )
            found += [v if v.urn else Violation(v.policy, v.level, v.message, r.urn) for v in _violations(stub.Analyze(request))]
        found += _violations(stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources)))
    except grpc.RpcError as exc:
        raise PolicyPackError(f"the policy pack failed: {exc.details()}") from None
    return sorted(found, key=lambda v: (not v.mandatory, v.policy, v.urn))


def analyze(plan: Plan, policies_dir: Path = POLICIES_DIR) -> list[Violation]:
    """Start the pack, analyze one render, stop the pack."""
    with analyzer(policies_dir) as packs:
        return analyze_with(packs, plan)


def analyze_counted(plan: Plan, policies_dir: Path = POLICIES_DIR) -> tuple[list[Violation], int]:
    """The violations of one render, and how many policies the pack ran on it."""
    from google.protobuf import empty_pb2

    with analyzer(policies_dir) as packs:
        return analyze_with(packs, plan), len(packs.for_plan(plan).GetAnalyzerInfo(empty_pb2.Empty()).policies)


@dataclass(frozen=True)
class _InProcessPack:
    """The pack's policies in this process, with the servicer the policy SDK would build for them (`PolicyPack` makes it
    with its name, version 0.0.1 and the advisory default level); its helpers turn requests into policy arguments."""

    name: str
    policies: tuple[Any, ...]
    servicer: Any


@functools.cache
def _in_process_pack(policies_dir: Path) -> _InProcessPack:
    import sys

    from pulumi_policy.policy import EnforcementLevel, _PolicyAnalyzerServicer

    if str(policies_dir) not in sys.path:
        sys.path.insert(0, str(policies_dir))
    import rules

    if Path(rules.__file__).resolve().parent != (policies_dir / "rules").resolve():
        raise PolicyPackError(f"the rules imported here are {rules.__file__}, not {policies_dir / 'rules'}")
    servicer = _PolicyAnalyzerServicer(rules.PACK_NAME, "0.0.1", list(rules.POLICIES), EnforcementLevel.ADVISORY)
    return _InProcessPack(rules.PACK_NAME, tuple(rules.POLICIES), servicer)


def analyze_in_process(plan: Plan, policies_dir: Path = POLICIES_DIR, only: set[str] | None = None) -> list[Violation]:
    """What `analyze_with` reports for a render, with the pack's policies run in this process (see the module's doc):
    per resource, then for the whole stack, each violation as the servicer words it (the rule's description, then its
    message), an unknown value stopping a rule as an advisory "can't run" diagnostic. `only` names the policies to run
    (all by default). The stack's config reaches `pulumi.Config` as the CLI hands it to a pack, in a context of its own."""
    return _analyzed_in_process(_in_process_pack(policies_dir.resolve()), plan, only)


def _analyzed_in_process(pack: _InProcessPack, plan: Plan, only: set[str] | None = None) -> list[Violation]:
    import contextvars

    from pulumi.runtime import config as runtime_config

    policies = [p for p in pack.policies if only is None or p.name in only]
    context = contextvars.copy_context()
    context.run(runtime_config.set_all_config, dict(plan.config), [])
    return sorted(context.run(_run_in_process, pack, policies, _resources(plan)), key=lambda v: (not v.mandatory, v.policy, v.urn))


def _run_in_process(pack: _InProcessPack, policies: list[Any], requests: list[Any]) -> list[Violation]:
    from google.protobuf import json_format
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.deserialize import deserialize_properties
    from pulumi_policy.policy import (
        EnforcementLevel,
        PolicyResource,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
        StackValidationPolicy,
        _NotApplicableError,
    )
    from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

    servicer = pack.servicer
    resources = []
    for r in requests:  # as the servicer's AnalyzeStack builds each one, once for every policy
        props = unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(r.properties)))
        resources.append(PolicyResource(r.type, props, r.urn, r.name, servicer._get_resource_options(r),
                                        servicer._get_provider_resource(r), None, [], {}))
    by_urn = {resource.urn: resource for resource in resources}
    for r, resource in zip(requests, resources):
        resource.parent = by_urn.get(r.parent) if r.parent else None
        resource.dependencies.extend(by_urn[d] for d in r.dependencies if d in by_urn)
        for key, deps in r.propertyDependencies.items():
            resource.property_dependencies[key] = [by_urn[d] for d in deps.urns if d in by_urn]

    found: list[Violation] = []

    def run(policy: Any, args: Any, urn: str) -> None:
        level = servicer._get_enforcement_level(policy)
        if level == EnforcementLevel.DISABLED:
            return
        level = EnforcementLevel.MANDATORY if level == EnforcementLevel.REMEDIATE else level
        response = analyzer_pb2.AnalyzeResponse()
        report = servicer._create_report_violation(response, policy.name, policy.description, level, policy.severity)
        stopped = None
        try:
            result = policy.validate(args, report)
            if inspect.isawaitable(result):
                asyncio.run(_awaited(result))
        except UnknownValueError as exc:  # after what the rule reported before it stopped, as the servicer adds it
            stopped = Violation(policy.name, "advisory", f"can't run policy '{policy.name}' from policy pack "
                                f"'{pack.name}@v0.0.1' during preview: {exc.message}", urn)
        except _NotApplicableError:
            pass
        found.extend(v if v.urn else Violation(v.policy, v.level, v.message, urn) for v in _violations(response))
        if stopped is not None:
            found.append(stopped)

    for policy in policies:
        if isinstance(policy, ResourceValidationPolicy) and policy.has_validation():
            for resource in resources:
                run(policy, ResourceValidationArgs(resource.resource_type, resource.props, resource.urn, resource.name,
                                                   resource.opts, resource.provider, None), resource.urn)
        elif isinstance(policy, StackValidationPolicy):
            run(policy, StackValidationArgs(resources, None), "")
    return found


async def _awaited(result: Any) -> Any:
    return await result


def info(policies_dir: Path = POLICIES_DIR) -> Any:
    from google.protobuf import empty_pb2

    with analyzer(policies_dir) as packs:
        return packs.GetAnalyzerInfo(empty_pb2.Empty())
