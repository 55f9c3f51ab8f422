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
    python probe.py model-pin S3_URI TABLE TAG    (metadata.json with the s3-training keys, the tag with polaris-training)
    python probe.py airflow-run AIRFLOW_URL DAG_ID TIMEOUT_SEC CONF_JSON
                                                  (signs in as AIRFLOW_USERNAME / AIRFLOW_PASSWORD through Keycloak)

Nothing here imports the platform: the pod has this file and the standard library only.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import hmac
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from html.parser import HTMLParser
from http.cookiejar import CookieJar
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
                       iceberg_ref=meta.get("iceberg_ref", ""), has_metrics=str(isinstance(meta.get("metrics"), dict)).lower())
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


# --- the serving loop (phase 03) -------------------------------------------------------------------------------------

def polaris_refs(table: str) -> tuple[int, dict[str, object]]:
    """(status, refs) of an Iceberg table loaded from Polaris with the principal of the environment (the team's
    polaris-training Secret), as the serving loop's publish step loads it (components/dags/serving_loop_steps.py)."""
    uri = os.environ["POLARIS_URI"].rstrip("/")
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": os.environ["POLARIS_CLIENT_ID"],
                                   "client_secret": os.environ["POLARIS_CLIENT_SECRET"],
                                   "scope": os.environ["POLARIS_SCOPE"]}).encode()
    status, body = http("POST", f"{uri}/v1/oauth/tokens", form, {"content-type": "application/x-www-form-urlencoded"})
    if status != 200:
        return status, {}
    bearer = json.loads(body).get("access_token", "")
    *namespace, name = table.split(".")
    path = "/v1/{}/namespaces/{}/tables/{}".format(urllib.parse.quote(os.environ["POLARIS_WAREHOUSE"], safe=""),
                                                   urllib.parse.quote("\x1f".join(namespace), safe=""),
                                                   urllib.parse.quote(name, safe=""))
    status, body = http("GET", uri + path, headers={"authorization": f"Bearer {bearer}"})
    return status, (json.loads(body).get("metadata", {}).get("refs", {}) if status == 200 else {})


def model_pin(uri: str, table: str, tag: str) -> None:
    """A published model's `metadata.json` (as `s3-metadata`, with the run and Iceberg ref it names), and the snapshot the
    Iceberg tag `tag` of `table` points to in Polaris now."""
    s3_metadata(uri)
    load_status, refs = polaris_refs(table)
    ref = refs.get(tag) if isinstance(refs, dict) else None
    report(table_status=load_status, tag_snapshot_id=ref.get("snapshot-id", "") if isinstance(ref, dict) else "",
           tag_type=ref.get("type", "") if isinstance(ref, dict) else "")


class _LoginForm(HTMLParser):
    """The action of Keycloak's sign-in form (`<form id="kc-form-login" action=...>` in its login theme's login.ftl)."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and found.get("id") == "kc-form-login" and not self.action:
            self.action = found.get("action") or ""


JWT_COOKIE = "_token"
"""The cookie in which Airflow 3's auth managers hand the API's JWT to the browser after sign-in (COOKIE_NAME_JWT_TOKEN)."""


def airflow_sign_in(base_url: str) -> tuple[str, str]:
    """(outcome, JWT) of the UI's sign-in through Keycloak as a browser does it, with AIRFLOW_USERNAME and AIRFLOW_PASSWORD:
    the FAB auth manager's `/auth/login/keycloak` sends to Keycloak's form, whose post comes back through
    `/auth/oauth-authorized/keycloak`, which sets the JWT cookie. `/auth/token` takes database passwords only, and the
    platform's Airflow has no account but Keycloak's. Outcome: ok, `login-<status>` (the login page did not come),
    no-form (no Keycloak form on it), `form-<status>` or no-token (the credentials were refused)."""
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar),
                                         urllib.request.HTTPSHandler(context=_context()))

    def fetch(url: str, data: bytes | None = None) -> tuple[int, str]:
        headers = {"content-type": "application/x-www-form-urlencoded"} if data is not None else {}
        try:
            with opener.open(urllib.request.Request(url, data=data, headers=headers), timeout=60) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace")
        except OSError:  # refused, unresolved, timed out: a figure, not a crash
            return 0, ""

    status, page = fetch(f"{base_url}/auth/login/keycloak?next=")
    if status != 200:
        return f"login-{status}", ""
    form = _LoginForm()
    form.feed(page)
    if not form.action:
        return "no-form", ""
    credentials = urllib.parse.urlencode({"username": os.environ["AIRFLOW_USERNAME"],
                                          "password": os.environ["AIRFLOW_PASSWORD"], "credentialId": ""}).encode()
    status, _ = fetch(form.action, credentials)
    token = next((c.value for c in jar if c.name == JWT_COOKIE and c.value), "")
    if token:
        return "ok", token
    return ("no-token" if status == 200 else f"form-{status}"), ""


def run_slug(run_id: str) -> str:
    """The serving loop's name of a run (components/dags/serving_loop_steps.py run_slug): its labels and its tag `fab-<slug>`."""
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    return slug[:40].rstrip("-") or "run"


