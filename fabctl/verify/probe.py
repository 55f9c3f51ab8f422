"""The acceptance jobs' probe: one standard-library script that `fabctl verify` ships to its pods in a ConfigMap and runs
with the pinned Python image (docs/acceptance.md). Each command measures one thing and prints what it found as
`FAB-RESULT key=value` lines; it never judges (the criterion's judge does) and exits 0 once it has measured, so that a
refused or dropped connection is a figure, not a crash.

    python probe.py tcp HOST PORT TIMEOUT_SEC
    python probe.py s3-roundtrip S3_URI           (keys and endpoint from the environment: the s3-training Secret)
    python probe.py s3-foreign S3_URI             (the same keys against another team's prefix)
    python probe.py s3-metadata S3_URI            (reads a metadata.json)
    python probe.py s3-drain S3_URI               (counts and deletes every object under the prefix)
    python probe.py chat BASE_URL MODEL           (token from TOKEN_URL with CLIENT_ID and CLIENT_SECRET)
    python probe.py chat-anonymous BASE_URL MODEL
    python probe.py burst BASE_URL REQUESTS       (token as for chat; GET BASE_URL/models REQUESTS times at once)
    python probe.py token FILE                    (token as for chat, written to FILE for a load generator)
    python probe.py prom URL NAME=QUERY ...

Nothing here imports the platform: the pod has this file and the standard library only.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import hmac
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from xml.etree import ElementTree

PREFIX = "FAB-RESULT "
CA_FILE = os.environ.get("FAB_CA_FILE", "")
"""The site's CA bundle where the site has one (mounted from the step's ConfigMap); the system's otherwise."""


def report(**figures: object) -> None:
    for key, value in figures.items():
        print(f"{PREFIX}{key}={value}", flush=True)


def _context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=CA_FILE or None)


def http(method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, bytes]:
    """(status, body) of one request; an HTTP error status is a result, not an exception."""
    request = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_context()) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


# --- network -------------------------------------------------------------------------------------------------------

def tcp(host: str, port: str, timeout: str) -> None:
    """`connect`: ok (the handshake completed), refused (a reset came back), timeout (dropped on the way) or error."""
    try:
        with socket.create_connection((host, int(port)), timeout=float(timeout)):
            result = "ok"
    except ConnectionRefusedError:
        result = "refused"
    except TimeoutError:
        result = "timeout"
    except OSError as error:
        result = f"error:{error.errno}"
    report(connect=result)


# --- S3 (AWS Signature Version 4, path-style, as AIStor serves it) -------------------------------------------------

def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4(method: str, path: str, query: str, headers: dict[str, str], secret: str, region: str) -> tuple[str, str]:
    """(SignedHeaders, Signature) of an S3 request: `headers` lower-case, with `x-amz-date` and `x-amz-content-sha256`."""
    stamp, day = headers["x-amz-date"], headers["x-amz-date"][:8]
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, query, *(f"{k}:{headers[k].strip()}" for k in sorted(headers)), "", signed,
                           headers["x-amz-content-sha256"]])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(_sign(_sign(_sign(f"AWS4{secret}".encode(), day), region), "s3"), "aws4_request")
    return signed, hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def s3(method: str, bucket: str, key: str, body: bytes = b"", query: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One S3 request with the keys and endpoint of the environment (the s3-training Secret's keys)."""
    endpoint = urllib.parse.urlsplit(os.environ["AWS_ENDPOINT_URL_S3"])
    region = os.environ.get("AWS_REGION", "us-east-1")
    access, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = "/" + urllib.parse.quote(f"{bucket}/{key}" if key else bucket, safe="/-_.~")
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}" for k, v in sorted((query or {}).items())
    )
    headers = {"host": endpoint.netloc, "x-amz-content-sha256": hashlib.sha256(body).hexdigest(), "x-amz-date": stamp}
    signed, signature = sigv4(method, path, canonical_query, headers, secret, region)
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{stamp[:8]}/{region}/s3/aws4_request, "
                                f"SignedHeaders={signed}, Signature={signature}")
    url = f"{endpoint.scheme}://{endpoint.netloc}{path}" + (f"?{canonical_query}" if canonical_query else "")
    return http(method, url, body, headers)


def _split(uri: str) -> tuple[str, str]:
    """`s3://bucket/prefix/` -> (bucket, prefix)."""
    parsed = urllib.parse.urlsplit(uri)
    return parsed.netloc, parsed.path.lstrip("/")


def s3_roundtrip(uri: str) -> None:
    """Writes 1 MiB under `uri`, reads it back, compares, deletes it: each status, whether the bytes matched, and the
    address the endpoint's host name resolved to."""
    bucket, prefix = _split(uri)
    key = f"{prefix}fab-verify/{uuid.uuid4().hex}"
    payload = os.urandom(1024 * 1024)
    put, _ = s3("PUT", bucket, key, payload)
    get, body = s3("GET", bucket, key)
    delete, _ = s3("DELETE", bucket, key)
    host = urllib.parse.urlsplit(os.environ["AWS_ENDPOINT_URL_S3"]).hostname or ""
    report(address=socket.gethostbyname(host), put_status=put, get_status=get, match=str(get == 200 and body == payload).lower(),
           delete_status=delete)


