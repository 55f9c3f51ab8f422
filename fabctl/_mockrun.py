"""Child process of the renderer: runs the Pulumi program under the SDK's official mocks (DESIGN section 5.1).

Run as `python -m fabctl._mockrun`, it reads a JSON request on stdin ({"project_dir", "stack", "config", "secret_keys", "stack_references"}
and optionally "program", a script run instead of the project's `__main__.py`, "organization" and
"reveal_outputs"), runs the program with `preview=False`, and writes one JSON document on stdout:
every registered resource with its type, logical name, URN, parent, provider, inputs (secrets
redacted), dependencies and options (custom timeouts included), the stack outputs, the process's
peak resident memory, and either no error, a user error (the program's `pulumi.RunError`) or a crash.

`Mocks.new_resource` is not told the parent, dependencies or options, so the monitor records the
`RegisterResource` request itself before handing it to the stock mock monitor.

Run as `python -m fabctl._mockrun --preloaded PROJECT_DIR`, it is a preloaded renderer (`fabctl.runs.preloaded`): it
imports the SDK and the program's own imports once, then forks a child per request, which runs as the process above
would (the request, the requester's environment as it is, its stdout and stderr redirected to files) and starts from
the same clean state, since the preloaded parent never runs a program. What a child shares with its siblings that
fresh processes would not: the hash seed of `str` (set iteration orders; no render depends on one: renders with
different `PYTHONHASHSEED` record the same resources) and the modules' import order.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import runpy
import sys
import traceback
from typing import Any

SECRET = "[secret]"
UNKNOWN_VALUE = "[unknown]"

# Computed outputs the program reads from resources whose provider would compute them. Values are
# obviously fake and never written anywhere but the offline render.
_MOCK_OUTPUTS: dict[str, dict[str, Any]] = {
    "tls:index/privateKey:PrivateKey": {
        "private_key_pem": "-----BEGIN RSA PRIVATE KEY-----\nMOCK\n-----END RSA PRIVATE KEY-----\n",
        "public_key_pem": "-----BEGIN PUBLIC KEY-----\nMOCK\n-----END PUBLIC KEY-----\n",
    },
    "tls:index/selfSignedCert:SelfSignedCert": {
        "cert_pem": "-----BEGIN CERTIFICATE-----\nMOCK\n-----END CERTIFICATE-----\n",
    },
    "random:index/randomPassword:RandomPassword": {"result": "mock-random-password"},
    "random:index/randomId:RandomId": {"hex": "0123456789abcdef"},
    "minio:index/iamServiceAccount:IamServiceAccount": {"access_key": "MOCKACCESSKEY", "secret_key": "mock-secret-key"},
    "keycloak:openid/client:Client": {"client_secret": "mock-client-secret", "service_account_user_id": "mock-service-account-user-id"},
}


def _plain(value: Any) -> Any:
    """A protobuf Struct value as plain JSON, with secrets redacted and resource references as URNs."""
    from pulumi.runtime import rpc

    if isinstance(value, dict):
        sig = value.get(rpc._special_sig_key)
        if sig == rpc._special_secret_sig:
            return _redacted(value.get("value"))
        if sig == rpc._special_resource_sig:
            return value.get("urn")
        if sig == rpc._special_output_value_sig:
            return SECRET if value.get("secret") else _plain(value.get("value", UNKNOWN_VALUE))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value == rpc.UNKNOWN:
        return UNKNOWN_VALUE
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf Struct numbers are doubles; schemas want integers back
    return value


def _redacted(value: Any) -> Any:
    """A secret's shape without its content: a map keeps its keys (Secret data stays checkable), values go."""
    if isinstance(value, dict):
        return {k: SECRET for k in value}
    return SECRET


def _secret_paths(value: Any, path: str = "") -> list[str]:
    from pulumi.runtime import rpc

    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return [path or "."]
        return [p for k, v in value.items() for p in _secret_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secret_paths(v, f"{path}[{i}]")]
    return []