TERMINAL = ("success", "failed")
POLL_SEC = float(os.environ.get("FAB_POLL_SEC", "30"))


def airflow_run(base_url: str, dag_id: str, timeout_sec: str, conf_json: str) -> None:
    """Triggers `dag_id` through Airflow's REST API (v2) as the signed-in user, with the run id `fab-verify-<UTC time>`
    and `conf` (the revision, when it names none, the run's name as the DAG defaults it), then follows the run to its end
    or the timeout: the sign-in, the trigger's status, the run's names, its state and each task's."""
    outcome, token = airflow_sign_in(base_url)
    report(signin=outcome)
    if not token:
        return
    auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    run_id = "fab-verify-" + datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    conf = json.loads(conf_json)
    conf["revision"] = conf.get("revision") or run_slug(run_id)
    report(run_id=run_id, run=run_slug(run_id), revision=conf["revision"])
    dag_url = f"{base_url}/api/v2/dags/{urllib.parse.quote(dag_id, safe='')}"
    # A paused DAG takes the trigger (200) and never starts the run: said at once rather than after the timeout.
    status, answer = http("GET", dag_url, headers=auth)
    paused = json.loads(answer).get("is_paused") if status == 200 else None
    report(paused="unknown" if paused is None else str(bool(paused)).lower())
    if paused:
        return
    runs = f"{dag_url}/dagRuns"
    body = json.dumps({"dag_run_id": run_id, "logical_date": None, "conf": conf}).encode()
    status, answer = http("POST", runs, body, auth)
    report(trigger_status=status)
    if status != 200:
        detail = answer.decode("utf-8", "replace").replace("\n", " ")[:300]
        report(trigger_detail=detail)
        return
    deadline, state = time.monotonic() + float(timeout_sec), ""
    run_url = f"{runs}/{urllib.parse.quote(run_id, safe='')}"
    while True:
        try:
            status, answer = http("GET", run_url, headers=auth)
        except OSError:  # a moment without the API server (a restart) during hours of training: ask again
            status, answer = 0, b"{}"
        state = json.loads(answer).get("state", "") if status == 200 else f"http-{status}"
        # Refused (the session's token expired, the account lost the team's role): asking again changes nothing.
        if state in TERMINAL or status in (401, 403) or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SEC)
    report(state=state)
    status, answer = http("GET", f"{run_url}/taskInstances", headers=auth)
    for task in json.loads(answer).get("task_instances", []) if status == 200 else []:
        report(**{f"task_{task['task_id']}": task.get("state") or "none"})


COMMANDS = {
    "tcp": tcp, "s3-roundtrip": s3_roundtrip, "s3-foreign": s3_foreign, "s3-metadata": s3_metadata, "s3-drain": s3_drain,
    "chat": chat,
    "chat-anonymous": chat_anonymous, "burst": burst, "token": token_file, "prom": prom, "model-pin": model_pin,
    "airflow-run": airflow_run,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
