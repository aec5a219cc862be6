// Traffic: requests/s, error rate, p50/p95 latency and time to first byte per model, backend or endpoint, of
// every endpoint or one, over the last hour by default, from GET /admin/traffic (the usage ledger: every worker
// and instance).
"use strict";

(() => {
  const {el, table, ms, percent, count, replace, content, section} = Console;
  const REFRESH = 15;
  const WINDOWS = {"15 min": [900, 15], "1 hour": [3600, 60], "6 hours": [21600, 300], "24 hours": [86400, 1200]};
  const controls = {group: "model", window: "1 hour", endpoint: ""};   // endpoint "": every endpoint
  const CHARTED = 8;   // groups drawn in the charts: one colour each

  // options: values shown as themselves, or [value, text] pairs
  function select(label, id, options, current, onChange) {
    const node = el("select", {id}, options.map((o) => {
      const [value, text] = Array.isArray(o) ? o : [o, o];
      return el("option", {value, selected: value === current}, text);
    }));
    node.addEventListener("change", () => onChange(node.value));
    return el("label", null, `${label} `, node);
  }

  function points(series, pick) {
    return series.map((s) => ({name: s.group === null ? "(none)" : s.group,
      points: s.points.map((p) => [p.time, pick(p)])}));
  }

  let refresh = null;
  const bar = el("div", {class: "controls"},
    select("group by", "traffic-group", ["model", "backend", "endpoint"], controls.group,
      (v) => { controls.group = v; refresh(); }),
    select("endpoint", "traffic-endpoint", [["", "all endpoints"], ...Console.endpoints], controls.endpoint,
      (v) => { controls.endpoint = v; refresh(); }),
    select("window", "traffic-window", Object.keys(WINDOWS), controls.window, (v) => { controls.window = v; refresh(); }));
  const charts = el("div", {class: "charts"});
  const totals = el("div");
  replace(content, bar, charts, totals);

  async function render() {
    const [span, step] = WINDOWS[controls.window];
    const to = Math.ceil(Date.now() / 1000 / step) * step;
    const query = new URLSearchParams({group_by: controls.group, from: String(to - span), to: String(to),
      step: String(step)});
    if (controls.endpoint) query.set("endpoint", controls.endpoint);
    const only = controls.endpoint ? `, ${controls.endpoint} calls only` : "";
    const data = await Console.get(`traffic?${query}`);
    const range = {from: data.from, to: data.to};
    // The charts draw the busiest groups (past the palette, lines could not be told apart); the table lists all.
    const busiest = new Set([...data.totals].sort((a, b) => b.requests - a.requests).slice(0, CHARTED)
      .map((t) => t.group));
    const s = data.series.filter((one) => busiest.has(one.group));
    const unit = (v) => `${count(v)}/s`;
    replace(charts,
      Charts.lines("Requests per second", points(s, (p) => p.requests_per_second), unit, range),
      Charts.lines("Error rate", points(s, (p) => p.error_rate), percent, range),
      Charts.lines("Latency p50", points(s, (p) => p.latency_ms.p50), ms, range),
      Charts.lines("Latency p95", points(s, (p) => p.latency_ms.p95), ms, range),
      Charts.lines("Time to first byte p50", points(s, (p) => p.ttfb_ms.p50), ms, range),
      Charts.lines("Time to first byte p95", points(s, (p) => p.ttfb_ms.p95), ms, range));
    replace(totals, section(`Over the ${controls.window}, by ${controls.group}${only}`, table([
      {title: controls.group, value: (t) => t.group === null ? "(none)" : t.group},
      {title: "Requests", numeric: true, value: (t) => count(t.requests)},
      {title: "Errors", numeric: true, value: (t) => count(t.errors)},
      {title: "Error rate", numeric: true, value: (t) => percent(t.requests ? t.errors / t.requests : null)},
      {title: "Latency p50", numeric: true, value: (t) => ms(t.latency_ms.p50)},
      {title: "Latency p95", numeric: true, value: (t) => ms(t.latency_ms.p95)},
      {title: "TTFB p50", numeric: true, value: (t) => ms(t.ttfb_ms.p50)},
      {title: "TTFB p95", numeric: true, value: (t) => ms(t.ttfb_ms.p95)},
    ], data.totals, (t) => ({"data-group": t.group}), "No calls in this window.")),
    data.totals.length > CHARTED ? el("p", {class: "muted", id: "traffic-charted"}, `The charts show the ` +
      `${CHARTED} ${controls.group}s with the most requests of ${data.totals.length}; the table lists them all.`)
      : null,
    el("p", {class: "muted"}, "Read from the usage ledger: every worker and instance, each call once it is " +
      "written (within usage.flush_interval of its end). Percentiles are estimated from latency buckets."));
  }

  refresh = Console.every(REFRESH, render);
})();
