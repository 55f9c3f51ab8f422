"""Run the CrossGuard policy pack the way the Pulumi CLI does (DESIGN section 5.3).

The pack is started as `python -u -m pulumi.policy 127.0.0.1:0 .` in `policies/`, with the interpreter of
the virtualenv its PulumiPolicy.yaml names (as the CLI starts it); it prints the port
of its Analyzer gRPC service, which gets every resource of a render (`Analyze` per resource, then
`AnalyzeStack` once). `fabctl plan`, CI and the tests share this one runner.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fabctl.render import FABCTL_HOME, Plan

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


@contextmanager
def analyzer(policies_dir: Path = POLICIES_DIR) -> Iterator[Any]:
    """A started policy pack and a stub of its Analyzer service, run as the CLI runs it: in the pack's virtualenv."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    proc = subprocess.Popen(
        [str(pack_python(policies_dir)), "-u", "-m", "pulumi.policy", "127.0.0.1:0", "."],
        cwd=policies_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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


def analyze_with(stub: Any, plan: Plan) -> list[Violation]:
    """Every violation a started pack reports for a render: per resource, then for the whole stack."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2

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
    with analyzer(policies_dir) as stub:
        return analyze_with(stub, plan)


def info(policies_dir: Path = POLICIES_DIR) -> Any:
    from google.protobuf import empty_pb2

    with analyzer(policies_dir) as stub:
        return stub.GetAnalyzerInfo(empty_pb2.Empty())
