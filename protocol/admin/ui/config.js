// Config: the running revision with its secrets masked (GET /admin/config), the hot-reload state with the
// last error and its dotted path (GET /admin/config/hot-reload-status), and a reload (POST /admin/config/reload,
// with the page's CSRF token).
"use strict";

(() => {
  const {el, replace, content, section, dateTime} = Console;
  const REFRESH = 5;
  const button = el("button", {type: "button", id: "reload"}, "Reload the config file now");
  const outcome = el("div", {id: "reload-outcome", role: "status"});
  const status = el("div", {id: "reload-status"});
  const running = el("div", {id: "running-config"});
  // a viewer reads the state; reloading is for the roles that may (roles.py)
  replace(content, section("Hot reload", status, Console.mayOperate ? el("div", {class: "controls"}, button) : null,
    outcome), running);

  function errors(list) {
    return el("ul", {class: "errors"}, (list || []).map((e) => el("li", null, typeof e === "string" ? e
      : JSON.stringify(e))));
  }

  // `at` is UTC ISO 8601 ("2026-12-01T13:00:00Z"), shown in the browser's time zone as every other time.
  function when(entry) {
    return entry ? `${dateTime(Date.parse(entry.at) / 1000)} (${entry.trigger})` : null;
  }

  function statusTable(s) {
    const rows = [["file", s.path || "none: the embedded demo config"], ["watcher", s.watcher],
      ["running revision", s.revision],
      ["last reload", s.last_reload ? `${s.last_reload.result}, ${when(s.last_reload)}` : "none since start"],
      ["waiting for a restart", s.pending_restart.length ? s.pending_restart.join(", ") : "nothing"]];
    const body = rows.map(([name, value]) => el("tr", null, el("th", {scope: "row"}, name), el("td", null, value)));
    if (s.last_error) {
      body.push(el("tr", {class: "bad"}, el("th", {scope: "row"}, "last error"),
        el("td", null, when(s.last_error), errors(s.last_error.errors))));
    }
    return el("table", {class: "record"}, el("tbody", null, body));
  }

  let shown = null;   // the revision the JSON below shows: read again when a reload (of any kind) changes it

  async function renderConfig() {
    const config = await Console.get("config");
    shown = config.revision;
    replace(running, section("Running config (secrets masked)",
      el("pre", {class: "json", id: "config-json"}, JSON.stringify(config, null, 2))));
  }

  async function renderStatus() {
    const current = await Console.get("config/hot-reload-status");
    replace(status, statusTable(current));
    if (shown !== null && current.revision !== shown) await renderConfig();
  }

  button.addEventListener("click", async () => {
    button.disabled = true;
    replace(outcome, "Reloading…");
    try {
      const {status: code, body} = await Console.post("config/reload");
      if (body.error) {
        replace(outcome, el("p", {class: "bad"}, `Not reloaded: ${Console.failure(new Console.ApiError(code,
          body.error))}`));
      } else if (body.result === "rejected") {
        replace(outcome, el("p", {class: "bad"}, "Rejected: the running config is unchanged."), errors(body.errors));
      } else {
        replace(outcome, el("p", null, `${body.result}${body.revision ? `: revision ${body.revision}` : ""}` +
          (body.reason ? ` (${body.reason})` : "") +
          (body.pending_restart && body.pending_restart.length
            ? `; waiting for a restart: ${body.pending_restart.join(", ")}` : "")));
      }
      await Promise.all([renderStatus(), renderConfig()]);
    } catch (err) {
      replace(outcome, el("p", {class: "bad"}, `Could not reload: ${Console.failure(err)}`));
    } finally {
      button.disabled = false;
    }
  });

  renderConfig().catch((err) => Console.setStatus(`Could not read the config: ${Console.failure(err)}`, true));
  Console.every(REFRESH, renderStatus);
})();
