// Backends: health and why, circuits per model, engine load, observed quota, the KV index and calls in flight,
// every few seconds, from GET /admin/backends and GET /admin/stats/backends. Times there are the gateway's own clock:
// ages are `now` minus them, read from the same answer.
"use strict";

(() => {
  const {el, table, age, ms, percent, count, badge, replace, content, section} = Console;
  const REFRESH = 3;

  // The state a backend's row shows: a backend no check judges (checks off) is "unchecked", whatever state its
  // record keeps from the start.
  function state(b, checksOn) {
    if (!b.enabled) return "disabled";
    return b.health && checksOn ? b.health.state : "unchecked";
  }

  // A record no check has moved keeps since = 0 (not a time on the gateway's clock): it dates from the start.
  function since(h, now) {
    if (h.last_check === null || h.last_check === undefined) return "not checked yet";
    return h.since ? `since ${age(now - h.since)}` : "since start";
  }

  function health(b, now, checksOn) {
    const shown = state(b, checksOn);
    if (shown === "disabled") return el("div", null, badge("disabled"));
    const h = b.health;
    if (shown === "unchecked") {
      return el("div", null, badge("unchecked"), el("div", {class: "muted"}, "health checks off"));
    }
    return el("div", null, badge(h.state),
      el("div", {class: "muted"}, since(h, now)),
      h.last_error ? el("div", {class: "why"}, h.last_error) : null,
      h.failures ? el("div", {class: "muted"}, `${h.failures} failed check(s) in a row`) : null);
  }

  function circuits(b, now) {
    const entries = Object.entries(b.circuits || {});
    if (!entries.length) return el("span", {class: "muted"}, "none yet");
    return el("ul", {class: "plain"}, entries.map(([model, c]) => el("li", {"data-model": model},
      el("span", {class: "model"}, model), " ", badge(c.state),
      c.opened_at !== null && c.opened_at !== undefined ? ` since ${age(now - c.opened_at)}` : "",
      c.failures ? ` · ${c.failures} failure(s)` : "")));
  }

  function engine(stats) {
    const e = stats && stats.engine_stats;
    if (!e) return el("span", {class: "muted"}, "not polled");
    const s = e.snapshot;
    const poll = e.poll && e.poll.last_error ? el("div", {class: "why"}, `poll: ${e.poll.last_error}`) : null;
    if (!s) return el("div", null, el("span", {class: "muted"}, "no sample yet"), poll);
    return el("div", null,
      el("div", null, `queue ${s.waiting} · running ${s.running}${s.total_slots ? ` of ${s.total_slots}` : ""}`),
      s.kv_cache_usage !== null ? el("div", null, `KV cache ${percent(s.kv_cache_usage)}`) : null,
      e.throughput_tokens_per_second !== null
        ? el("div", null, `${count(e.throughput_tokens_per_second)} tokens/s`) : null,
      el("div", {class: s.fresh ? "muted" : "stale"}, `${s.engine}, ${age(s.age)}${s.fresh ? "" : " (stale)"}`),
      poll);
  }

  function quota(stats) {
    const q = stats && stats.quota;
    if (!q) return el("span", {class: "muted"}, "none observed");
    return el("div", null,
      q.requests_ratio !== null ? el("div", null, `requests left ${percent(q.requests_ratio)}`) : null,
      q.tokens_ratio !== null ? el("div", null, `tokens left ${percent(q.tokens_ratio)}`) : null,
      el("div", {class: q.fresh ? "muted" : "stale"}, `${age(q.age)}${q.fresh ? "" : ` (older than ${q.ttl} s)`}`));
  }

  // What the KV index knows of the backend's engine cache: its state (events, unknown, approximate), the blocks it
  // holds, and the share of the calls sent there that found some of their prompt held.
  function kvIndex(b, enabled) {
    const k = b.kv_index;
    if (!enabled || !k) return el("span", {class: "muted"}, "index off");
    return el("div", null, badge(k.state),
      el("div", null, `${count(k.entries)} block(s)`),
      el("div", {class: "muted"}, k.hit_ratio === null ? "no call scored yet"
        : `hit ratio ${percent(k.hit_ratio)} of ${count(k.picks)} call(s)`));
  }

  async function render() {
    const [backends, stats] = await Promise.all([Console.get("backends"), Console.get("stats/backends")]);
    const byName = Object.fromEntries(stats.backends.map((s) => [s.name, s]));
    const now = backends.now;
    const checksOn = backends.health_checks_enabled;
    const rows = backends.backends;
    const down = rows.filter((b) => b.health && b.health.state === "unhealthy").length;
    const summary = el("p", {class: "summary"}, `${rows.length} backend(s)`,
      down ? el("strong", {class: "bad"}, ` · ${down} unhealthy`) : " · none unhealthy",
      backends.health_checks_enabled ? "" : " · health checks are off");
    const grid = table([
      {title: "Backend", value: (b) => el("div", null, el("strong", null, b.name),
        el("div", {class: "muted"}, `${b.type} · ${b.url}`))},
      {title: "Health", value: (b) => health(b, now, checksOn)},
      {title: "Circuits by model", value: (b) => circuits(b, now)},
      {title: "In flight", numeric: true, value: (b) => count(b.in_flight)},
      {title: "Latency (avg)", numeric: true, value: (b) => ms(b.latency_avg === null ? null : b.latency_avg * 1000)},
      {title: "Engine load", value: (b) => engine(byName[b.name])},
      {title: "Observed quota", value: (b) => quota(byName[b.name])},
      {title: "KV index", value: (b) => kvIndex(b, backends.kv_cache_index_enabled)},
    ], rows, (b) => ({"data-backend": b.name, "data-state": state(b, checksOn)}), "No backends configured.");
    replace(content, summary, section("Backends", grid));
  }

  Console.every(REFRESH, render);
})();
