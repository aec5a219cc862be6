"""A real browser against a real gateway: Debian's Chromium, driven by Playwright, and ``switchyard serve``
in its own process on a free loopback port with simulated backends.

Playwright's own browser download is never used: Chromium is the Debian package ``.ci/run`` installs
(without it these tests fail, never skip). Each page a test looks at is saved as a PNG under
``build/console-screenshots/`` (``SWITCHYARD_ARTIFACTS`` moves it) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import trio
import yaml

from tests.servers import free_port

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ADMIN_TOKEN = "console-browser-admin-token-0123"
# As the machine's own check starts it: no sandbox (root in CI), no GPU, and none of the background
# connections a closed network refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"]
START_TIMEOUT = 30.0


def artifacts() -> Path:
    folder = Path(os.environ.get("SWITCHYARD_ARTIFACTS", REPO / "build")) / "console-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def secret(key_id: str) -> str:
    return f"sk-{key_id}-0123456789abcdef"


def sim(name: str, models: list[str], **simulation: Any) -> dict[str, Any]:
    return {"name": name, "type": "simulated", "models": models,
            "simulation": {"latency": "20ms", "tokens_per_second": 0, "chunks": 3, **simulation}}


def console_config(data_dir: Path, spare_health: int = 200) -> dict[str, Any]:
    """Three backends for ``demo`` and ``spare``, one broken backend for ``flaky`` (which falls back to
    ``demo``), priced ``demo``, keys for each test that counts its own calls, and checks every second."""
    priced = {"id": "demo", "metadata": {"pricing": {"input_tokens": 2.5, "output_tokens": 10.0}}}
    return {
        "server": {"data_dir": str(data_dir), "shutdown_drain_timeout": "2s"},
        "admin": {"token": ADMIN_TOKEN},
        "selection_strategy": "RoundRobin",
        "health_checks": {"interval": "1s", "timeout": "1s", "unhealthy_threshold": 2},
        "usage": {"flush_interval": "100ms"},
        "retry": {"max_attempts": 1},
        "fallback": {"enabled": True, "fallback_chains": {"flaky": ["demo"]}},
        # team-usage's repeated calls are cache hits (sim-a and sim-b: one cache destination), showing savings
        "response_cache": {"enabled": True, "keys": ["team-usage"],
                           "destinations": [{"name": "demo", "backends": ["sim-a", "sim-b"]}]},
        "api_keys": [{"id": key_id, "key": secret(key_id), **extra} for key_id, extra in (
            ("team-usage", {"organization_id": "acme", "budget": {"limit_usd": 5, "period": "day"},
                            "rate_limit": {"requests_per_minute": 600}}),
            ("team-request", {}), ("team-hostile", {}), ("team-traffic", {}), ("team-many", {}),
            ("team-embeddings", {}), ("team-completions", {}))],
        "backends": [
            {**sim("sim-a", ["demo"]), "model_configs": [priced]},
            {**sim("sim-b", ["demo"]), "model_configs": [priced]},
            sim("sim-spare", ["spare"], health_status=spare_health),
            sim("sim-broken", ["flaky"], failure={"status": 503}),
        ],
    }


class Served:
    """``switchyard serve`` on a free port, its config file, and a way to change it."""

    def __init__(self, root: Path, config: dict[str, Any] | None = None, demo: bool = False) -> None:
        """``config``: what to serve (``console_config`` when None); ``demo``: the embedded demo, no file (its
        ledger under ``root``)."""
        self.root = root
        self.config_path = root / "console.yaml"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if demo:
            source = []
            env["XDG_DATA_HOME"] = str(root / "data")
        else:
            self.write(config if config is not None else console_config(root / "data"))
            source = ["--config", str(self.config_path)]
        self.log_path = root / "serve.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "switchyard.protocol.serving.cli", "serve", *source,
             "--bind", f"127.0.0.1:{self.port}", "--log-level", "warning", "--no-watch"],
            cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def write(self, config: dict[str, Any]) -> None:
        self.config_path.write_text(yaml.safe_dump(config), encoding="utf-8")

    def admin(self, method: str, path: str) -> httpx.Response:
        return httpx.request(method, self.url + path, headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
                             timeout=10)

    def wait_ready(self) -> None:
        trio.run(self._ready)

    async def _ready(self) -> None:
        with trio.fail_after(START_TIMEOUT):
            async with httpx.AsyncClient(timeout=1) as http:
                while True:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"switchyard serve exited with {self.proc.returncode}; see {self.log.name}")
                    try:
                        if (await http.get(self.url + "/ready")).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("console"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK) and not shutil.which("chromium"):
        pytest.fail(f"Chromium ({CHROMIUM}) is missing: the console's tests need a real browser; .ci/run "
                    "installs it (apt-get install chromium)", pytrace=False)
    with sync_playwright() as playwright:
        found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
        chromium = playwright.chromium.launch(executable_path=found, args=CHROMIUM_ARGS, timeout=30_000)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    """A new browser context (no cookie yet) on the console's login form; page errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    # An answer's status is not a script error (a rejected reload is a 422 the page shows); a CSP refusal is.
    tab.on("console", lambda msg: errors.append(f"console {msg.type}: {msg.text}")
           if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    try:
        yield tab
        assert errors == [], errors   # a script error or a blocked (CSP) load is a bug
    finally:
        context.close()


def log_in(page: Any, served: Served, token: str = ADMIN_TOKEN) -> None:
    page.goto(served.url + "/admin/ui/")
    page.fill("#token", token)
    page.click("button[type=submit]")


def screenshot(page: Any, name: str) -> Path:
    path = artifacts() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