def main(request: dict[str, Any] | None = None) -> int:
    request = json.load(sys.stdin) if request is None else request
    project_dir = request["project_dir"]
    os.environ["PULUMI_CONFIG"] = json.dumps(request["config"])
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(request.get("secret_keys", []))
    os.chdir(project_dir)
    sys.path.insert(0, project_dir)

    import pulumi
    from google.protobuf import json_format
    from pulumi.runtime import mocks, settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    # As the Pulumi CLI's Python runner does: without it `pulumi.runtime.is_config_secret` answers False for every key.
    pulumi.runtime.set_all_config(request["config"], request.get("secret_keys", []))
    program = request.get("program") or os.path.join(project_dir, "__main__.py")
    records: list[dict[str, Any]] = []
    stack_references: dict[str, Any] = request.get("stack_references", {})

    class Mocks(mocks.Mocks):
        def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
            outputs = dict(_MOCK_OUTPUTS.get(args.typ, {}))
            if args.typ == "pulumi:pulumi:StackReference":
                name = args.inputs.get("name")
                return name, {"name": name, "outputs": stack_references.get(name, {}), "secretOutputNames": []}
            if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == "kubernetes.io/service-account-token":
                outputs["data"] = {"token": base64.b64encode(b"mock-token").decode(), "ca.crt": base64.b64encode(b"MOCK CA").decode()}
            return f"{args.name}-id", {**args.inputs, **outputs}

        def call(self, args: mocks.MockCallArgs) -> dict:
            # The one lookup a program cannot compute: the id of the client `realm-management` that every Keycloak realm has
            # (components/identity.py `realm_management_roles`), answered with a stand-in id.
            if args.token == "keycloak:openid/getClient:getClient" and args.args.get("clientId") == "realm-management":
                return {**args.args, "id": f"{args.args.get('realmId')}-realm-management-id"}
            raise RuntimeError(f"invoke {args.token} cannot run offline; compute the value in the program instead")

    class RecordingMonitor(mocks.MockMonitor):
        def ReadResource(self, request):
            """Reads (StackReference) register nothing new; recorded so that tests and plan.json see them."""
            response = super().ReadResource(request)
            raw = json_format.MessageToDict(request.properties, preserving_proto_field_name=True)
            records.append({
                "urn": response.urn, "type": request.type, "name": request.name, "custom": True, "read": True,
                "parent": request.parent or None, "provider": request.provider.rsplit("::", 1)[0] if request.provider else None,
                "inputs": _plain(raw), "secret_inputs": _secret_paths(raw), "dependencies": sorted(set(request.dependencies)),
                "property_dependencies": {}, "protect": False, "retain_on_delete": False, "delete_before_replace": False,
                "ignore_changes": [], "replace_on_changes": [], "aliases": [], "additional_secret_outputs": [], "import_id": None,
                "custom_timeouts": None,
            })
            return response

        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                raw = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
                records.append(
                    {
                        "urn": response.urn,
                        "type": request.type,
                        "name": request.name,
                        "custom": request.custom,
                        "parent": request.parent or None,
                        "provider": request.provider.rsplit("::", 1)[0] if request.provider else None,
                        "inputs": _plain(raw),
                        "secret_inputs": _secret_paths(raw),
                        "dependencies": sorted(set(request.dependencies)),
                        "property_dependencies": {
                            k: sorted(v.urns) for k, v in sorted(request.propertyDependencies.items()) if v.urns
                        },
                        "protect": request.protect if request.HasField("protect") else False,
                        "retain_on_delete": request.retainOnDelete if request.HasField("retainOnDelete") else False,
                        "delete_before_replace": request.deleteBeforeReplace,
                        "ignore_changes": list(request.ignoreChanges),
                        "replace_on_changes": list(request.replaceOnChanges),
                        "aliases": [json_format.MessageToDict(a) for a in request.aliases],
                        "additional_secret_outputs": list(request.additionalSecretOutputs),
                        "import_id": request.importId or None,
                        "custom_timeouts": _timeouts(request) if request.HasField("customTimeouts") else None,
                    }
                )
            return response

    mocks.set_mocks(
        Mocks(),
        project=request["project"],
        stack=request["stack"],
        preview=False,
        monitor=RecordingMonitor(Mocks()),
        # What `pulumi.get_organization()` answers on a self-managed backend.
        organization=request["organization"],
    )

    result: dict[str, Any] = {"error": None, "resources": records, "outputs": {}}
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(program, run_name="__main__")))
    except pulumi.RunError as exc:
        result["error"] = {"kind": "user", "message": str(exc)}
    except Exception:  # a crash of the program is a bug: keep the whole traceback for the developer
        result["error"] = {"kind": "crash", "message": traceback.format_exc()}

    if result["error"] is None:
        result["outputs"] = _stack_outputs(settings.get_root_resource(), _sync_await, reveal=bool(request.get("reveal_outputs")))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["peak_rss_kib"] = _peak_rss_kib(usage)
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    json.dump(result, sys.stdout)
    return 0


