"""What tests/perf/bench.py runs and measures: upstreams, the proxies under test, /proc accounting.

Kept apart from bench.py (which decides what to measure and reports it) so
each of the two stays readable. Everything here binds 127.0.0.1 only.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Callable

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MESSAGES = [{"role": "user", "content": "hi"}]
CHAT_REQUEST = {"model": "bench", "messages": MESSAGES}
STREAM_EVENTS = 20
MODELS_PATHS = (b"/v1/models",)
# switchyard-all's semantic cache: its embeddings model (on nginx's /embed) and the size of its vectors, the
# default of OpenAI's text-embedding-3-small and the size docs/cache.md's lookup figures are for.
EMBED_MODEL = "embed-bench"
EMBED_DIMENSIONS = 1536
EMBED_BITS = 64   # random signs per vector, from nginx's $request_id (128 random bits), repeated to EMBED_DIMENSIONS

# The key the load generator sends to switchyard-features (api_keys) and the
# LiteLLM master key (also written in litellm_config.yaml).
SWITCHYARD_KEY = "sk-switchyard-bench-client-0001"
LITELLM_REQUIREMENTS = HERE / "litellm.requirements.txt"
LITELLM_CONFIG = HERE / "litellm_config.yaml"


# --------------------------------------------------------------------------- upstream bodies

def chat_completion_body() -> str:
    """A realistic, fixed OpenAI chat.completion response."""
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
    }, separators=(",", ":"))


def sse_events(model: str = "bench-stream") -> list[str]:
    """20 chat.completion.chunk events (role, 18 content tokens, finish) then [DONE], one string each."""
    events = []
    for i in range(STREAM_EVENTS):
        if i == 0:
            delta, finish = {"role": "assistant", "content": ""}, None
        elif i == STREAM_EVENTS - 1:
            delta, finish = {}, "stop"
        else:
            delta, finish = {"content": f"tok{i} "}, None
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                 "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        events.append("data: " + json.dumps(chunk, separators=(",", ":")) + "\n\n")
    events.append("data: [DONE]\n\n")
    return events


def models_body(model: str) -> str:
    return json.dumps({"object": "list", "data": [{"id": model, "object": "model", "created": 1700000000,
                                                    "owned_by": "bench"}]}, separators=(",", ":"))


def nginx_quote(text: str) -> str:
    """Escape text for a single-quoted nginx string (nginx turns \\n back into a newline)."""
    assert "$" not in text, "nginx would expand $ as a variable"
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def embedding_maps() -> str:
    """nginx ``map`` blocks giving $sy_e0 ... $sy_e63 the values 1 or -1, each one bit of the request's
    ``$request_id`` (16 random bytes in hex: two bits of each of its 32 digits), and $sy_signs the 64 of
    them joined by commas (nginx takes no string of more than 4 KB, so the body repeats this one)."""
    maps = []
    for i in range(EMBED_BITS):
        digit, high = divmod(i, 2)
        ones = "[89a-f]" if high == 0 else "[4-7c-f]"
        maps.append(f'map $request_id $sy_e{i} {{ "~^.{{{digit}}}{ones}" -1; default 1; }}')
    signs = ",".join(f"${{sy_e{i}}}" for i in range(EMBED_BITS))
    maps.append(f'map $request_id $sy_signs {{ default "{signs}"; }}')
    return "\n    ".join(maps)


def embedding_body() -> str:
    """An OpenAI embeddings answer whose vector is new on every request: EMBED_DIMENSIONS values of 1 or -1,
    the EMBED_BITS random signs of embedding_maps() repeated. Two such vectors reach a cosine of 0.95 only
    when all 64 signs agree (one chance in 2**64), so the semantic cache's lookup never finds a close one.
    nginx fills the variables in (no nginx_quote: its $ are meant)."""
    assert EMBED_DIMENSIONS % EMBED_BITS == 0
    return ('{"object":"list","data":[{"object":"embedding","index":0,"embedding":['
            + ",".join(["${sy_signs}"] * (EMBED_DIMENSIONS // EMBED_BITS))
            + f']}}],"model":"{EMBED_MODEL}","usage":{{"prompt_tokens":2,"total_tokens":2}}}}')


def write_nginx_conf(prefix: Path, port: int) -> Path:
    text = (HERE / "nginx.conf.template").read_text()
    for key, value in {"PREFIX": str(prefix), "PORT": str(port),
                       "CHAT_BODY": nginx_quote(chat_completion_body()),
                       "SSE_BODY": nginx_quote("".join(sse_events())),
                       "MODELS_BODY": nginx_quote(models_body("bench")),
                       "STREAM_MODELS_BODY": nginx_quote(models_body("bench-stream")),
                       "EMBED_MAPS": embedding_maps(), "EMBED_BODY": embedding_body(),
                       "EMBED_MODELS_BODY": nginx_quote(models_body(EMBED_MODEL))}.items():
        text = text.replace(f"@@{key}@@", value)
    assert not re.search(r"@@[A-Z_]+@@", text), "unfilled placeholder in nginx.conf.template"
    path = prefix / "nginx.conf"
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- Switchyard configs

def write_switchyard_config(path: Path, port: int, nginx_port: int, paced_port: int, features: bool,
                            ledger: str | None = None, keyed: bool = False, limits_redis: str | None = None,
                            limits_timeout: float | None = None, guardrails: bool = False,
                            cache: bool = False, otlp: str | None = None, db_key: bool = False,
                            semantic: bool = False) -> Path:
    """The benchmark config; `features` adds what users run in production on the same backends.

    Both variants have the same five backends, so the only difference is
    the features: client API keys (the load generator sends one), a
    request_params policy, a fallback chain per model (configured, never
    walked: the primary answers), and tracing (on by default in Switchyard,
    so the bare variant turns it off). Metrics are always collected; the
    benchmark scrapes /metrics once a second for the features target.
    connection_pool_size covers the 1,000 streams of the open-streams phase.
    `ledger` sets usage.ledger (e.g. memory); None leaves the key out, so the
    build's default applies (SQLite under server.data_dir) and an older build
    that knows no `usage` section still accepts the file.

    `keyed` (the bare variant only) adds the bench key and prices bench and
    bench-stream, as production runs them; `limits_redis` (a redis:// URL,
    with `keyed`) gives that key a rate limit and a budget far above what the
    run can use, counted in that Redis: every call is admitted through the
    shared limiter and none is refused, so the two differ by the limits alone.
    `db_key` (with `keyed` or `features`) leaves api_keys out: the bench key is
    a database key that make_db_key puts in the target's data dir before the
    server starts (with `limits_redis`, holding the limits and budget
    limits_text gives a config key), so the two differ by where the key lives alone.
    `limits_timeout` sets state.operation_timeout (None: the build's default).
    `guardrails` adds one guardrail with every built-in detector, enforce mode, both stages, scoped to
    the bench models.
    `cache` turns the response cache on (memory): the load repeats one request, so after the first
    call of each model every call is a hit (no temperature is sent, and each model has one backend).
    With `features`, `limits_redis` gives the features' key the same limits and budget (and prices the
    models); `otlp` (a collector's base URL) exports spans at 10% sampling. `semantic` (with `cache`)
    adds the semantic lookup, its embeddings model EMBED_MODEL on nginx's /embed (a new vector every
    call: no lookup matches), and leaves the fallback chains out, since a model with a chain has no single
    settled backend and bypasses the cache. `features` with all of these and `db_key` and `guardrails`
    is "everything on".
    """
    assert not (features and keyed), "keyed applies to the bare variant (features has its own key)"
    assert keyed or features or not limits_redis, "limits_redis needs a key"
    assert not db_key or features or (keyed and not limits_redis), \
        "db_key is keyed's key without limits, or the features' key, in the database"
    assert cache or not semantic, "semantic is a part of the response cache"
    keyed = keyed or bool(features and limits_redis)   # the key's limits and budget need priced models
    nginx = f"http://127.0.0.1:{nginx_port}"

    def priced(model: str) -> str:
        """The model's price (USD per 1M tokens) on its backend, with `keyed`."""
        pricing = "{pricing: {input_tokens: 1.0, output_tokens: 4.0}}"
        return f", model_configs: [{{id: {model}, metadata: {pricing}}}]" if keyed else ""

    text = f"""\
server:
  bind_address: "127.0.0.1:{port}"
  connection_pool_size: 1100
selection_strategy: RoundRobin
health_checks:
  path: /health
backends:
  - {{name: fast, type: generic, url: "{nginx}", models: [bench], discovery: false{priced("bench")}}}
  - {{name: fast-stream, type: generic, url: "{nginx}/stream", models: [bench-stream], discovery: false\
{priced("bench-stream")}}}
  - {{name: backup, type: generic, url: "{nginx}", models: [bench-backup], discovery: false}}
  - {{name: backup-stream, type: generic, url: "{nginx}/stream", models: [bench-backup-stream], discovery: false}}
  - {{name: slow-stream, type: generic, url: "http://127.0.0.1:{paced_port}", models: [bench-slow], discovery: false}}
"""
    if semantic:
        text += f"""\
  - {{name: embed, type: generic, url: "{nginx}/embed", models: [{EMBED_MODEL}], discovery: false\
{priced(EMBED_MODEL)}}}
"""
    if not features:
        text += "tracing:\n  enabled: false\n"
        if keyed and not db_key:
            text += f"""\
api_keys:
  - id: bench-client
    key: {SWITCHYARD_KEY}
    tier: standard
    allowed_models: ["bench*"]
"""
        text += limits_text(limits_redis, limits_timeout)
    else:
        if not db_key:
            text += f"""\
api_keys:
  - id: bench-client
    key: {SWITCHYARD_KEY}
    tier: standard
    allowed_models: ["bench*"]
"""
        text += limits_text(limits_redis, limits_timeout, key_tail=not db_key)
        text += """\
request_params:
  defaults: {max_tokens: 1024}
  limits:
    temperature: {min: 0, max: 1.5}
    max_tokens: {max: 4096}
"""
        if not semantic:
            text += """\
fallback:
  enabled: true
  fallback_chains:
    bench: [bench-backup]
    bench-stream: [bench-backup-stream]
"""
        text += """\
tracing:
  enabled: true
  headers: {client_ref: X-Client-Ref}
"""
        if otlp is not None:
            text += f"  otlp: {{endpoint: \"{otlp}\", sampling_ratio: 0.1}}\n"
    if ledger is not None:
        text += f"usage:\n  ledger: {ledger}\n"
    if guardrails:
        text += GUARDRAILS
    if cache:
        text += "response_cache:\n  enabled: true\n"
        if semantic:
            text += f"  semantic: {{enabled: true, embedding_model: {EMBED_MODEL}}}\n"
    path.write_text(text)
    return path


