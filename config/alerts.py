"""Budget and key alerts (``alerts``): which events are POSTed to which webhooks, and when.

``budget.threshold`` fires when a key's or an organization's spend in its
budget's current period crosses one of ``budget_thresholds`` (a fraction of
the USD or the token limit); ``key.revoked`` when a database key is revoked;
``key.expiring`` when a database key's ``expires_at`` is within
``expiry_notice``. Each is claimed once for the fleet in the ledger's database
and delivered off the request path (``actors/alerts/``, docs/alerts.md).
"""

from __future__ import annotations

import math
from typing import Any

from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, load_section
from switchyard.config.rules import Invalid, Reader, child
from switchyard.config.telemetry import otlp_headers

EVENTS = ("budget.threshold", "key.revoked", "key.expiring")
FORMATS = ("json", "slack")
DAY = 86_400.0


def _fraction(value: Any) -> float:
    amount = rules.number()(value)
    if not (0 < amount <= 1) or not math.isfinite(amount):
        raise Invalid(f"must be a fraction in (0, 1], got {value!r}")
    return amount


def _thresholds(value: Any) -> tuple[float, ...]:
    out = rules.list_of(_fraction, "fractions in (0, 1]")(value)
    if not out:
        raise Invalid("must name at least one fraction (drop alerts.webhooks to send none)")
    return tuple(sorted(set(out)))


@frozen
class AlertWebhook:
    """One receiver: every event (or those ``events`` names), as JSON or as a Slack incoming webhook's text."""

    url: str = field("", values.http_url, secret=True)   # a Slack URL is its own credential: masked
    format: str = field("json", values.words(*FORMATS))
    headers: tuple[tuple[str, str], ...] = field((), otlp_headers, secret=True)   # masked by the admin API
    events: tuple[str, ...] = field((), rules.string_list(values.words(*EVENTS)))   # empty: every event

    def wants(self, event: str) -> bool:
        return not self.events or event in self.events


@frozen
class AlertsConfig:
    webhooks: tuple[AlertWebhook, ...] = ()
    budget_thresholds: tuple[float, ...] = field((0.5, 0.8, 1.0), _thresholds)
    # how long before a database key's expires_at its key.expiring alert is sent
    expiry_notice: float = field(7 * DAY, rules.duration(minimum=60, maximum=365 * DAY))
    # seconds between two rounds of evaluation (each worker's)
    interval: float = field(10.0, rules.duration(minimum=1, maximum=3600))
    # how long a claimed alert's row is kept (a total budget's rows are kept for good: they are its claims)
    retention: float = field(90 * DAY, rules.duration(minimum=32 * DAY, maximum=3650 * DAY))

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks)


def _url_required(hook: AlertWebhook, r: Reader) -> None:
    if not r.has("url"):
        r.problems.error(child(r.path, "url"), "is required")


def _retention_past_notice(config: AlertsConfig, r: Reader) -> None:
    """A ``key.expiring`` row pruned while its key has not expired yet would be claimed and sent again."""
    if config.retention <= config.expiry_notice + DAY:
        least = (config.expiry_notice + DAY) / DAY
        r.problems.error(child(r.path, "retention"), f"must be longer than alerts.expiry_notice plus a day "
                                                     f"({least:g}d), got {config.retention / DAY:g}d")


def alerts(r: Reader) -> AlertsConfig:
    """``alerts``: its webhooks (a list of mappings, each read by the declared walk), then the rest."""
    hooks = tuple(load_section(AlertWebhook, item, _url_required) for item in r.items("webhooks"))
    return load_section(AlertsConfig, r, _retention_past_notice, webhooks=hooks)