def s3_foreign(uri: str) -> None:
    """Tries to write, list and read under another team's prefix with this team's keys: each status."""
    bucket, prefix = _split(uri)
    put, _ = s3("PUT", bucket, f"{prefix}fab-verify/{uuid.uuid4().hex}", b"x")
    listed, _ = s3("GET", bucket, "", query={"list-type": "2", "prefix": prefix})
    get, _ = s3("GET", bucket, f"{prefix}fab-verify/absent")
    report(put_status=put, list_status=listed, get_status=get)


def s3_metadata(uri: str) -> None:
    """Reads a published model's `metadata.json`: its status and the fields the serving loop writes."""
    bucket, key = _split(uri)
    status, body = s3("GET", bucket, key)
    figures: dict[str, object] = {"get_status": status}
    if status == 200:
        try:
            meta = json.loads(body)
        except ValueError:
            meta = {}
        figures.update(snapshot_id=meta.get("snapshot_id", ""), team=meta.get("team", ""), revision=meta.get("revision", ""),
                       has_metrics=str(isinstance(meta.get("metrics"), dict)).lower())
    report(**figures)


S3_XML = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def s3_drain(uri: str) -> None:
    """Counts the objects under `uri` and their bytes, and deletes them (what a storage load left behind)."""
    bucket, prefix = _split(uri)
    keys, size, token, status = [], 0, "", 200
    while status == 200:
        query = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
        status, body = s3("GET", bucket, "", query=query)
        if status != 200:
            break
        page = ElementTree.fromstring(body)
        for item in page.iter(f"{S3_XML}Contents"):
            keys.append(item.findtext(f"{S3_XML}Key", ""))
            size += int(item.findtext(f"{S3_XML}Size", "0"))
        token = page.findtext(f"{S3_XML}NextContinuationToken", "")
        if page.findtext(f"{S3_XML}IsTruncated") != "true":
            break
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        deleted = sum(1 for code in pool.map(lambda key: s3("DELETE", bucket, key)[0], keys) if code == 204)
    report(list_status=status, objects=len(keys), bytes=size, deleted=deleted)


# --- the inference gateway -----------------------------------------------------------------------------------------

def token() -> tuple[int, str]:
    """A client-credentials access token of the team's gateway client."""
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": os.environ["CLIENT_ID"],
                                   "client_secret": os.environ["CLIENT_SECRET"]}).encode()
    status, body = http("POST", os.environ["TOKEN_URL"], form, {"content-type": "application/x-www-form-urlencoded"})
    return status, json.loads(body).get("access_token", "") if status == 200 else ""


def _chat(base_url: str, model: str, bearer: str) -> int:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4}).encode()
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {bearer}"} if bearer else {})}
    status, _ = http("POST", f"{base_url}/chat/completions", body, headers, timeout=120)
    return status


def chat(base_url: str, model: str) -> None:
    token_status, bearer = token()
    report(token_status=token_status, chat_status=_chat(base_url, model, bearer) if bearer else 0)


def chat_anonymous(base_url: str, model: str) -> None:
    report(chat_status=_chat(base_url, model, ""))


def burst(base_url: str, requests: str) -> None:
    """`requests` calls at once with one token: how many were answered, limited (429) or otherwise refused."""
    token_status, bearer = token()
    counts = {"ok": 0, "limited": 0, "other": 0}
    if bearer:
        def one(_: int) -> int:
            return http("GET", f"{base_url}/models", headers={"authorization": f"Bearer {bearer}"})[0]

        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            for status in pool.map(one, range(int(requests))):
                counts["ok" if status == 200 else "limited" if status == 429 else "other"] += 1
    report(token_status=token_status, **counts)


def token_file(path: str) -> None:
    """Writes the team's access token to `path` (an emptyDir file, mode 0600) for a tool that reads it from there."""
    status, bearer = token()
    if bearer:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(bearer)
    report(token_status=status)


# --- Prometheus ----------------------------------------------------------------------------------------------------

def prom(url: str, *queries: str) -> None:
    """Each `name=query` as its instant value (the first series' value; 0 when the query returns nothing)."""
    for item in queries:
        name, query = item.split("=", 1)
        status, body = http("GET", f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        result = json.loads(body).get("data", {}).get("result", []) if status == 200 else []
        report(**{name: result[0]["value"][1] if result else (0 if status == 200 else f"http-{status}")})


COMMANDS = {
    "tcp": tcp, "s3-roundtrip": s3_roundtrip, "s3-foreign": s3_foreign, "s3-metadata": s3_metadata, "s3-drain": s3_drain,
    "chat": chat,
    "chat-anonymous": chat_anonymous, "burst": burst, "token": token_file, "prom": prom,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