# The bench key's rate limit and budget: far above what a run uses, so every call is admitted and counted.
RATE_LIMIT = {"requests_per_minute": 100000000, "tokens_per_minute": 1000000000000}
BUDGET = {"limit_usd": 1000000000, "period": "month"}


def limits_text(limits_redis: str | None, limits_timeout: float | None, key_tail: bool = True) -> str:
    """The bench key's rate limit and budget (RATE_LIMIT, BUDGET) in ``limits_redis``, as the tail of
    its api_keys entry (``key_tail``; a database key holds them itself) followed by the state section;
    nothing without a Redis."""
    if not limits_redis:
        return ""
    text = ""
    if key_tail:
        text += f"""\
    rate_limit: {{{", ".join(f"{k}: {v}" for k, v in RATE_LIMIT.items())}}}
    budget: {{{", ".join(f"{k}: {v}" for k, v in BUDGET.items())}}}
"""
    text += f"""\
state:
  redis_url: "{limits_redis}"
"""
    if limits_timeout is not None:
        text += f"  operation_timeout: {limits_timeout:g}\n"
    return text


GUARDRAILS = """\
guardrails:
  - name: bench-pii
    mode: enforce
    stage: both
    models: ["bench*"]
    detectors: {email: mask, phone: mask, iban: mask, ip_address: mask, payment_card: block, secret: block}
"""


