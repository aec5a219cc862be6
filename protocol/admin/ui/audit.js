// Audit: every change made to keys, organizations and administrators, newest first (GET /admin/audit), filtered
// by actor, action and target id, a page at a time ("Older" follows the answer's next).
"use strict";

(() => {
  const {el, table, replace, content, section, dateTime} = Console;
  const {field, input} = Forms;
  const REFRESH = 30;
  const PAGE = 50;
  const actor = input("actor", "", {type: "search", placeholder: "admin, cli:alice…", size: 16});
  const action = input("action", "", {type: "search", placeholder: "key.create…", size: 18});
  const target = input("target_id", "", {type: "search", placeholder: "key or organization id", size: 22});
  const controls = el("form", {class: "controls", id: "audit-filters"}, field("Actor", actor),
    field("Action", action), field("Target id", target), el("button", {type: "submit"}, "Show"));
  const newest = el("button", {type: "button", class: "secondary", id: "audit-newest"}, "Newest");
  const older = el("button", {type: "button", class: "secondary", id: "audit-older"}, "Older");
  const listed = el("div", {id: "audit"});
  replace(content, controls, listed, el("div", {class: "controls"}, newest, older));
  let before = null;   // the page's cursor: null for the newest entries
  let next = null;

  function empty(v) {
    return v === null || v === undefined || (typeof v === "object" && !Object.keys(v).length);
  }

  // What changed: each field whose value differs between before and after; a create: the fields it set.
  function change(e) {
    if (!e.after) return el("span", {class: "muted"}, "deleted");
    const was = e.before || {};
    const now = e.after;
    const names = [...new Set([...Object.keys(was), ...Object.keys(now)])]
      .filter((n) => JSON.stringify(was[n]) !== JSON.stringify(now[n]) && !(e.before === null && empty(now[n])));
    if (!names.length) return el("span", {class: "muted"}, "no field changed");
    return el("ul", {class: "plain changes"}, names.map((n) => el("li", null, el("code", null, n), ": ",
      e.before ? `${shown(was[n])} → ` : "", shown(now[n]))));
  }

  // A value as JSON, leaving out the fields inside it that are null (a limit's unset dimensions).
  function shown(v) {
    return JSON.stringify(v === undefined ? null : v, (name, x) => (x === null && name !== "" ? undefined : x));
  }

  async function render() {
    const query = new URLSearchParams({limit: String(PAGE)});
    for (const [name, box] of [["actor", actor], ["action", action], ["target_id", target]]) {
      if (box.value.trim()) query.set(name, box.value.trim());
    }
    if (before !== null) query.set("before", String(before));
    const found = await Console.get(`audit?${query}`);
    next = found.next;
    older.disabled = next === null;
    newest.disabled = before === null;
    replace(listed, section(before === null ? "Newest changes" : "Older changes", table([
      {title: "When", value: (e) => dateTime(Date.parse(e.at) / 1000)},
      {title: "Actor", value: (e) => e.actor},
      {title: "From", value: (e) => e.address},
      {title: "Action", value: (e) => el("code", null, e.action)},
      {title: "Target", value: (e) => `${e.target} ${e.target_id}`},
      {title: "What changed", value: change},
    ], found.entries, (e) => ({"data-seq": e.seq, "data-action": e.action, "data-target": e.target_id}),
    "No changes match.")));
  }

  const refresh = Console.every(REFRESH, render);
  controls.addEventListener("submit", (event) => {
    event.preventDefault();
    before = null;
    refresh();
  });
  older.addEventListener("click", () => {
    before = next;
    refresh();
  });
  newest.addEventListener("click", () => {
    before = null;
    refresh();
  });
})();