def _timeouts(request: Any) -> dict[str, str] | None:
    """A registration's custom timeouts (`create`, `update`, `delete`, as Pulumi's duration strings), only those set."""
    timeouts = {key: getattr(request.customTimeouts, key) for key in ("create", "update", "delete") if getattr(request.customTimeouts, key)}
    return timeouts or None


def _peak_rss_kib(usage: resource.struct_rusage) -> int:
    """This process's peak resident memory in KiB.

    Linux's ru_maxrss keeps the high-water mark of the parent's copy that exec replaced, so a renderer
    started by a large parent would report the parent's size; VmHWM belongs to this program's memory only.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return usage.ru_maxrss


def _stack_outputs(root: Any, sync_await: Any, reveal: bool = False) -> dict[str, Any]:
    """Resolve the root stack's outputs: under mocks the Stack finishes before `pulumi.export` runs.

    Secret outputs are redacted unless `reveal` (their values are the mocks' stand-ins, never real secrets):
    another stack's render reads them as this stack's StackReference outputs.
    """
    import pulumi

    out: dict[str, Any] = {}
    for name, value in sorted(getattr(root, "outputs", {}).items()):
        output = pulumi.Output.from_input(value)
        resolved = sync_await(output.future())
        out[name] = SECRET if sync_await(output.is_secret()) and not reveal else _jsonable(resolved)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _program_imports(project_dir: str) -> None:
    """Run the top-level import statements of the project's `__main__.py`: the modules every render starts with."""
    import ast

    path = os.path.join(project_dir, "__main__.py")
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), path, "exec"), {"__name__": "fab_preload"})  # noqa: S102


def _lazy(module: Any) -> bool:
    """Whether a module is one of the Kubernetes SDK's lazy stubs (pulumi._utils.lazy_import), not run yet."""
    return type(module).__name__ == "_LazyModule"


def _realize(module: Any) -> None:
    """Run a lazy stub's module, as the program's first use of one of its names would."""
    if _lazy(module):
        getattr(module, "_fab_preload", None)


def _preload(loaded: dict[str, list[str]]) -> None:
    """Load what a render loaded after its start (a Kubernetes API group, the Grafana SDK), for the next renders: the
    lazy stubs it ran, then the modules it imported, in its order, each after its packages (a stub imported by name
    instead would run twice and leave a module where its package binds a class of the same name)."""
    import importlib

    for name in loaded.get("realized", []):
        _realize(sys.modules.get(name))
    for name in loaded.get("imported", []):
        parts = name.split(".")
        for end in range(1, len(parts)):
            _realize(sys.modules.get(".".join(parts[:end])))
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 (a module that imports only inside a render is left to the render)
                sys.modules.pop(name, None)


def _forked_render(job: dict[str, Any]) -> None:
    """In the forked child: run one request as `python -m fabctl._mockrun` would, stdout and stderr to the job's files,
    and write the modules it loaded; never returns."""
    code = 1
    try:
        for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        if "environ" in job:  # the requester's environment as it is now, as a fresh process would have it
            os.environ.clear()
            os.environ.update(job["environ"])
        before = set(sys.modules)
        stubs = {name for name, module in sys.modules.items() if _lazy(module)}
        code = main(job["request"])
        loaded = {"realized": [name for name in sys.modules if name in stubs and not _lazy(sys.modules[name])],
                  "imported": [name for name in list(sys.modules) if name not in before and name != "__main__"]}
        with open(job["modules"], "w", encoding="utf-8") as out:
            json.dump(loaded, out)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 (reported as a crash of the renderer, as a fresh process would)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(project_dir: str) -> int:
    """The preloaded renderer: imports once, then per line of stdin (a job: the request and the paths of its stdout,
    stderr and loaded-modules files) forks a child that renders it, and answers with the child's exit status."""
    os.chdir(project_dir)
    sys.path.insert(0, project_dir)
    import google.protobuf.json_format  # noqa: F401
    import pulumi  # noqa: F401
    import pulumi.runtime.mocks  # noqa: F401
    import pulumi.runtime.stack  # noqa: F401
    import pulumi.runtime.sync_await  # noqa: F401

    _program_imports(project_dir)
    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _forked_render(job)
        _, status = os.waitpid(pid, 0)
        try:
            with open(job["modules"], encoding="utf-8") as listed:
                loaded = json.load(listed)
        except (OSError, ValueError):
            loaded = {}  # the child crashed before listing them
        print(os.waitstatus_to_exitcode(status), flush=True)  # the requester reads the render while this loads more
        _preload(loaded)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--preloaded"]:
        sys.exit(serve(sys.argv[2]))
    sys.exit(main())
