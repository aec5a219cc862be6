"""``switchyard serve`` with the embedded demo on loopback prints the console's link, which logs in on every
worker; on a wildcard address it prints none and the console stays off (docs/console.md#the-demos-link)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import httpx
import trio

from tests.e2e.support import switchyard_serve

DEMO = None   # no --config
LINK = re.compile(r"(http://127\.0\.0\.1:\d+/admin/ui/\?token=([A-Za-z0-9_-]+))\n")


async def printed_link(log_path: Path) -> tuple[str, str]:
    """The link and its token, from what ``serve`` printed (the first worker prints it once listening)."""
    with trio.fail_after(10):
        while not (found := LINK.search(log_path.read_text())):
            await trio.sleep(0.05)
    return found.group(1), found.group(2)


def worker_pids(parent: int) -> list[int]:
    """The worker processes ``serve`` spawned (not multiprocessing's resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return sorted(found)


async def test_the_printed_link_logs_into_the_console_and_leaves_the_address_bar_without_the_token(tmp_path):
    async with switchyard_serve(tmp_path, DEMO, log_level="info") as (_, url, log_path):
        link, token = await printed_link(log_path)
        assert link.startswith(url + "/admin/ui/?token=")
        async with httpx.AsyncClient(timeout=5, follow_redirects=True) as browser:
            page = await browser.get(link)
            assert [r.status_code for r in page.history] == [303]
            assert str(page.url) == url + "/admin/ui/"   # redirected without the token
            assert page.status_code == 200
            assert 'src="static/backends.js"' in page.text
            # the same token is the admin API's bearer token for this run
            api = await browser.get(url + "/admin/backends", headers={"authorization": f"Bearer {token}"})
            assert api.status_code == 200
        async with httpx.AsyncClient(timeout=5) as stranger:
            wrong = await stranger.get(url + "/admin/ui/?token=" + "x" * 43)
            assert wrong.status_code == 401
            assert "set-cookie" not in wrong.headers
            assert (await stranger.get(url + "/admin/ui/")).headers["location"] == "login?next=backends"
    assert log_path.read_text().count(token) == 1   # printed once, logged nowhere


async def test_every_worker_takes_the_printed_token(tmp_path):
    async with switchyard_serve(tmp_path, DEMO, workers=2) as (proc, url, log_path):
        link, _ = await printed_link(log_path)
        workers = worker_pids(proc.pid)
        assert len(workers) == 2, workers
        for paused in workers:
            # With one worker stopped, the other accepts every new connection.
            os.kill(paused, signal.SIGSTOP)
            try:
                async with httpx.AsyncClient(timeout=10) as browser:
                    exchanged = await browser.get(link)
                    assert exchanged.status_code == 303, (paused, exchanged.status_code)
                    assert (await browser.get(url + "/admin/ui/")).status_code == 200
            finally:
                os.kill(paused, signal.SIGCONT)
    assert len(LINK.findall(log_path.read_text())) == 1


async def test_a_wildcard_address_prints_no_link_and_the_console_stays_off(tmp_path):
    async with switchyard_serve(tmp_path, DEMO, host="0.0.0.0", log_level="info") as (_, url, log_path):
        async with httpx.AsyncClient(timeout=5) as http:
            assert (await http.get(url + "/admin/ui/")).status_code == 404
            assert (await http.get(url + "/admin/ui/?token=x")).status_code == 404
    out = log_path.read_text()
    assert "Running on http://0.0.0.0:" in out and "token=" not in out


async def test_a_demo_that_could_not_start_prints_no_link(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocked))   # the demo's SQLite ledger cannot be opened
    async with switchyard_serve(tmp_path, DEMO, ready=False) as (proc, _, log_path):
        with trio.fail_after(15):
            await proc.wait()
    out = log_path.read_text()
    assert proc.returncode == 1 and "startup failed" in out, out
    assert "token=" not in out
