// Usage and spend: by key, organization, model or endpoint over a chosen range, of every endpoint or one, from
// GET /admin/usage (the ledger), with its CSV; and each key's limits and what is left of its budget, from
// GET /admin/keys.
"use strict";

(() => {
  const {el, table, usd, count, replace, content, section, dateTime} = Console;
  const REFRESH = 30;
  const GROUPS = {key: "key_id", org: "organization_id", model: "model", endpoint: "endpoint"};
  const DAY = 86400;

  function local(unix) {   // a datetime-local input's value, in the browser's time zone
    const d = new Date(unix * 1000);
    const p = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
  }

  const now = Math.floor(Date.now() / 1000);
  const from = el("input", {type: "datetime-local", id: "usage-from", value: local(now - DAY)});
  const to = el("input", {type: "datetime-local", id: "usage-to", value: local(now + 60)});
  const group = el("select", {id: "usage-group"}, Object.keys(GROUPS).map((g) => el("option", {value: g}, g)));
  const endpoint = el("select", {id: "usage-endpoint"}, el("option", {value: ""}, "all endpoints"),
    Console.endpoints.map((e) => el("option", {value: e}, e)));
  const show = el("button", {type: "button", id: "usage-show"}, "Show");
  const csv = el("p", {class: "links"});
  const charts = el("div", {class: "charts"});
  const groups = el("div");
  const keys = el("div");
  replace(content,
    el("div", {class: "controls"}, el("label", null, "from ", from), el("label", null, "to ", to),
      el("label", null, "group by ", group), el("label", null, "endpoint ", endpoint), show),
    csv, charts, groups, keys);

  // Until someone picks a range, it is the last 24 hours as of each refresh, so new calls keep showing.
  let following = true;
  for (const input of [from, to]) input.addEventListener("change", () => { following = false; });

  function range() {
    if (following) {
      const at = Math.floor(Date.now() / 1000);
      from.value = local(at - DAY);
      to.value = local(at + 60);
    }
    const since = Date.parse(from.value) / 1000, until = Date.parse(to.value) / 1000;
    if (!(since < until)) throw new Console.ApiError(400, {message: "from must be earlier than to", param: "from"});
    return {since: Math.floor(since), until: Math.ceil(until)};
  }

  function timeOf(row) {   // an hour row's "2026-12-01T13:00:00Z", a day row's "2026-12-01"
    return Date.parse(row.hour || `${row.day}T00:00:00Z`) / 1000;
  }

  // One point per UTC hour or day of the range, zero where the ledger has no row (it lists only those with calls).
  function slots(rows, step, since, until, pick) {
    const seconds = step === "hour" ? 3600 : DAY;
    const found = new Map(rows.map((r) => [timeOf(r), pick(r)]));
    const out = [];
    for (let t = Math.floor(since / seconds) * seconds; t < until; t += seconds) out.push([t, found.get(t) || 0]);
    return out;
  }

  // The ledger's part and the limiter's are read and drawn apart: a ledger that cannot answer (503) leaves the
  // keys' limits and budgets on the page, and the other way round; the status line says what failed.
  async function render() {
    const failed = (await Promise.allSettled([renderUsage(), renderKeys()])).find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  async function renderUsage() {
    const {since, until} = range();
    const by = group.value;
    const base = {from: String(since), to: String(until)};
    if (endpoint.value) base.endpoint = endpoint.value;
    const only = endpoint.value ? `, ${endpoint.value} calls only` : "";
    const step = until - since <= 3 * DAY ? "hour" : "day";
    const [grouped, overTime] = await Promise.all([
      Console.get(`usage?${new URLSearchParams({...base, group_by: by})}`),
      Console.get(`usage?${new URLSearchParams({...base, group_by: step})}`),
    ]);
    const field = GROUPS[by];
    const rows = grouped.groups.map((g) => ({...g, label: g[field] === null ? "(none)" : g[field]}));
    replace(csv, "Export as CSV: ",
      el("a", {href: `../usage.csv?${new URLSearchParams({...base, group_by: by})}`, download: "usage.csv"},
        `totals by ${by}`), " · ",
      el("a", {href: `../usage.csv?${new URLSearchParams(base)}`, download: "usage.csv"}, "every call"));
    const byCost = [...rows].sort((a, b) => (b.cost || 0) - (a.cost || 0) || b.requests - a.requests);
    const span = {from: since, to: until};
    replace(charts,
      Charts.bars(`Cost by ${by}`, byCost.map((r) => ({label: r.label, value: r.cost || 0})), (v) => usd(v)),
      Charts.bars(`Requests by ${by}`, byCost.map((r) => ({label: r.label, value: r.requests})), count),
      Charts.lines(`Requests per ${step}`, [{name: "requests",
        points: slots(overTime.groups, step, since, until, (g) => g.requests)}], count, span),
      Charts.lines(`Cost per ${step}`, [{name: "cost",
        points: slots(overTime.groups, step, since, until, (g) => g.cost || 0)}], (v) => usd(v), span));
    replace(groups, section(`By ${by}${only}`, table([
      {title: by, value: (r) => r.label},
      {title: "Requests", numeric: true, value: (r) => count(r.requests)},
      {title: "Errors", numeric: true, value: (r) => count(r.errors)},
      {title: "Input tokens", numeric: true, value: (r) => count(r.input_tokens)},
      {title: "Output tokens", numeric: true, value: (r) => count(r.output_tokens)},
      {title: "Cost", numeric: true, value: (r) => usd(r.cost)},
      {title: "Cache hits", numeric: true, value: (r) => count(r.cache_hits)},
      {title: "Saved by the cache", numeric: true, value: (r) => usd(r.saved_cost)},
    ], byCost, (r) => ({"data-group": r.label}), "No calls in this range.")));
  }

  async function renderKeys() {
    const limits = await Console.get("keys");
    replace(keys, section("Keys: limits and budgets left", table([
      {title: "Key", value: (k) => k.id},
      {title: "Organization", value: (k) => k.organization_id},
      {title: "Rate limits", value: (k) => windows(k.rate_limit)},
      {title: "Budget", value: (k) => budget(k.budget)},
      {title: "Organization budget", value: (k) => k.organization ? budget(k.organization.budget) : null},
    ], limits.keys, (k) => ({"data-key": k.id}), "No API keys in the config.")));
  }

  function windows(scope) {
    if (!scope) return el("span", {class: "muted"}, "none");
    const lines = Object.entries(scope.windows).map(([name, w]) =>
      el("div", null, `${name.replace(/_/g, " ")}: ${count(w.remaining)} of ${count(w.limit)} left`));
    if (scope.max_concurrent !== undefined) {
      lines.push(el("div", null, `in flight ${scope.in_flight} of ${scope.max_concurrent}`));
    }
    return lines.length ? el("div", null, lines) : el("span", {class: "muted"}, "none");
  }

  function budget(b) {
    if (!b) return el("span", {class: "muted"}, "none");
    return el("div", null,
      b.limit_usd !== undefined ? el("div", null, `${usd(b.left_usd)} of ${usd(b.limit_usd)} left`) : null,
      b.limit_tokens !== undefined ? el("div", null, `${count(b.left_tokens)} of ${count(b.limit_tokens)} tokens left`)
        : null,
      el("div", {class: "muted"}, `${b.period}, resets ${dateTime(b.resets_at)}`));
  }

  const refresh = Console.every(REFRESH, render);
  show.addEventListener("click", refresh);
  group.addEventListener("change", refresh);
  endpoint.addEventListener("change", refresh);
})();