# switchyard-dbkey's database key: the tier and models of switchyard-keyed's config key (bench-client).
DB_KEY_ARGS = ("--id", "bench", "--tier", "standard", "--allowed-model", "bench*")
# ... and switchyard-all's adds the rate limit and budget switchyard-limits' config key has.
DB_KEY_LIMITS_ARGS = ("--rate-limit", ",".join(f"{k}={v}" for k, v in RATE_LIMIT.items()),
                      "--budget", ",".join(f"{k}={v}" for k, v in BUDGET.items()))


def make_db_key(base: list[str], config: Path, env: dict[str, str], timeout: float = 60.0,
                limits: bool = False) -> str:
    """Make the bench's database key with `base keys create` (the target's own build), returning its secret;
    `limits`: with DB_KEY_LIMITS_ARGS.

    Run with the target's environment, so the key and the server secret
    (control-secret) land in the data dir the server will read.
    """
    argv = [*base, "keys", "create", "--config", str(config), *DB_KEY_ARGS,
            *(DB_KEY_LIMITS_ARGS if limits else ()), "--json"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=REPO, env=env,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"{shlex.join(argv)} failed: {exc}") from exc
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    try:
        secret = json.loads(r.stdout)["secret"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"keys create printed no secret ({exc!r}): {r.stdout[:300]}") from exc
    if not isinstance(secret, str) or not secret:
        raise RuntimeError(f"keys create printed no secret: {r.stdout[:300]}")
    return secret


