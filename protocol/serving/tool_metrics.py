"""``/metrics`` for MCP tool calls: a counter and a latency histogram by server, tool and outcome.

Server names are the configured ones; tool names come from the servers'
listings and the clients' calls, so at most ``TOOL_LABEL_LIMIT`` of them
become label values per process and later ones count as ``other``.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Histogram

from switchyard.actors import safe_text
from switchyard.actors.mcp.records import ToolCall

log = logging.getLogger("switchyard.metrics")

OTHER = "other"
TOOL_LABEL_LIMIT = 200
TOOL_NAME_MAX = 128
# A tool answers in milliseconds (a lookup) to minutes (a build, a crawl).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ToolMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "switchyard_mcp_tool_calls", "MCP tool calls through /mcp, by server, tool (its name on the server) "
            "and outcome (ok, tool_error, timeout, result_too_large, unavailable, invalid, upstream_error, "
            "rate_limited, client_disconnected)", ["server", "tool", "outcome"], registry=registry)
        self.duration = Histogram(
            "switchyard_mcp_tool_call_duration_seconds", "MCP tool call duration, accepted to answered, by server, "
            "tool and outcome", ["server", "tool", "outcome"], buckets=DURATION_BUCKETS, registry=registry)
        self._tools: set[str] = set()
        self._full_logged = False

    def observe(self, call: ToolCall) -> None:
        tool = self._label(call.tool)
        self.calls.labels(call.server, tool, call.outcome).inc()
        self.duration.labels(call.server, tool, call.outcome).observe(max(call.seconds, 0.0))

    def _label(self, tool: str) -> str:
        if tool in self._tools:
            return tool
        if len(tool) > TOOL_NAME_MAX or not safe_text.is_clean(tool):
            return OTHER
        if len(self._tools) >= TOOL_LABEL_LIMIT:
            if not self._full_logged:
                self._full_logged = True
                log.warning("metrics: %d MCP tool label values in use; further tools count as 'other'",
                            TOOL_LABEL_LIMIT)
            return OTHER
        self._tools.add(tool)
        return tool
