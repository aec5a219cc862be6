// What every console page shares: reading the admin API, building the page out of text nodes (a value is
// never parsed as markup), formatting, and refreshing on a timer. Plain JavaScript, no build step.
"use strict";

const Console = (() => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const page = document.body.dataset.page;
  const content = document.getElementById("content");
  const statusLine = document.getElementById("status");

  class ApiError extends Error {
    constructor(status, error) {
      super(error && error.message ? error.message : `HTTP ${status}`);
      this.status = status;
      this.code = error ? error.code : null;
      this.param = error ? error.param : null;
    }
  }

  // The admin API's path (without /admin/), read relative to this page: works under any prefix a proxy adds.
  function url(path) {
    return new URL("../" + path, document.baseURI).toString();
  }

  async function call(method, path, expectError, payload) {
    const headers = {"accept": "application/json"};
    if (method !== "GET") headers["x-csrf-token"] = csrf;
    const options = {method, headers, credentials: "same-origin", cache: "no-store"};
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      options.body = JSON.stringify(payload);
    }
    const response = await fetch(url(path), options);
    if (response.status === 401) {   // the session ended: log in again, then come back here
      window.location.assign("login?next=" + encodeURIComponent(page));
      throw new ApiError(401, {message: "Logged out"});
    }
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok && !(expectError && body)) {
      throw new ApiError(response.status, body && body.error);
    }
    return {status: response.status, body};
  }

  async function get(path) { return (await call("GET", path, false)).body; }
  // A change (POST): the answer whatever its status, when it is JSON (a rejected reload says why in it).
  async function post(path) { return call("POST", path, true); }
  // A change with a JSON body (POST, PATCH, DELETE): its answer's body; a refusal throws an ApiError saying why.
  async function change(method, path, body) { return (await call(method, path, false, body)).body; }

  // The session's role (the page is rendered with it): a page offers only what the role may do (roles.py):
  // admin and operator change keys and organizations and reload the config; a viewer only reads.
  const role = document.body.dataset.role;
  const mayOperate = role === "admin" || role === "operator";
  // The endpoints a usage record can carry (the values GET /admin/usage and /admin/traffic filter on), as
  // the page is rendered with them: the usage and traffic pages offer them as a filter.
  const endpoints = (document.body.dataset.endpoints || "").split(" ").filter(Boolean);

  // A modal dialog: its title, its content (form fields), the button that confirms; resolves to the dialog's
  // form when confirmed, null when cancelled. onConfirm(form) may throw: the error shows and the dialog stays.
  function ask(title, fields, confirmLabel, onConfirm) {
    return new Promise((resolve) => {
      const error = el("p", {class: "bad", role: "alert"});
      const cancel = el("button", {type: "button", class: "secondary"}, confirmLabel ? "Cancel" : "Close");
      const form = el("form", {method: "dialog", class: "dialog-form"}, el("h2", null, title), fields, error,
        el("div", {class: "dialog-buttons"}, cancel, confirmLabel ? el("button", {type: "submit"}, confirmLabel)
          : null));
      const dialog = el("dialog", {class: "console-dialog"}, form);
      document.body.appendChild(dialog);
      let done = false;
      function finish(value) {
        if (done) return;
        done = true;
        dialog.close();
        dialog.remove();
        resolve(value);
      }
      cancel.addEventListener("click", () => finish(null));
      dialog.addEventListener("cancel", () => finish(null));
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const button = form.querySelector("button[type=submit]");
        button.disabled = true;
        try {
          if (onConfirm) await onConfirm(form);
          finish(form);
        } catch (err) {
          error.textContent = err instanceof ApiError ? failure(err) : String(err.message || err);
          button.disabled = false;
        }
      });
      dialog.showModal();
    });
  }

  // A secret shown once (a new or rotated key's): with a button that copies it.
  function showSecret(title, secret, note) {
    const copied = el("span", {class: "muted", role: "status"});
    const copy = el("button", {type: "button", id: "copy-secret"}, "Copy");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(secret);
        copied.textContent = "Copied.";
      } catch (err) {
        copied.textContent = "Could not copy: select it and copy it by hand.";
      }
    });
    return ask(title, [el("p", null, note), el("div", {class: "secret-line"},
      el("code", {id: "new-secret", class: "secret"}, secret), copy, copied),
      el("p", {class: "hint"}, "It is shown this once: it is kept nowhere and cannot be shown again.")], null, null);
  }

  // el("td", {class: "x", title: "..."}, child, ...): children are nodes or values shown as text.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replace(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  // A table: columns [{title, value(row) -> text or node, numeric}], one row per item; rowAttrs(row) -> attributes.
  function table(columns, rows, rowAttrs, empty) {
    const head = el("tr", null, columns.map((c) => el("th", {scope: "col", class: c.numeric ? "num" : null}, c.title)));
    const body = rows.map((row) => el("tr", rowAttrs ? rowAttrs(row) : null,
      columns.map((c) => el("td", {class: c.numeric ? "num" : null}, show(c.value(row))))));
    if (!rows.length) {
      body.push(el("tr", null, el("td", {colspan: columns.length, class: "empty"}, empty || "Nothing to show.")));
    }
    return el("table", null, el("thead", null, head), el("tbody", null, body));
  }

  function show(value) {
    return value === null || value === undefined || value === "" ? "—" : value;
  }

  function setStatus(message, isError) {
    statusLine.textContent = message;
    statusLine.classList.toggle("error", Boolean(isError));
  }

  function failure(err) {
    const where = err.param ? ` (${err.param})` : "";
    const code = err.code ? ` [${err.code}]` : "";
    return `${err.message}${where}${code}`;
  }

  // Run render() now and then every `seconds`, saying when the page was last brought up to date.
  function every(seconds, render) {
    let timer = null;
    async function tick() {
      clearTimeout(timer);
      try {
        await render();
        setStatus(`Updated ${clock(Date.now() / 1000)}; refreshes every ${seconds} s.`, false);
      } catch (err) {
        setStatus(`Could not refresh: ${failure(err)}`, true);
      }
      timer = setTimeout(tick, seconds * 1000);
    }
    tick();
    return tick;   // call to refresh at once (after a change of the page's controls)
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  function clock(unix) {
    const d = new Date(unix * 1000);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function dateTime(unix) {
    if (unix === null || unix === undefined) return null;
    const d = new Date(unix * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(unix)}`;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return null;
    if (seconds < 1) return "now";
    if (seconds < 120) return `${Math.round(seconds)} s ago`;
    if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
    return `${(seconds / 3600).toFixed(1)} h ago`;
  }

  function ms(value) {
    if (value === null || value === undefined) return null;
    return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value.toFixed(value < 10 ? 1 : 0)} ms`;
  }

  function usd(value) {
    if (value === null || value === undefined) return null;
    if (value >= 1 || value === 0) return `$${value.toFixed(2)}`;
    if (value < 0.000001) return "< $0.000001";
    return `$${parseFloat(value.toPrecision(3))}`;
  }

  function count(value) {
    if (value === null || value === undefined) return null;
    return Number(value).toLocaleString("en-US", {maximumFractionDigits: 2});
  }

  function percent(ratio) {
    if (ratio === null || ratio === undefined) return null;
    return `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)} %`;
  }

  function badge(state) {
    return el("span", {class: `badge state-${String(state).replace(/[^a-z_-]/gi, "")}`}, state);
  }

  function section(title, ...children) {
    return el("section", null, el("h2", null, title), children);
  }

  return {ApiError, get, post, change, role, mayOperate, endpoints, ask, showSecret, el, append, replace, table,
          setStatus, failure, every, clock, dateTime, age, ms, usd, count, percent, badge, section, content, page};
})();