def switchyard_env(workdir: Path, name: str, semantic: bool = False) -> dict[str, str]:
    """A Switchyard process's environment: ours, with XDG_DATA_HOME under the run's work dir.

    server.data_dir defaults to $XDG_DATA_HOME/switchyard, so the ledger
    (usage.db, its spill file) of every target lands in <workdir>/<name>-data,
    never in the user's home, and no two targets share a file. Set in the
    environment rather than the config, since a --base-cmd build may refuse
    keys it does not know; a build without a ledger ignores it.
    `semantic`: also OPENBLAS_NUM_THREADS=1, as docs/cache.md asks of a gateway
    with the semantic cache on (numpy's BLAS would spread each lookup over every core).
    """
    env = {**os.environ, "XDG_DATA_HOME": str(workdir / f"{name}-data")}
    if semantic:
        env["OPENBLAS_NUM_THREADS"] = "1"
    return env


LEDGER_TABLE = "usage_records"   # protocol/stores/sql.py's TABLE: one row per call


def ledger_rows(workdir: Path, name: str) -> int | None:
    """Rows in the SQLite ledger `name` left under the work dir; None when it has no usage.db."""
    path = workdir / f"{name}-data" / "switchyard" / "usage.db"
    if not path.exists():
        return None
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(f"SELECT count(*) FROM {LEDGER_TABLE}").fetchone()[0]


# The headers a production client of switchyard-features sends: its key and trace context.
FEATURES_HEADERS = {"authorization": f"Bearer {SWITCHYARD_KEY}",
                    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    "x-client-ref": "bench-team"}
# What the load generator sends with the span export on (switchyard-all): no traceparent, so each call
# starts its trace and sampling_ratio decides (a client traceparent's sampled flag would export every call).
EXPORT_HEADERS = {k: v for k, v in FEATURES_HEADERS.items() if k != "traceparent"}
# What the load generator sends to switchyard-keyed and switchyard-limits (tracing is off there).
KEY_HEADERS = {"authorization": FEATURES_HEADERS["authorization"]}


# --------------------------------------------------------------------------- LiteLLM

def litellm_pin() -> str:
    """The pinned requirement line (e.g. litellm[proxy]==1.108.7) from litellm.requirements.txt."""
    for line in LITELLM_REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("litellm"):
            return line
    raise RuntimeError(f"no litellm line in {LITELLM_REQUIREMENTS}")


def litellm_master_key() -> str:
    m = re.search(r"^\s*master_key:\s*(\S+)", LITELLM_CONFIG.read_text(), re.M)
    if not m:
        raise RuntimeError(f"no master_key in {LITELLM_CONFIG}")
    return m.group(1).strip("\"'")


