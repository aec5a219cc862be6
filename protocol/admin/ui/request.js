// One request: found by its x-continuum-request-id; its route events (GET /admin/requests/{id}/events: every
// attempt, its backend, outcome and timings, and the retry and fallback decisions) and its ledger record
// (GET /admin/usage/requests/{id}).
"use strict";

(() => {
  const {el, table, ms, usd, count, replace, content, section, dateTime, badge} = Console;
  const input = el("input", {type: "search", id: "request-id", name: "id", placeholder: "req_…", size: 44,
    required: true, spellcheck: "false", autocomplete: "off"});
  const form = el("form", {class: "controls", id: "request-form"}, el("label", {for: "request-id"},
    "x-continuum-request-id "), input, el("button", {type: "submit"}, "Find"));
  const result = el("div", {id: "request-result"});
  replace(content, form, result);

  // What each attempt came to: its selected event opens it, its failure (or the terminal event) closes it.
  function attempts(events) {
    const out = new Map();
    for (const e of events) {
      if (!e.attempt) continue;
      const a = out.get(e.attempt) || {attempt: e.attempt, backend: e.backend, model: e.model, start: e.t_ms,
        end: null, outcome: "in progress", why: null};
      if (e.event === "selected") Object.assign(a, {backend: e.backend, model: e.model, start: e.t_ms});
      if (e.event === "attempt_failed") {
        const d = e.detail || {};
        Object.assign(a, {end: e.t_ms, outcome: `failed: ${d.kind}${d.status ? ` ${d.status}` : ""}`,
          why: d.error || (d.timeout ? `timeout (${d.timeout})` : null)});
      }
      if (e.event === "completed" || e.event === "failed" || e.event === "client_disconnected") {
        if (a.end === null) Object.assign(a, {end: e.t_ms, outcome: e.event, why: (e.detail || {}).error || null});
      }
      out.set(e.attempt, a);
    }
    return [...out.values()];
  }

  function detail(e) {
    return e.detail ? JSON.stringify(e.detail) : null;
  }

  function recordTable(record) {
    const shown = [["status", record.status], ["error code", record.error_code], ["key", record.key_id],
      ["organization", record.organization_id], ["endpoint", record.endpoint], ["model asked", record.model],
      ["model served", record.served_model], ["backend", record.backend], ["attempts", record.attempts],
      ["input tokens", count(record.input_tokens)], ["output tokens", count(record.output_tokens)],
      ["cached tokens", count(record.cached_tokens)], ["cost", usd(record.cost)],
      ["estimated", record.estimated ? "yes (no usage came back)" : "no"], ["latency", ms(record.latency_ms)],
      ["time to first byte", ms(record.ttfb_ms)], ["stream", record.stream ? "yes" : "no"],
      ["arrived", dateTime(Date.parse(record.time) / 1000)]];
    return el("table", {class: "record"}, el("tbody", null, shown.map(([name, value]) =>
      el("tr", null, el("th", {scope: "row"}, name), el("td", null, value === null || value === undefined ? "—"
        : value)))));
  }

  // One of the page's two answers, or {missing: the error}: a ledger that cannot answer (503) still leaves the
  // events this worker holds on the page, and the other way round. A lost login (401) goes to the form.
  async function optional(path) {
    try {
      return await Console.get(path);
    } catch (err) {
      if (err.status === 401 || !(err instanceof Console.ApiError)) throw err;
      return {missing: err};
    }
  }

  function unread(err) {
    return el("p", {class: "bad", role: "alert"}, `Could not read it: ${Console.failure(err)}`);
  }

  async function find(id) {
    Console.setStatus(`Looking up ${id}…`, false);
    const quoted = encodeURIComponent(id);
    const [trace, record] = await Promise.all([optional(`requests/${quoted}/events`),
      optional(`usage/requests/${quoted}`)]);
    const parts = [];
    if (trace.missing && trace.missing.status !== 404) {
      parts.push(section("Route events", unread(trace.missing)));
    } else if (trace.missing) {
      parts.push(section("Route events", el("p", {class: "muted"}, `${trace.missing.message}. A call that ended ` +
        "in one clean attempt has them only in the memory of the worker that served it; its ledger record " +
        "below says where it went and how long it took.")));
    } else {
      parts.push(el("p", {class: "summary"}, "Ended ", badge(trace.terminal_status || "in progress"),
        ` after ${trace.attempts} attempt(s)`, trace.first_byte_ms !== null
          ? ` · first byte at ${ms(trace.first_byte_ms)}` : "", trace.trace_id ? ` · trace ${trace.trace_id}` : "",
        el("span", {class: "muted", id: "events-source"}, trace.source === "ledger"
          ? " · events from the usage ledger" : " · events from this worker's memory")));
      parts.push(section("Attempts", table([
        {title: "#", numeric: true, value: (a) => a.attempt},
        {title: "Backend", value: (a) => a.backend},
        {title: "Model", value: (a) => a.model},
        {title: "Outcome", value: (a) => a.outcome},
        {title: "Started", numeric: true, value: (a) => ms(a.start)},
        {title: "Took", numeric: true, value: (a) => a.end === null ? null : ms(a.end - a.start)},
        {title: "Why", value: (a) => a.why},
      ], attempts(trace.events), (a) => ({"data-attempt": a.attempt}), "No backend was tried.")));
      parts.push(section("Route events", table([
        {title: "#", numeric: true, value: (e) => e.seq},
        {title: "At", numeric: true, value: (e) => ms(e.t_ms)},
        {title: "Event", value: (e) => e.event},
        {title: "Attempt", numeric: true, value: (e) => e.attempt},
        {title: "Backend", value: (e) => e.backend},
        {title: "Model", value: (e) => e.model},
        {title: "Detail", value: (e) => el("code", null, detail(e))},
      ], trace.events, (e) => ({"data-event": e.event}))));
    }
    const missing = record.missing;
    parts.push(section("Ledger record", !missing ? recordTable(record)
      : missing.status === 404 ? el("p", {class: "muted"}, missing.message) : unread(missing)));
    replace(result, parts);
    Console.setStatus(`Request ${id}`, false);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = input.value.trim();
    history.replaceState(null, "", `?${new URLSearchParams({id})}`);
    find(id).catch((err) => Console.setStatus(`Could not look it up: ${Console.failure(err)}`, true));
  });

  const asked = new URLSearchParams(window.location.search).get("id");
  if (asked) {
    input.value = asked;
    find(asked).catch((err) => Console.setStatus(`Could not look it up: ${Console.failure(err)}`, true));
  }
})();
