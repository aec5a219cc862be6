"""Run the Open Responses compliance suite against the demo gateway, on 127.0.0.1, and print its count.

The suite is TypeScript run by Bun (github.com/openresponses/openresponses,
``bin/compliance-test.ts``; 17 checks over HTTP and the Responses websocket).
It is not a package, so it cannot run in the test command: give this script a
checkout of that repository whose ``node_modules`` holds ``zod`` 3, and a
``bun`` binary (the npm package ``bun``). It starts ``switchyard serve`` with
the demo config on a free loopback port, runs the suite once with ``--json``,
prints each failed check and the count, and stops the gateway.

    python tests/perf/openresponses_compliance.py --suite ~/openresponses --bun node_modules/.bin/bun

The checks the suite makes over HTTP are also made in pytest
(tests/actors/test_demo_schemas.py), on every test run.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(base: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/v1/models", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the gateway did not answer within 30 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", required=True, type=Path, help="a checkout of openresponses/openresponses")
    parser.add_argument("--bun", default="bun", help="the bun binary")
    parser.add_argument("--timeout", type=float, default=300, help="seconds the suite may take")
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gateway = subprocess.Popen([sys.executable, "-m", "switchyard.protocol.serving.cli", "serve", "--config",
                                str(ROOT / "config" / "demo.yaml"), "--bind", f"127.0.0.1:{port}", "--no-watch",
                                "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(base, time.monotonic() + 30)
        run = subprocess.run([args.bun, "run", "bin/compliance-test.ts", "--base-url", f"{base}/v1", "--api-key",
                              "sk-demo", "--model", "demo", "--json"], cwd=args.suite, capture_output=True,
                             text=True, timeout=args.timeout)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    report = json.loads(run.stdout)
    for result in report["results"]:
        if result["status"] == "failed":
            print(f"failed {result['id']}: {'; '.join(e[:200] for e in result.get('errors') or [])}")
    summary = report["summary"]
    print(f"Open Responses compliance against the demo: {summary['passed']} of {summary['total']} checks pass "
          f"({summary['failed']} fail, {summary['skipped']} skipped)")
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