def ensure_litellm(cache_root: Path, python: str, timeout: float) -> tuple[Path, float]:
    """Install the pinned LiteLLM proxy into its own venv under `cache_root`, once.

    The venv is reused while the requirements are unchanged (their digest,
    comments left out, is stored in the venv after a successful install),
    so only the first run pays for the download. Returns the `litellm` executable and
    the seconds spent installing (0 when reused).
    """
    requirements = [line.split("#", 1)[0].strip() for line in LITELLM_REQUIREMENTS.read_text().splitlines()]
    digest = hashlib.sha256("\n".join(r for r in requirements if r).encode()).hexdigest()[:16]
    version = re.sub(r"[^\w.]+", "-", litellm_pin().split("==")[-1])
    venv = cache_root / f"litellm-{version}"
    marker, exe = venv / ".bench-installed", venv / "bin" / "litellm"
    if exe.exists() and marker.exists() and marker.read_text().strip() == digest:
        return exe, 0.0
    print(f"installing {litellm_pin()} into {venv} (once; reused by later runs)", flush=True)
    t0 = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"litellm-{version}-install.log"
    with open(log, "wb") as out:
        for argv in ([python, "-m", "venv", str(venv)],
                     [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-r",
                      str(LITELLM_REQUIREMENTS)]):
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=timeout).returncode
            if rc != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                raise RuntimeError(f"{' '.join(argv[:4])} failed ({rc}); log {log}:\n{tail}")
    if not exe.exists():
        raise RuntimeError(f"{exe} missing after install; log {log}")
    marker.write_text(digest + "\n")
    return exe, time.monotonic() - t0


def write_litellm_config(path: Path, nginx_port: int) -> Path:
    text = LITELLM_CONFIG.read_text().replace("@@UPSTREAM@@", f"http://127.0.0.1:{nginx_port}")
    assert not re.search(r"@@[A-Z_]+@@", text), "unfilled placeholder in litellm_config.yaml"
    path.write_text(text)
    return path


