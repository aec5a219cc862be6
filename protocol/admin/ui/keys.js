// Keys: every API key, the config's (read only here) and the database's (GET /admin/keys), filtered by source,
// status and organization, PAGE at a time ("Next page" follows the answer's next); and, for a role that may
// change keys, create (the secret shown once), edit, rotate and revoke (POST, PATCH /admin/keys...; docs/keys.md).
"use strict";

(() => {
  const {el, table, replace, content, section, dateTime, usd, count, badge, mayOperate} = Console;
  const {field, input, select, limitFields, value, limits, list, labels, labelsText, localTime, instant,
    changed} = Forms;
  const REFRESH = 30;
  const PAGE = 50;
  const PERIOD = {day: "today", week: "this week", month: "this month"};
  const source = select("source", [["", "all sources"], ["config", "config"], ["database", "database"]], "");
  const status = select("status", [["", "any status"], ["active", "active"], ["revoked", "revoked"],
    ["expired", "expired"]], "");
  const org = el("select", {name: "organization", id: "field-organization"}, el("option", {value: ""},
    "every organization"));
  const create = mayOperate ? el("button", {type: "button", id: "create-key"}, "New key") : null;
  const controls = el("form", {class: "controls", id: "key-filters"}, el("label", null, "Source ", source),
    el("label", null, "Status ", status), el("label", null, "Organization ", org), create);
  const listed = el("div", {id: "keys"});
  const first = el("button", {type: "button", class: "secondary", id: "keys-first"}, "First page");
  const further = el("button", {type: "button", class: "secondary", id: "keys-next"}, "Next page");
  replace(content, controls, listed, el("div", {class: "controls"}, first, further));
  let organizations = [];
  let after = null;   // the page's cursor: null for the first page
  let next = null;

  function budget(b) {
    if (!b) return el("span", {class: "muted"}, "none");
    return el("div", null,
      b.limit_usd !== undefined ? el("div", null, `${usd(b.spent_usd)} spent, ${usd(b.left_usd)} left of ` +
        `${usd(b.limit_usd)}`) : null,
      b.limit_tokens !== undefined ? el("div", null, `${count(b.spent_tokens)} tokens spent, ` +
        `${count(b.left_tokens)} left of ${count(b.limit_tokens)}`) : null,
      el("div", {class: "muted"}, b.period === "total" ? "in all, never resets"
        : `${PERIOD[b.period] || b.period}, resets ${dateTime(b.resets_at)}`));
  }

  function when(iso) { return iso ? dateTime(Date.parse(iso) / 1000) : null; }

  function actions(k) {
    if (k.source !== "database") return el("span", {class: "muted"}, "read only (config)");
    if (!mayOperate) return null;
    const buttons = [button("Edit", "edit", () => edit(k))];
    if (k.status !== "revoked") {
      buttons.push(button("Rotate", "rotate", () => rotate(k)), button("Revoke", "revoke", () => revoke(k), "danger"));
    }
    return el("div", {class: "row-actions"}, buttons);
  }

  function button(text, action, onClick, kind) {
    const b = el("button", {type: "button", class: `small ${kind || "secondary"}`, "data-action": action}, text);
    b.addEventListener("click", () => onClick().catch((err) =>
      Console.setStatus(`Could not do it: ${Console.failure(err)}`, true)));
    return b;
  }

  async function render() {
    const query = new URLSearchParams({limit: String(PAGE)});
    for (const [name, box] of [["source", source], ["status", status], ["organization_id", org]]) {
      if (box.value) query.set(name, box.value);
    }
    if (after !== null) query.set("after", after);
    const [keys, orgs] = await Promise.all([Console.get(`keys?${query}`), Console.get("organizations")]);
    next = keys.next;
    further.disabled = next === null;
    first.disabled = after === null;
    organizations = orgs.organizations.map((o) => o.id);
    const chosen = org.value;
    replace(org, el("option", {value: ""}, "every organization"), organizations.map((id) =>
      el("option", {value: id, selected: id === chosen}, id)));
    replace(listed, section("Keys", table([
      {title: "Key", value: (k) => k.id},
      {title: "Source", value: (k) => k.source},
      {title: "Prefix", value: (k) => k.prefix ? el("code", null, k.prefix) : null},
      {title: "Status", value: (k) => badge(k.status)},
      {title: "Organization", value: (k) => k.organization_id},
      {title: "Budget this period", value: (k) => budget(k.budget)},
      {title: "Last used", value: (k) => when(k.last_used_at)},
      {title: "Expires", value: (k) => when(k.expires_at)},
      {title: "", value: actions},
    ], keys.keys, (k) => ({"data-key": k.id, "data-status": k.status}), "No keys match.")));
  }

  // The form's fields, filled with a key's settings (none: a new key).
  function keyFields(k) {
    const s = k ? k.settings : {};
    const known = k && k.organization_id && !organizations.includes(k.organization_id) ? [k.organization_id] : [];
    const orgChoice = select("organization_id", [["", "none"], ...[...organizations, ...known].map((id) => [id, id])],
      k ? k.organization_id : "");
    return [
      k ? null : field("Id", input("id", "", {placeholder: "made up when left empty", maxlength: 128})),
      el("div", {class: "field-row"}, field("Organization", orgChoice), field("Tier", input("tier", s.tier))),
      field("Allowed models", input("allowed_models", (s.allowed_models || []).join(", "),
        {placeholder: "every model"}), "comma-separated; empty: every model"),
      field("Allowed backends", input("allowed_backends", (s.allowed_backends || []).join(", "),
        {placeholder: "every backend"}), "comma-separated; empty: every backend"),
      limitFields(s.rate_limit, s.budget),
      field("Expires", input("expires_at", localTime(k ? k.expires_at : null), {type: "datetime-local"}),
        "empty: never (your time zone)"),
      field("Labels", el("textarea", {name: "metadata", id: "field-metadata", rows: 3},
        labelsText(k ? k.metadata : {})), "one name=value a line"),
    ];
  }

  function keyBody(form) {
    const body = {organization_id: value(form, "organization_id") || null, tier: value(form, "tier") || null,
      allowed_models: list(form, "allowed_models"), allowed_backends: list(form, "allowed_backends"),
      ...limits(form), expires_at: instant(form, "expires_at"), metadata: labels(form, "metadata")};
    return body;
  }

  async function openCreate() {
    let made = null;
    const confirmed = await Console.ask("New key", keyFields(null), "Create", async (form) => {
      const body = keyBody(form);
      for (const name of Object.keys(body)) {
        if (body[name] === null) delete body[name];
      }
      if (value(form, "id")) body.id = value(form, "id");
      made = await Console.change("POST", "keys", body);
    });
    if (!confirmed) return;
    await Console.showSecret(`Key ${made.id} created`, made.secret,
      `The secret of ${made.id}: give it to the client that will use the key.`);
    refresh();
  }

  async function edit(k) {
    const fields = keyFields(k);
    const before = keyBody(el("form", null, fields));   // what the form shows before any change
    const confirmed = await Console.ask(`Edit ${k.id}`, fields, "Save", async (form) => {
      const body = changed(before, keyBody(form));
      if (Object.keys(body).length) await Console.change("PATCH", `keys/${encodeURIComponent(k.id)}`, body);
    });
    if (confirmed) refresh();
  }

  async function rotate(k) {
    let rotated = null;
    const confirmed = await Console.ask(`Rotate ${k.id}`, [
      el("p", null, "A new secret replaces the old one."),
      field("Grace (seconds)", input("grace_seconds", "0", {type: "number", min: 0, step: 1, required: true}),
        "how long the old secret keeps working: 0 stops it at once; at most 30 days"),
    ], "Rotate", async (form) => {
      rotated = await Console.change("POST", `keys/${encodeURIComponent(k.id)}/rotate`,
        {grace_seconds: Number(value(form, "grace_seconds"))});
    });
    if (!confirmed) return;
    await Console.showSecret(`Key ${k.id} rotated`, rotated.secret, rotated.previous_secret
      ? `The old secret works until ${when(rotated.previous_secret.valid_until)}.` : "The old secret stopped.");
    refresh();
  }

  async function revoke(k) {
    const confirmed = await Console.ask(`Revoke ${k.id}?`, [el("p", null, `Every call with ${k.id}'s secrets is ` +
      "refused from now on. The key stays listed, revoked, until it is deleted.")], "Revoke", async () => {
      await Console.change("POST", `keys/${encodeURIComponent(k.id)}/revoke`);
    });
    if (confirmed) refresh();
  }

  const refresh = Console.every(REFRESH, render);
  for (const box of [source, status, org]) {
    box.addEventListener("change", () => {
      after = null;
      refresh();
    });
  }
  further.addEventListener("click", () => {
    after = next;
    refresh();
  });
  first.addEventListener("click", () => {
    after = null;
    refresh();
  });
  controls.addEventListener("submit", (event) => event.preventDefault());
  if (create) create.addEventListener("click", () => openCreate().catch((err) =>
    Console.setStatus(`Could not create it: ${Console.failure(err)}`, true)));
})();
