"""The ``alerts`` section: its defaults, and every bad value refused with its field path."""

from switchyard.config.load import load_text
from tests.unit.test_config import MINIMAL, errors_of


def test_alerts_default_to_no_webhooks_thresholds_half_four_fifths_all_and_a_week_notice():
    alerts = load_text(MINIMAL, env={}).snapshot.alerts
    assert (alerts.webhooks, alerts.budget_thresholds, alerts.expiry_notice) == ((), (0.5, 0.8, 1.0), 7 * 86_400.0)


def test_a_webhook_reads_its_format_headers_from_the_environment_and_events():
    text = MINIMAL + """
alerts:
  budget_thresholds: [0.9, 0.25]
  expiry_notice: 2d
  webhooks:
    - {url: "https://hooks.example.com/x", format: slack, headers: {authorization: "Bearer ${HOOK_TOKEN}"},
       events: [budget.threshold]}
"""
    alerts = load_text(text, env={"HOOK_TOKEN": "t0k"}).snapshot.alerts
    [hook] = alerts.webhooks
    assert (hook.format, hook.headers, hook.events) == ("slack", (("authorization", "Bearer t0k"),),
                                                        ("budget.threshold",))
    assert hook.wants("budget.threshold") and not hook.wants("key.revoked")
    assert (alerts.budget_thresholds, alerts.expiry_notice) == ((0.25, 0.9), 2 * 86_400.0)


def test_bad_alerts_are_refused_with_their_field_paths():
    errors = errors_of(MINIMAL + """
alerts:
  budget_thresholds: [0.5, 1.5]
  expiry_notice: soon
  webhooks:
    - {url: "ftp://x", format: xml, events: [budget.crossed]}
    - {format: json}
    - {url: "http://x", colour: red}
""")
    text = "\n".join(errors)
    assert "alerts.budget_thresholds" in text and "item [1] must be a fraction in (0, 1], got 1.5" in text
    assert "alerts.expiry_notice" in text
    assert "alerts.webhooks[0].url" in text and "alerts.webhooks[0].format" in text
    assert "alerts.webhooks[0].events" in text and "budget.crossed" in text
    assert "alerts.webhooks[1].url: is required" in text
    assert "alerts.webhooks[2].colour: unknown key" in text


def test_interval_and_retention_default_to_10_s_and_90_days_and_are_bounded():
    alerts = load_text(MINIMAL, env={}).snapshot.alerts
    assert (alerts.interval, alerts.retention) == (10.0, 90 * 86_400.0)
    text = "\n".join(errors_of(MINIMAL + "alerts: {interval: 500ms, retention: 7d}\n"))
    assert "alerts.interval" in text and "alerts.retention" in text


def test_a_retention_not_past_the_expiry_notice_and_a_day_is_refused():
    errors = errors_of(MINIMAL + "alerts: {expiry_notice: 60d, retention: 40d}\n")
    assert errors == ["alerts.retention: must be longer than alerts.expiry_notice plus a day (61d), got 40d"], errors
