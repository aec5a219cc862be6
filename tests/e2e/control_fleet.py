"""What ``test_control_fleet_e2e.py`` drives a fleet with: ``switchyard serve`` instances on one PostgreSQL
ledger and one Redis, their alerts POSTed to one webhook, connections pinned to each worker, and calls through
the official ``openai`` SDK (httpx for the load).

A connection reaches one worker of an instance (they share its listening
socket); which one is told by a first call's trace, which only the worker
that served the call knows. A pinned connection notes the local port of
every answer: more than one means it was opened anew, perhaps to the other
worker, and ``stayed`` fails the test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Awaitable, Callable

import attrs
import httpx
import openai
import trio
import yaml

from tests.e2e.support import REPO, backend, free_port, gateway_config
from tests.e2e.test_ledger_e2e import pids_saying

ENV = "SWITCHYARD_CONTROL_SECRET"
INSTANCES = ("one", "two", "three")
ADMIN = "control-fleet-admin-token-0123"
CONFIG_KEY = "sk-config-0123456789abcdef"
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
CHAT = {"model": "demo", "messages": MESSAGES}
WORKERS = 2
START_BOUND = 60.0   # seconds three instances of two workers may take to serve, on two shared cores
PIN_BOUND = 30.0     # seconds to find a connection to each worker of an instance
PROPAGATION = 2.0    # seconds a change made on one instance may take to apply on every worker of every one
CALL_TIMEOUT = 10.0  # seconds any one call may take: a call past it is a hung call, and fails the test
ALERTS_INTERVAL = 1.0   # seconds between two rounds of each worker's alerts actor
FLUSH = 0.1             # seconds a worker may hold a call's usage record before the ledger has it


# --- the fleet ---------------------------------------------------------------------------------------------

@attrs.frozen
class Instance:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


@attrs.frozen
class Stores:
    """What every instance is pointed at: the PostgreSQL database (the ledger, the keys, the alerts' claims),
    the Redis its limits and budgets count in, and the URL its alerts are POSTed to."""

    ledger: str
    redis: str
    webhook: str


@attrs.frozen
class Fleet:
    instances: list[Instance]
    stores: Stores
    root: Path
    webhook: socket.socket   # listening on the webhook's port since before the fleet started (tests/webhooks.py)


def instance_config(data_dir: Path, stores: Stores) -> dict[str, Any]:
    """One instance's config. Only a ``budget.threshold`` alert reaches the webhook, and only above 80 %: a
    burst over six workers is recorded by each apart, so a lower fraction could be crossed by the records of
    some workers before the others' pass 80 %."""
    config = gateway_config(backend("sim", latency="1ms", chunks=1), health_checks={"interval": "1h"})
    config["server"] = {**config["server"], "data_dir": str(data_dir), "shutdown_drain_timeout": "1s"}
    config["usage"] = {"ledger": stores.ledger, "flush_interval": f"{FLUSH * 1000:g}ms"}
    config["state"] = {"redis_url": stores.redis, "fleet_workers": len(INSTANCES) * WORKERS}
    config["alerts"] = {"interval": f"{ALERTS_INTERVAL:g}s", "budget_thresholds": [0.8, 1.0],
                        "webhooks": [{"url": stores.webhook, "events": ["budget.threshold"]}]}
    config["admin"] = {"token": ADMIN}
    config["api_keys"] = [{"id": "config-key", "key": CONFIG_KEY}]
    return config


def start(root: Path, name: str, stores: Stores, secret: str | None, workers: int = WORKERS) -> Instance:
    """``switchyard serve`` at INFO on a free port, with ``SWITCHYARD_CONTROL_SECRET`` set to ``secret`` (None:
    unset, whatever this process has), not waited for (``ready``)."""
    home = root / name
    home.mkdir(parents=True, exist_ok=True)
    path, log_path, port = home / "cli.yaml", home / "serve.log", free_port()
    path.write_text(yaml.safe_dump(instance_config(home / "data", stores)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if secret is not None:
        env[ENV] = secret
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "switchyard.protocol.serving.cli", "serve", "--config", str(path),
             "--bind", f"127.0.0.1:{port}", "--log-level", "info", "--workers", str(workers)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Instance(name, f"http://127.0.0.1:{port}", proc, log_path)


async def ready(instances: list[Instance], workers: int = WORKERS) -> None:
    """Every worker of every instance logged that it serves, and /ready says so."""
    with trio.fail_after(START_BOUND):
        async with httpx.AsyncClient(timeout=2) as http:
            for instance in instances:
                while True:
                    assert instance.proc.poll() is None, instance.log.read_text()
                    try:
                        if (len(pids_saying(instance.log, "serving ")) == workers
                                and (await http.get(instance.url + "/ready")).status_code == 200):
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)


def stop(instance: Instance) -> None:
    if instance.proc.poll() is None:
        instance.proc.terminate()
        try:
            instance.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            instance.proc.kill()
            instance.proc.wait(timeout=10)


# --- reaching each worker ----------------------------------------------------------------------------------

@attrs.define(eq=False)
class Worker:
    """One connection to one worker of an instance; ``ports``: the local ports its answers came on (one, or
    the connection was opened anew and may have landed on the other worker)."""

    name: str   # instance/worker.connection
    url: str
    http: httpx.AsyncClient
    ports: set[int]

    @property
    def instance(self) -> str:
        return self.name.split("/")[0]


def connection(url: str) -> tuple[httpx.AsyncClient, set[int]]:
    """A client of one connection at most, noting the local port of every answer."""
    ports: set[int] = set()

    async def note(response: httpx.Response) -> None:
        ports.add(response.extensions["network_stream"].get_extra_info("client_addr")[1])

    http = httpx.AsyncClient(base_url=url, timeout=CALL_TIMEOUT, event_hooks={"response": [note]},
                             limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
    return http, ports


async def knows(http: httpx.AsyncClient, request_id: str) -> bool:
    """Whether the worker at the other end served ``request_id`` (its trace is in that worker's memory)."""
    reply = await http.get(f"/admin/requests/{request_id}/events", headers=ADMIN_HEADERS)
    assert reply.status_code in (200, 404), reply.text
    return reply.status_code == 200 and reply.json()["source"] == "worker"


async def pin(stack: AsyncExitStack, instance: Instance, per_worker: int = 1) -> list[Worker]:
    """``per_worker`` connections to each of the instance's workers, open until ``stack`` ends."""
    async def opened() -> Worker:
        http, ports = connection(instance.url)
        stack.push_async_callback(http.aclose)
        return Worker(instance.name, instance.url, http, ports)

    first = await opened()
    made = await first.http.post("/v1/chat/completions", json=CHAT, headers=bearer(CONFIG_KEY))
    assert made.status_code == 200, made.text
    request_id = made.headers["x-request-id"]
    groups: dict[bool, list[Worker]] = {True: [first], False: []}
    with trio.fail_after(PIN_BOUND):
        while not await knows(first.http, request_id):   # its trace is kept moments after the answer
            await trio.sleep(0.02)
        while min(len(group) for group in groups.values()) < per_worker:
            worker = await opened()
            group = groups[await knows(worker.http, request_id)]
            if len(group) < per_worker:
                group.append(worker)
            else:
                await worker.http.aclose()
    for k, group in enumerate(groups.values()):
        for j, worker in enumerate(group):
            worker.name = f"{instance.name}/{k}.{j}"
    return groups[True] + groups[False]


async def pin_fleet(stack: AsyncExitStack, fleet: Fleet, per_worker: int = 1) -> list[Worker]:
    return [worker for instance in fleet.instances for worker in await pin(stack, instance, per_worker)]


def stayed(workers: list[Worker]) -> None:
    """Every connection answered on the one socket it was opened on: each reached the worker it was pinned to."""
    moved = {w.name: sorted(w.ports) for w in workers if len(w.ports) != 1}
    assert not moved, f"connections opened anew (maybe to another worker): {moved}"


# --- calls -------------------------------------------------------------------------------------------------

def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


ADMIN_HEADERS = bearer(ADMIN)


def sdk(worker: Worker, secret: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=worker.url + "/v1", api_key=secret, max_retries=0, timeout=CALL_TIMEOUT,
                              http_client=worker.http)


async def sdk_call(worker: Worker, secret: str, chat: bool = True) -> tuple[int, str | None]:
    """One call through the openai SDK on the worker's connection: (status, error code); (0, "timeout") past
    ``CALL_TIMEOUT``. ``chat``: a chat completion, else ``GET /v1/key``: a GET, whose refusal keeps the
    connection (a POST refused before its body has all arrived may be closed after the 401, and opened anew
    it may land on the other worker)."""
    status, code, _ = await sdk_answer(worker, secret, chat)
    return status, code


async def sdk_answer(worker: Worker, secret: str, chat: bool = True) -> tuple[int, str | None, Any]:
    """``sdk_call`` with the answer's body."""
    client = sdk(worker, secret)
    try:
        with trio.fail_after(CALL_TIMEOUT + 1):
            if chat:
                answer: Any = await client.chat.completions.create(model="demo", messages=MESSAGES)
                assert answer.choices[0].message.content
            else:
                answer = await client.get("/key", cast_to=object)
    except openai.APIStatusError as exc:
        return exc.status_code, exc.code, exc.body
    except (trio.TooSlowError, openai.APITimeoutError):
        return 0, "timeout", None
    return 200, None, answer


async def admin(instance: Instance, method: str, path: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=instance.url, timeout=CALL_TIMEOUT, headers=ADMIN_HEADERS) as http:
        with trio.fail_after(CALL_TIMEOUT + 1):
            return await http.request(method, path, json=body)


async def create_key(instance: Instance, **body: Any) -> dict[str, Any]:
    reply = await admin(instance, "POST", "/admin/keys", body)
    assert reply.status_code == 201, reply.text
    return reply.json()


async def known_everywhere(workers: list[Worker], key_id: str, secret: str, chat: bool = True) -> None:
    """Every worker holds the key in its view (``GET /admin/keys/{id}`` reads the view) and answers it (a chat
    call, or ``GET /v1/key``: one that spends nothing)."""
    with trio.fail_after(PROPAGATION * 3):
        for worker in workers:
            while (await worker.http.get(f"/admin/keys/{key_id}", headers=ADMIN_HEADERS)).status_code != 200:
                await trio.sleep(0.05)
            assert await sdk_call(worker, secret, chat) == (200, None)


@attrs.frozen
class Shot:
    worker: str      # the Worker's name, or the instance's for a call on a connection of any worker
    what: str        # which secret, or which kind of call
    started: float   # trio time the call went
    took: float
    status: int      # 0: no answer within CALL_TIMEOUT
    code: str | None


async def shoot(shots: list[Shot], worker: str, what: str, call: Callable[[], Awaitable[tuple[int, str | None]]]
                ) -> Shot:
    began = trio.current_time()
    status, code = await call()
    shots.append(shot := Shot(worker, what, began, trio.current_time() - began, status, code))
    return shot


async def paced(period: float, until: Callable[[], bool], step: Callable[[], Awaitable[None]]) -> None:
    """``step`` every ``period`` seconds (at once when behind) until ``until()``."""
    next_at = trio.current_time()
    while not until():
        await step()
        next_at += period
        await trio.sleep_until(max(next_at, trio.current_time()))


async def raw_call(http: httpx.AsyncClient, method: str, path: str, secret: str, body: Any = None
                   ) -> tuple[int, str | None]:
    with trio.move_on_after(CALL_TIMEOUT):
        reply = await http.request(method, path, json=body, headers=bearer(secret))
        return reply.status_code, (reply.json().get("error") or {}).get("code")
    return 0, "timeout"


def first_and_last(shots: list[Shot], since: float) -> dict[str, tuple[float | None, float | None]]:
    """Per instance: when the last 200 and the first 401 went, in seconds from ``since``."""
    out = {}
    for instance in sorted({s.worker.split("/")[0] for s in shots}):
        mine = [s for s in shots if s.worker.split("/")[0] == instance]
        ok = [s.started - since for s in mine if s.status == 200]
        refused = [s.started - since for s in mine if s.status == 401]
        out[instance] = (round(max(ok), 3) if ok else None, round(min(refused), 3) if refused else None)
    return out


