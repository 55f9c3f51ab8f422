"""A fake HTTP service for scripts the program ships (e.g. components/polaris_setup.py): JSON in, JSON out, on a local
port, answered by a test's fake."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol


class Fake(Protocol):
    def handle(self, method: str, path: str, body: dict[str, Any], headers: Any) -> tuple[int, Any]:
        """The status and JSON payload of a request (`body` is {} unless the request sent JSON or a JSON merge patch)."""


@contextlib.contextmanager
def serving(fake: Fake) -> Iterator[str]:
    """Serve `fake` on 127.0.0.1 until the block ends; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            json_body = self.headers.get("Content-Type") in ("application/json", "application/merge-patch+json")
            body = json.loads(raw) if raw and json_body else {}
            status, payload = fake.handle(self.command, self.path, body, self.headers)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
