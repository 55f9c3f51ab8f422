"""A fake Kubernetes API for the tests of `fabctl verify`'s runner: an HTTP server on 127.0.0.1 in a thread that answers
the real `kubernetes` client with recorded responses (discovery, namespaces, server-side apply, the deciding object's
status over successive reads, pods and their logs) and records every request, and a kubeconfig that points at it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

CORE = [{"name": "namespaces", "kind": "Namespace", "namespaced": False},
        {"name": "pods", "kind": "Pod", "namespaced": True}, {"name": "pods/log", "kind": "Pod", "namespaced": True}]
BATCH = [{"name": "jobs", "kind": "Job", "namespaced": True}, {"name": "jobs/status", "kind": "Job", "namespaced": True}]
MPI = [{"name": "mpijobs", "kind": "MPIJob", "namespaced": True}]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    content_type: str = ""


@dataclass
class FakeApi:
    """What the fake API serves. `statuses` maps an object's path to the `status` of each successive read (the last one
    repeats); `pods` maps a label selector to pod names; `logs` a pod name to its log."""

    groups: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"v1": CORE, "batch/v1": BATCH})
    namespaces: set[str] = field(default_factory=set)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pods: dict[str, list[str]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`<namespace>/<name>` -> a Secret a GET returns (the others are not found)."""
    refuse: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Method -> the error status and message every request with that method gets."""
    requests: list[Request] = field(default_factory=list)
    _reads: dict[str, int] = field(default_factory=dict)

    def calls(self, *methods: str) -> list[tuple[str, str]]:
        """(method, path) of the requests made with these methods, in order."""
        return [(r.method, r.path) for r in self.requests if r.method in methods]

    def answer(self, request: Request) -> tuple[int, Any]:
        self.requests.append(request)
        if request.method in self.refuse:
            code, message = self.refuse[request.method]
            return code, {"kind": "Status", "status": "Failure", "message": message, "code": code}
        parts = request.path.strip("/").split("/")
        if request.method == "GET" and (request.path == "/api/v1" or (parts[0] == "apis" and len(parts) == 3)):
            version = "v1" if request.path == "/api/v1" else f"{parts[1]}/{parts[2]}"
            if version not in self.groups:
                return 404, {"kind": "Status", "message": "the server could not find the requested resource", "code": 404}
            return 200, {"kind": "APIResourceList", "groupVersion": version, "resources": self.groups[version]}
        if request.path == "/api/v1/namespaces" and request.method == "POST":
            self.namespaces.add(request.body["metadata"]["name"])
            return 201, request.body
        if request.method == "GET" and len(parts) == 4 and parts[2] == "namespaces":
            name = parts[3]
            found = name in self.namespaces
            return (200, {"metadata": {"name": name}, "status": {"phase": "Active"}}) if found else (404, _not_found(name))
        if request.method == "GET" and len(parts) == 6 and parts[4] == "secrets":
            found = self.secrets.get(f"{parts[3]}/{parts[5]}")
            return (200, found) if found is not None else (404, _not_found(parts[5]))
        if request.method == "PATCH":
            return 200, request.body
        if request.method == "DELETE":
            return 200, {"kind": "Status", "status": "Success"}
        if parts[-1] == "pods":
            selector = request.query["labelSelector"][0]
            return 200, {"items": [{"metadata": {"name": pod, "creationTimestamp": f"2026-01-01T00:00:0{i}Z"},
                                    "spec": {"containers": [{"name": "main"}]}}
                                   for i, pod in enumerate(self.pods.get(selector, []))]}
        if parts[-1] == "log":
            return 200, self.logs.get(parts[-2], "")
        if request.path in self.statuses:
            seen = self._reads.get(request.path, 0)
            self._reads[request.path] = seen + 1
            statuses = self.statuses[request.path]
            return 200, {"status": statuses[min(seen, len(statuses) - 1)]}
        return 404, _not_found(parts[-1])


def _not_found(name: str) -> dict[str, Any]:
    return {"kind": "Status", "message": f"{name!r} not found", "reason": "NotFound", "code": 404}


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, body = api.answer(Request(self.command, url.path, parse_qs(url.query), json.loads(raw) if raw else None,
                                                  self.headers.get("Content-Type", "")))
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:  # quiet: the requests are recorded instead
            pass

    return Handler


@contextmanager
def serve(api: FakeApi, kubeconfig: Path, contexts: dict[str, str]) -> Iterator[str]:
    """Serve `api` on a free port of 127.0.0.1 and write `kubeconfig` with a context of each name in `contexts` (context
    -> cluster name) pointing at it; yields the server's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": url}} for cluster in sorted(set(contexts.values()))],
        "users": [{"name": "verifier", "user": {"token": "test-token"}}],
        "contexts": [{"name": name, "context": {"cluster": cluster, "user": "verifier"}} for name, cluster in contexts.items()],
        "current-context": next(iter(contexts)),
    }))
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