def litellm_env() -> dict[str, str]:
    """LiteLLM's environment: no network look-ups, no telemetry, no database, quiet logs.

    The model cost map is otherwise fetched from the internet at import time
    and telemetry is an environment switch, so neither can live in the YAML.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_HOST", "REDIS_URL")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY_DISABLED="true", LITELLM_LOG="ERROR",
               HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


# --------------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server subprocess in its own process group, logging to a file in the work dir.

    `headers` go with every benchmark request (API keys, trace context);
    `warm_path` is a cheap GET used to open client connections before a
    measured burst, so connection set-up is not part of the figures.
    `before_start` runs first in start(), given the server (say, to make a
    key and set the headers that send it); what it raises is start()'s failure.
    `distinct`: the load sends it requests that all differ (loadgen's write_wrk_lua and stream_bodies),
    so its response cache, if any, misses every one.
    """

    def __init__(self, name: str, argv: list[str], port: int, workdir: Path, *, chat_path: str,
                 stream_path: str, stream_model: str, ready_paths: tuple[str, ...], warm_path: str = "/health",
                 headers: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 ready_timeout: float | None = None, before_start: Callable[[Server], None] | None = None,
                 distinct: bool = False):
        self.name, self.argv, self.port, self.workdir = name, argv, port, workdir
        self.distinct = distinct
        self.base = f"http://127.0.0.1:{port}"
        self.chat_path, self.stream_path, self.stream_model = chat_path, stream_path, stream_model
        self.ready_paths, self.warm_path = ready_paths, warm_path
        self.headers = dict(headers or {})
        self.env, self.ready_timeout, self.before_start = env, ready_timeout, before_start
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.before_start is not None:
            self.before_start(self)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=REPO, start_new_session=True, env=self.env)
        log.close()

    def stop(self) -> None:
        """SIGTERM our process group, SIGKILL it if it is still there after 5 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        """Poll the readiness paths until one answers 200 (404 moves on to the next path)."""
        timeout = self.ready_timeout or timeout
        deadline = time.monotonic() + timeout
        last = "no answer"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
                for path in self.ready_paths:
                    try:
                        r = client.get(self.base + path)
                        last = f"GET {path} -> {r.status_code}"
                        if r.status_code == 200:
                            return
                        if r.status_code != 404:
                            break
                    except httpx.HTTPError as exc:
                        last = f"GET {path} -> {type(exc).__name__}"
                        break
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s ({last}):\n{self.log_tail()}")

    def check(self) -> None:
        """One real chat and one real stream request, so we never benchmark 401s or 404s."""
        with httpx.Client(timeout=30.0, headers=self.headers) as client:
            r = client.post(self.base + self.chat_path, json=CHAT_REQUEST)
            if r.status_code != 200 or "choices" not in r.json():
                raise RuntimeError(f"{self.name}: chat check got {r.status_code}: {r.text[:300]}")
            r = client.post(self.base + self.stream_path,
                            json={"model": self.stream_model, "messages": MESSAGES, "stream": True})
            events = [line for line in r.text.splitlines() if line.startswith("data:")]
            if r.status_code != 200 or len(events) != STREAM_EVENTS + 1 or events[-1].strip() != "data: [DONE]":
                raise RuntimeError(f"{self.name}: stream check got {r.status_code}, {len(events)} events: "
                                   f"{r.text[:300]}")


class Redis:
    """A throw-away redis-server on a free 127.0.0.1 port, for the targets whose limits live in Redis.

    Nothing is persisted (no RDB, no AOF); it runs in the work dir, in its
    own process group, logging to redis.log there, and is stopped like the
    other servers.
    """

    SERVER = "/usr/bin/redis-server"   # Debian's redis-server package (as .ci/run installs it)
    CLI = "/usr/bin/redis-cli"

    def __init__(self, workdir: Path, port: int | None = None):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.argv = [self.SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no"]
        self.workdir, self.log_path = workdir, workdir / "redis.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.workdir, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-500:]}")
            with contextlib.suppress(OSError):
                if self.cli("ping").strip() == "PONG":
                    return
            time.sleep(0.1)
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING within {timeout:g}s")

    def cli(self, *args: str) -> str:
        """redis-cli against this server; its stdout."""
        r = subprocess.run([self.CLI, "-p", str(self.port), *args], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise OSError(f"redis-cli {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[:300]}")
        return r.stdout

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(5)
                return
            except subprocess.TimeoutExpired:
                continue


# --------------------------------------------------------------------------- /proc accounting

def proc_snapshot() -> tuple[dict[int, list[int]], dict[int, float]]:
    """(children by parent pid, CPU seconds by pid) for every process, from /proc/<pid>/stat.

    CPU is utime+stime plus cutime+cstime, so work of children that already
    exited and were reaped stays counted in their parent.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # fields[0] is the state (stat field 3)
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return children, cpu


def tree_pids(snapshot, root: int) -> set[int]:
    children, _ = snapshot
    pids, todo = set(), [root]
    while todo:
        pid = todo.pop()
        pids.add(pid)
        todo.extend(children.get(pid, []))
    return pids


def tree_cpu_seconds(root: int, snapshot=None) -> float:
    """CPU seconds of `root` and all its live descendants."""
    snapshot = snapshot or proc_snapshot()
    return sum(snapshot[1].get(pid, 0.0) for pid in tree_pids(snapshot, root))


def memory_mb(pids, field: str = "VmRSS") -> float:
    """Sum of a /proc/<pid>/status memory field (VmRSS now, VmHWM peak) over `pids`, in MB.

    Summing VmHWM over several processes bounds their joint peak from above;
    for the single-process servers measured here it is the peak.
    """
    total_kb = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        m = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
        total_kb += int(m.group(1)) if m else 0
    return total_kb / 1024


def other_cpu_seconds(before, after) -> float:
    """CPU used between two snapshots by processes outside this benchmark's tree and outside kernel threads.

    That is the disturbance: a test suite or build running next to us. A
    process that exited in between had its whole CPU time added to its
    parent's cutime/cstime, so what it had already used before is taken off
    again to count only the interval.
    """
    ours = tree_pids(after, os.getpid()) | tree_pids(before, os.getpid()) | tree_pids(after, 2) | tree_pids(before, 2)
    grown = sum(cpu - before[1].get(pid, 0.0) for pid, cpu in after[1].items() if pid not in ours)
    exited = sum(cpu for pid, cpu in before[1].items() if pid not in ours and pid not in after[1])
    return grown - exited

