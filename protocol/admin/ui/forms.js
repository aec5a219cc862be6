// The fields of the keys' and organizations' forms, and the JSON body they make (the admin API's, docs/keys.md):
// limits, lists, labels and an expiry. The API checks every value and names the field it refuses.
"use strict";

const Forms = (() => {
  const {el} = Console;
  const RATE = [["requests_per_second", "Requests / s"], ["requests_per_minute", "Requests / min"],
    ["tokens_per_minute", "Tokens / min"], ["max_concurrent", "Concurrent"]];
  const PERIODS = ["day", "week", "month", "total"];

  function field(label, input, hint) {
    return el("label", {class: "field"}, el("span", null, label), input, hint ? el("span", {class: "hint"}, hint)
      : null);
  }

  function input(name, value, attrs) {
    return el("input", {name, id: `field-${name}`, value: value === null || value === undefined ? "" : value,
      autocomplete: "off", spellcheck: "false", ...attrs});
  }

  function select(name, options, value) {
    return el("select", {name, id: `field-${name}`}, options.map(([v, text]) =>
      el("option", {value: v, selected: v === (value || "")}, text)));
  }

  // Rate limit and budget, as written (settings.rate_limit, settings.budget): empty means none.
  function limitFields(rateLimit, budget) {
    const rate = rateLimit || {};
    const spend = budget || {};
    return [
      el("fieldset", null, el("legend", null, "Rate limit"), el("div", {class: "field-row"}, RATE.map(([name, label]) =>
        field(label, input(`rate_${name}`, rate[name], {type: "number", min: 1, step: 1}))))),
      el("fieldset", null, el("legend", null, "Budget"), el("div", {class: "field-row"},
        field("USD", input("budget_limit_usd", spend.limit_usd, {type: "number", min: 0, step: "any"})),
        field("Tokens", input("budget_limit_tokens", spend.limit_tokens, {type: "number", min: 1, step: 1})),
        field("Period", select("budget_period", PERIODS.map((p) => [p, p]), spend.period || "month")))),
    ];
  }

  function value(form, name) {
    const found = form.elements.namedItem(name);
    return found ? found.value.trim() : "";
  }

  function limits(form) {
    const rate = {};
    for (const [name] of RATE) {
      const v = value(form, `rate_${name}`);
      if (v !== "") rate[name] = Number(v);
    }
    const budget = {};
    if (value(form, "budget_limit_usd") !== "") budget.limit_usd = Number(value(form, "budget_limit_usd"));
    if (value(form, "budget_limit_tokens") !== "") budget.limit_tokens = Number(value(form, "budget_limit_tokens"));
    if (Object.keys(budget).length) budget.period = value(form, "budget_period");
    return {rate_limit: Object.keys(rate).length ? rate : null, budget: Object.keys(budget).length ? budget : null};
  }

  // "a, b" -> ["a", "b"]; empty -> null (no allowlist: everything allowed).
  function list(form, name) {
    const names = value(form, name).split(",").map((n) => n.trim()).filter(Boolean);
    return names.length ? names : null;
  }

  // One "name=value" a line -> {name: value}.
  function labels(form, name) {
    const out = {};
    for (const line of value(form, name).split("\n")) {
      if (!line.trim()) continue;
      const at = line.indexOf("=");
      if (at < 1) throw new Error(`A label is name=value, one a line: got "${line.trim()}"`);
      out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return out;
  }

  function labelsText(metadata) {
    return Object.entries(metadata || {}).map(([k, v]) => `${k}=${v}`).join("\n");
  }

  // An RFC 3339 time as a datetime-local input's value, in the browser's time zone, and back.
  function localTime(iso) {
    if (!iso) return "";
    const d = new Date(Date.parse(iso));
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function instant(form, name) {
    const v = value(form, name);
    return v ? new Date(v).toISOString().replace(/\.\d{3}Z$/, "Z") : null;
  }

  // The fields of `body` that differ from `before` (a PATCH changes only those).
  function changed(before, body) {
    const out = {};
    for (const [name, v] of Object.entries(body)) {
      if (JSON.stringify(v) !== JSON.stringify(before[name])) out[name] = v;
    }
    return out;
  }

  return {field, input, select, limitFields, value, limits, list, labels, labelsText, localTime, instant, changed};
})();
