// Organizations: the config's (read only here) and the database's (GET /admin/organizations), with what their
// keys share: a rate limit and a budget; and, for a role that may change them, create, edit and delete
// (POST, PATCH, DELETE /admin/organizations...; docs/keys.md#organizations).
"use strict";

(() => {
  const {el, table, replace, content, section, dateTime, usd, count, mayOperate} = Console;
  const {field, input, limitFields, value, limits, labels, labelsText, changed} = Forms;
  const REFRESH = 30;
  const create = mayOperate ? el("button", {type: "button", id: "create-organization"}, "New organization")
    : null;
  const listed = el("div", {id: "organizations"});
  replace(content, create ? el("div", {class: "controls"}, create) : null, listed);

  function rate(r) {
    if (!r) return el("span", {class: "muted"}, "none");
    const parts = Object.entries(r).filter(([, v]) => v !== null).map(([name, v]) =>
      el("div", null, `${name.replace(/_/g, " ")}: ${count(v)}`));
    return parts.length ? el("div", null, parts) : el("span", {class: "muted"}, "none");
  }

  function budget(b) {
    if (!b) return el("span", {class: "muted"}, "none");
    const amounts = [b.limit_usd !== null ? usd(b.limit_usd) : null,
      b.limit_tokens !== null ? `${count(b.limit_tokens)} tokens` : null].filter(Boolean).join(" and ");
    return `${amounts} a ${b.period === "total" ? "lifetime" : b.period}`;
  }

  function labelsOf(o) {
    const entries = Object.entries(o.metadata || {});
    return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(", ") : null;
  }

  function actions(o) {
    if (o.source !== "database") return el("span", {class: "muted"}, "read only (config)");
    if (!mayOperate) return null;
    return el("div", {class: "row-actions"}, button("Edit", "edit", () => edit(o)),
      button("Delete", "delete", () => remove(o), "danger"));
  }

  function button(text, action, onClick, kind) {
    const b = el("button", {type: "button", class: `small ${kind || "secondary"}`, "data-action": action}, text);
    b.addEventListener("click", () => onClick().catch((err) =>
      Console.setStatus(`Could not do it: ${Console.failure(err)}`, true)));
    return b;
  }

  async function render() {
    const found = await Console.get("organizations");
    replace(listed, section("Organizations", table([
      {title: "Organization", value: (o) => o.id},
      {title: "Source", value: (o) => o.source},
      {title: "Rate limit (shared by its keys)", value: (o) => rate(o.rate_limit)},
      {title: "Budget (shared by its keys)", value: (o) => budget(o.budget)},
      {title: "Labels", value: labelsOf},
      {title: "Created", value: (o) => o.created_at ? `${dateTime(Date.parse(o.created_at) / 1000)} by ` +
        `${o.created_by}` : null},
      {title: "", value: actions},
    ], found.organizations, (o) => ({"data-organization": o.id}), "No organizations.")));
  }

  function orgFields(o) {
    return [
      o ? null : field("Id", input("id", "", {required: true, maxlength: 128})),
      limitFields(o ? o.rate_limit : null, o ? o.budget : null),
      field("Labels", el("textarea", {name: "metadata", id: "field-metadata", rows: 3},
        labelsText(o ? o.metadata : {})), "one name=value a line"),
    ];
  }

  function orgBody(form) {
    return {...limits(form), metadata: labels(form, "metadata")};
  }

  async function openCreate() {
    const confirmed = await Console.ask("New organization", orgFields(null), "Create", async (form) => {
      const body = orgBody(form);
      for (const name of ["rate_limit", "budget"]) {
        if (body[name] === null) delete body[name];
      }
      await Console.change("POST", "organizations", {id: value(form, "id"), ...body});
    });
    if (confirmed) refresh();
  }

  async function edit(o) {
    const fields = orgFields(o);
    const before = orgBody(el("form", null, fields));
    const confirmed = await Console.ask(`Edit ${o.id}`, fields, "Save", async (form) => {
      const body = changed(before, orgBody(form));
      if (Object.keys(body).length) await Console.change("PATCH", `organizations/${encodeURIComponent(o.id)}`, body);
    });
    if (confirmed) refresh();
  }

  async function remove(o) {
    const confirmed = await Console.ask(`Delete ${o.id}?`, [el("p", null, "It is forgotten. It is refused while " +
      "database keys still name it.")], "Delete", async () => {
      await Console.change("DELETE", `organizations/${encodeURIComponent(o.id)}`);
    });
    if (confirmed) refresh();
  }

  const refresh = Console.every(REFRESH, render);
  if (create) create.addEventListener("click", () => openCreate().catch((err) =>
    Console.setStatus(`Could not create it: ${Console.failure(err)}`, true)));
})();
