/*
 * Keel's system dashboard. Plain JavaScript, no build step, no third-party code: everything it shows
 * comes from the public system endpoints of the service that serves it.
 *
 * - /system/status, /system/metrics, /system/health and /system/dashboard/info are polled every
 *   POLL_MS milliseconds.
 * - /system/logs/stream (and /system/events/stream when the event bus is present) are read with
 *   fetch() streaming and parsed here, not with EventSource: EventSource cannot send the
 *   Authorization header, and a token must never travel in a URL. So this script reconnects by
 *   itself (with backoff) and sends Last-Event-ID itself, exactly as a browser would.
 * - A 401/403 from any of them shows the token form; the token lives in sessionStorage only.
 * - Server data is only ever inserted as text (textContent), never as HTML.
 */
"use strict";

(() => {
  const POLL_MS = 3000;
  const MAX_LOG_LINES = 1000;
  const MAX_EVENT_RECORDS = 500;
  const MAX_CHAINS = 15;
  const RECONNECT_MIN_MS = 1000;
  const RECONNECT_MAX_MS = 5000;
  const STALL_MS = 45000; // no byte (not even a keep-alive) for this long: the connection is dead
  const ANNOUNCE_EVERY_MS = 10000;
  const EVENTS_RETRY_MS = 30000; // how often to look again for an event bus that was absent
  const TOKEN_KEY = "keel.dashboard.token";
  const LEVEL_NUMBERS = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40, CRITICAL: 50 };

  const $ = (id) => document.getElementById(id);

  /** Build an element; children and text are always inserted as text, never parsed as HTML. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  // -- formatting ------------------------------------------------------------------------------

  const STATUS_LOOK = {
    OK: { tone: "good", mark: "✓" },
    READY: { tone: "good", mark: "✓" },
    RUNNING: { tone: "info", mark: "◔" },
    FAIL: { tone: "warn", mark: "!" },
    OFF: { tone: "muted", mark: "○" },
    DEAD: { tone: "bad", mark: "✕" },
    "LOAD ERROR": { tone: "bad", mark: "✕" },
    ERROR: { tone: "bad", mark: "✕" },
  };

  /** A status as text plus a colour and a mark: the colour is never the only signal. */
  function badge(status) {
    const look = STATUS_LOOK[status] || { tone: "muted", mark: "•" };
    return h("span", { class: `badge tone-${look.tone}` }, h("span", { class: "mark", "aria-hidden": "true", text: look.mark }), status);
  }

  function formatMs(value) {
    if (typeof value !== "number" || !Number.isFinite(value)) return "–";
    if (value < 1) return `${value.toFixed(2)} ms`;
    if (value < 100) return `${value.toFixed(1)} ms`;
    return `${Math.round(value).toLocaleString()} ms`;
  }

  function formatDuration(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const days = Math.floor(s / 86400);
    const hours = Math.floor((s % 86400) / 3600);
    const minutes = Math.floor((s % 3600) / 60);
    const secs = s % 60;
    const pad = (n) => String(n).padStart(2, "0");
    if (days) return `${days}d ${hours}h ${pad(minutes)}m`;
    if (hours) return `${hours}h ${pad(minutes)}m ${pad(secs)}s`;
    if (minutes) return `${minutes}m ${pad(secs)}s`;
    return `${secs}s`;
  }

  function clockTime(value) {
    const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
    if (Number.isNaN(date.getTime())) return String(value);
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
  }

  /** Text with line-break opportunities after "_" and ".", so long identifiers wrap readably. */
  function breakable(text) {
    return text.split(/(?<=[_.])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
  }

  function plural(n, word, many) {
    return `${n.toLocaleString()} ${n === 1 ? word : many || `${word}s`}`;
  }

  // -- the admin token -------------------------------------------------------------------------

  class AuthError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  const auth = {
    token: sessionStorage.getItem(TOKEN_KEY),
    waiters: [],
    generation: 0,

    headers() {
      return this.token ? { Authorization: `Bearer ${this.token}` } : {};
    },

    /** Show the form (once per refusal) and resolve when a new token has been entered. */
    required(error) {
      const panel = $("auth");
      const message = error.status === 403
        ? "This token was accepted but is not an admin's. Enter an admin token."
        : this.token
          ? "The service refused the saved token (expired or invalid). Enter an admin token."
          : "This service's system endpoints ask for an admin token.";
      $("auth-message").textContent = message;
      if (panel.hidden) {
        panel.hidden = false;
        $("dashboard").hidden = true;
        $("token-input").focus();
      }
      setConnection("auth", "Sign-in needed");
      return new Promise((resolve) => this.waiters.push(resolve));
    },

    set(token) {
      this.token = token;
      this.generation += 1;
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
      $("forget-token").hidden = !token;
      $("auth").hidden = true;
      $("dashboard").hidden = false;
      const waiters = this.waiters.splice(0);
      for (const resolve of waiters) resolve();
    },
  };

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("token-input");
    const token = input.value.trim();
    if (!token) return;
    input.value = "";
    auth.set(token);
    $("main").focus();
  });

  // A username and password are exchanged for a token at /users/login (the users domain).
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const failure = $("login-error");
    failure.hidden = true;
    const password = $("login-password");
    let response;
    try {
      response = await fetch("/users/login", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ username: $("login-username").value.trim(), password: password.value }),
      });
    } catch (error) {
      response = null;
    }
    password.value = "";
    const body = response ? await response.json().catch(() => ({})) : {};
    if (!response || !response.ok || !body.access_token) {
      failure.textContent = (body.error && body.error.message) || "Signing in failed; try again.";
      failure.hidden = false;
      return;
    }
    auth.set(body.access_token);
    $("main").focus();
  });

  $("forget-token").addEventListener("click", () => {
    auth.set(null);
    streams.forEach((stream) => stream.restart());
    pollNow();
  });
  $("forget-token").hidden = !auth.token;

  // -- the connection indicator ----------------------------------------------------------------

  function setConnection(state, text) {
    const node = $("connection");
    node.dataset.state = state;
    $("connection-text").textContent = text;
  }

  // -- JSON endpoints --------------------------------------------------------------------------

  async function errorMessage(response) {
    try {
      const body = await response.json();
      return (body && body.error && body.error.message) || response.statusText;
    } catch (_) {
      return response.statusText;
    }
  }

  async function getJSON(path, { allow = [] } = {}) {
    const response = await fetch(path, {
      headers: { Accept: "application/json", ...auth.headers() },
      cache: "no-store",
    });
    if (response.status === 401 || response.status === 403) {
      throw new AuthError(response.status, await errorMessage(response));
    }
    if (!response.ok && !allow.includes(response.status)) {
      throw new Error(`${path}: HTTP ${response.status} ${await errorMessage(response)}`);
    }
    return response.json();
  }

  // -- polling: status, health, metrics, version -----------------------------------------------

  const view = { summaryKey: "", statusKey: "", metricsKey: "", metrics: {}, sort: { key: "key", descending: false } };
  const uptime = { base: null, at: 0 };
  let info = null;
  let infoFor = null;
  let pollTimer = null;
  let lastGoodPoll = 0;
  let unreachableSince = null;

  function pollNow() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, 0);
  }

  async function poll() {
    clearTimeout(pollTimer);
    let status, health, metrics;
    try {
      [status, health, metrics] = await Promise.all([
        getJSON("/system/status"),
        getJSON("/system/health", { allow: [503] }),
        getJSON("/system/metrics?limit=0"),
      ]);
      const processKey = `${status.kernel.process.pid}@${status.kernel.started_at}`;
      if (infoFor !== processKey) {
        info = await getJSON("/system/dashboard/info").catch(() => null);
        infoFor = processKey;
      }
    } catch (error) {
      if (error instanceof AuthError) {
        await auth.required(error);
        pollNow();
        return;
      }
      if (unreachableSince === null) unreachableSince = Date.now();
      setConnection("down", `Service unreachable since ${clockTime(unreachableSince / 1000).slice(0, 8)} · retrying`);
      pollTimer = setTimeout(poll, POLL_MS);
      return;
    }
    lastGoodPoll = Date.now();
    unreachableSince = null;
    // The agents domain's runs waiting for a human; absent (404) when that domain is not served.
    const approvals = await getJSON("/agents/approvals").catch(() => null);
    try {
      renderApprovals(approvals);
      renderHeader(status);
      renderSummary(status, health, metrics.summary || {});
      renderStatus(status);
      renderMetrics(metrics.summary || {});
    } catch (error) {
      console.error("dashboard: could not show the service's answer", error); // a bug here, not an outage
    }
    refreshConnection();
    pollTimer = setTimeout(poll, POLL_MS);
  }

  function refreshConnection() {
    if (!lastGoodPoll || unreachableSince !== null || !$("auth").hidden) return;
    const logs = streams.get("logs");
    if (logs && logs.state !== "live") setConnection("partial", "Reconnecting the log stream…");
    else setConnection("live", `Live · updated ${clockTime(lastGoodPoll / 1000).slice(0, 8)}`);
  }

  function renderApprovals(body) {
    const runs = (body && Array.isArray(body.runs)) ? body.runs : [];
    $("approvals-panel").hidden = runs.length === 0;
    const list = $("approvals");
    list.replaceChildren(...runs.map((run) => {
      const item = document.createElement("li");
      item.dataset.run = run.id;
      const call = run.tool_call ? `${run.tool_call.name}(${JSON.stringify(run.tool_call.arguments)})` : "";
      const expires = run.expires_at ? ` · expires ${clockTime(run.expires_at).slice(0, 8)}` : "";
      item.textContent = `${run.agent} · run ${run.id} · ${run.question} ${call}` +
        ` · owner ${run.owner || "anonymous"}${expires}`;
      return item;
    }));
  }

  function renderHeader(status) {
    const kernel = status.kernel;
    uptime.base = kernel.uptime_s;
    uptime.at = performance.now();
    tickUptime();
    $("process").textContent = `pid ${kernel.process.pid} on ${kernel.process.host}`;
    $("version").textContent = info ? `${info.service} ${info.version}` : "unknown";
  }

  function tickUptime() {
    if (uptime.base === null) return;
    const seconds = uptime.base + (performance.now() - uptime.at) / 1000;
    $("uptime").textContent = formatDuration(seconds);
  }
  setInterval(tickUptime, 1000);

  function domainOfFile(file) {
    const match = /^domains\/([^/]+)\//.exec(file);
    return match ? match[1] : null;
  }

  function renderStatus(status) {
    const key = JSON.stringify([status.tools, status.plugins, status.load_errors]);
    if (key === view.statusKey) return; // unchanged: keep the DOM (and the reader's place) as it is
    view.statusKey = key;
    const tools = Object.entries(status.tools);
    const plugins = Object.entries(status.plugins);
    const loadErrors = Object.entries(status.load_errors);

    // Group plugins and the plugin files that failed to import by domain.
    const domains = new Map();
    const domainOf = (name) => {
      if (!domains.has(name)) domains.set(name, { plugins: [], loadErrors: [] });
      return domains.get(name);
    };
    for (const [id, plugin] of plugins) domainOf(plugin.domain).plugins.push([id, plugin]);
    const toolLoadErrors = [];
    for (const [file, error] of loadErrors) {
      const domain = domainOfFile(file);
      if (domain) domainOf(domain).loadErrors.push([file, error]);
      else toolLoadErrors.push([file, error]);
    }

    renderDomains([...domains.entries()].sort(([a], [b]) => a.localeCompare(b)));
    renderTools(tools, toolLoadErrors);
    $("plugins-count").textContent = `${plural(plugins.length, "plugin")} in ${plural(domains.size, "domain")}`;
    $("tools-count").textContent = plural(tools.length, "tool");
  }

  function renderSummary(status, health, calls) {
    const tools = Object.entries(status.tools);
    const plugins = Object.entries(status.plugins);
    const loadErrors = Object.keys(status.load_errors);
    const callCount = Object.values(calls).reduce((sum, entry) => sum + entry.count, 0);
    const callErrors = Object.values(calls).reduce((sum, entry) => sum + entry.errors, 0);
    const count = (entries, wanted) => entries.filter(([, item]) => item.status === wanted).length;
    const toolsOk = count(tools, "OK");
    const toolProblems = tools.length - toolsOk - count(tools, "OFF");
    const dead = count(plugins, "DEAD");
    const healthy = health.status === "ok";
    const items = [
      {
        label: "Health",
        value: healthy ? "Healthy" : "Unavailable",
        tone: healthy ? "good" : "bad",
        note: healthy ? "ready for traffic" : plural(health.reasons.length, "reason"),
      },
      {
        label: "Tools",
        value: `${toolsOk} / ${tools.length} OK`,
        tone: toolProblems ? "bad" : "good",
        note: [
          toolProblems ? `${toolProblems} failing` : "none failing",
          count(tools, "OFF") ? `${count(tools, "OFF")} off` : "",
        ].filter(Boolean).join(" · "),
      },
      {
        label: "Plugins",
        value: `${count(plugins, "READY")} / ${plugins.length} ready`,
        tone: dead ? "bad" : "good",
        note: dead ? `${dead} DEAD` : "none dead",
      },
      {
        label: "Load errors",
        value: String(loadErrors.length),
        tone: loadErrors.length ? "bad" : "good",
        note: loadErrors.length ? "files failed to import" : "every file imported",
      },
      {
        label: "Tool calls",
        value: callCount.toLocaleString(),
        tone: callErrors ? "warn" : "good",
        note: callErrors
          ? `${plural(callErrors, "error")} (${((callErrors / callCount) * 100).toFixed(1)}%)`
          : "no errors",
      },
    ];
    const key = JSON.stringify(items);
    if (key === view.summaryKey) return;
    view.summaryKey = key;
    $("summary").replaceChildren(
      ...items.map((item) =>
        h("li", { class: `summary-item tone-${item.tone}` },
          h("span", { class: "summary-label", text: item.label }),
          h("span", { class: "summary-value", text: item.value }),
          h("span", { class: "summary-note", text: item.note }),
        ),
      ),
    );
  }

  function renderDomains(domains) {
    if (!domains.length) {
      $("domains").replaceChildren(h("p", { class: "empty", text: "No plugins." }));
      return;
    }
    $("domains").replaceChildren(
      ...domains.map(([name, group]) => {
        const dead = group.plugins.filter(([, p]) => p.status === "DEAD").length + group.loadErrors.length;
        const rows = [];
        for (const [id, plugin] of group.plugins.sort(([a], [b]) => a.localeCompare(b))) {
          const problems = [plugin.error, plugin.reload_error && `reload failed: ${plugin.reload_error}`].filter(Boolean);
          rows.push(
            h("tr", { "data-plugin": id, class: problems.length ? "has-error" : "" },
              h("th", { scope: "row" }, h("span", { class: "name", text: plugin.class }),
                h("span", { class: "file", text: plugin.file || "" })),
              h("td", {}, badge(plugin.status)),
              h("td", {},
                plugin.dependencies.length
                  ? h("span", { class: "deps" }, "uses ", plugin.dependencies.join(", "))
                  : h("span", { class: "deps muted", text: "no tools" }),
                problems.map((text) => h("pre", { class: "error", text })),
              ),
            ),
          );
        }
        for (const [file, error] of group.loadErrors) {
          rows.push(
            h("tr", { "data-load-error": file, class: "has-error" },
              h("th", { scope: "row" }, h("span", { class: "name", text: file.split("/").pop() }),
                h("span", { class: "file", text: file })),
              h("td", {}, badge("LOAD ERROR")),
              h("td", {}, h("span", { class: "deps muted", text: "the file failed to import" }),
                h("pre", { class: "error", text: error })),
            ),
          );
        }
        return h("section", { class: "domain", "data-domain": name, "aria-label": `Domain ${name}` },
          h("h3", {}, name, h("span", { class: "domain-note" },
            plural(group.plugins.length, "plugin"), dead ? ` · ${dead} with errors` : "")),
          h("table", { class: "table table-compact table-fixed" },
            h("colgroup", {}, h("col", { class: "col-name" }), h("col", { class: "col-status" }), h("col", {})),
            h("thead", {}, h("tr", {},
              h("th", { scope: "col", text: "Plugin" }), h("th", { scope: "col", text: "Status" }),
              h("th", { scope: "col", text: "Details" }))),
            h("tbody", {}, rows),
          ),
        );
      }),
    );
  }

  function renderTools(tools, loadErrors) {
    const rows = tools.map(([name, tool]) =>
      h("tr", { "data-tool": name, class: tool.status === "DEAD" || tool.status === "FAIL" ? "has-error" : "" },
        h("th", { scope: "row" }, h("span", { class: "name", text: name }), h("span", { class: "file", text: tool.file || "" })),
        h("td", {}, badge(tool.status)),
        h("td", {},
          tool.message ? h("p", { class: tool.status === "OK" ? "message" : "message error-text", text: tool.message }) : null,
          h("span", { class: "muted since", text: `since ${clockTime(tool.since).slice(0, 8)}` })),
      ),
    );
    for (const [file, error] of loadErrors) {
      rows.push(
        h("tr", { "data-load-error": file, class: "has-error" },
          h("th", { scope: "row" }, h("span", { class: "name", text: file.split("/").pop() }), h("span", { class: "file", text: file })),
          h("td", {}, badge("LOAD ERROR")),
          h("td", {}, h("pre", { class: "error", text: error })),
        ),
      );
    }
    const body = $("tools-table").tBodies[0];
    body.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 3, class: "empty", text: "No tools." }))]));
  }

  // -- tool-call metrics -----------------------------------------------------------------------

  function renderMetrics(summary) {
    view.metrics = summary;
    const key = JSON.stringify([summary, view.sort]);
    if (key === view.metricsKey) return;
    view.metricsKey = key;
    const rows = Object.entries(summary).map(([name, entry]) => ({
      key: name,
      ...entry,
      rate: entry.count ? entry.errors / entry.count : 0,
    }));
    const { key: sortKey, descending } = view.sort;
    rows.sort((a, b) => {
      const order = sortKey === "key" ? a.key.localeCompare(b.key) : a[sortKey] - b[sortKey] || a.key.localeCompare(b.key);
      return descending ? -order : order;
    });
    const body = $("metrics-table").tBodies[0];
    if (!rows.length) {
      body.replaceChildren(h("tr", {}, h("td", { colspan: 7, class: "empty", text: "No tool calls yet." })));
      return;
    }
    body.replaceChildren(
      ...rows.map((row) => {
        const [tool, ...method] = row.key.split(".");
        return h("tr", { "data-metric": row.key, class: row.errors ? "has-error" : "" },
          h("th", { scope: "row" }, h("span", { class: "name" }, tool, h("wbr"), h("span", { class: "muted" }, breakable(`.${method.join(".")}`)))),
          h("td", { text: row.count.toLocaleString() }),
          h("td", { class: row.errors ? "error-text" : "", text: row.errors.toLocaleString() }),
          h("td", { class: row.errors ? "error-text" : "", text: `${(row.rate * 100).toFixed(row.rate && row.rate < 0.1 ? 1 : 0)}%` }),
          h("td", { text: formatMs(row.p50_ms) }),
          h("td", { text: formatMs(row.p95_ms) }),
          h("td", { text: formatMs(row.p99_ms) }),
        );
      }),
    );
  }

  for (const header of $("metrics-table").tHead.rows[0].cells) {
    header.querySelector("button").addEventListener("click", () => {
      const key = header.dataset.sort;
      view.sort = { key, descending: view.sort.key === key ? !view.sort.descending : key !== "key" };
      for (const cell of $("metrics-table").tHead.rows[0].cells) cell.removeAttribute("aria-sort");
      header.setAttribute("aria-sort", view.sort.descending ? "descending" : "ascending");
      renderMetrics(view.metrics);
    });
  }

  // -- server-sent events over fetch -----------------------------------------------------------

  /** Incremental text/event-stream parser (the WHATWG rules, minus what the browser does itself). */
  class EventStreamParser {
    constructor(onEvent, onRetry) {
      this.onEvent = onEvent;
      this.onRetry = onRetry;
      this.buffer = "";
      this.reset();
    }

    reset() {
      this.data = [];
      this.type = "";
      this.id = undefined;
    }

    push(text) {
      const buffer = this.buffer + text;
      const breaks = /\r\n|\r|\n/g;
      let start = 0;
      let match;
      while ((match = breaks.exec(buffer)) !== null) {
        // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
        if (match[0] === "\r" && match.index === buffer.length - 1) break;
        this.line(buffer.slice(start, match.index));
        start = match.index + match[0].length;
      }
      this.buffer = buffer.slice(start);
    }

    line(line) {
      if (line === "") {
        if (this.data.length) this.onEvent({ type: this.type || "message", data: this.data.join("\n"), id: this.id });
        this.reset();
        return;
      }
      if (line.startsWith(":")) return; // a comment: the server's keep-alive
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.type = value;
      else if (field === "id" && !value.includes("\0")) this.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) this.onRetry(Number(value));
    }
  }

  /**
   * One event stream, kept open: reconnects with backoff after an error or the end of the
   * response (a restart of the service ends it) and resumes with Last-Event-ID.
   */
  class LiveStream {
    constructor(path, { initialLastEventId = null, onEvent, onState, onMissing, onOpen }) {
      this.path = path;
      this.lastEventId = initialLastEventId;
      this.onEvent = onEvent;
      this.onState = onState;
      this.onMissing = onMissing;
      this.onOpen = onOpen || (() => {});
      this.retryMs = RECONNECT_MIN_MS;
      this.state = "connecting";
      this.controller = null;
      this.wake = null;
      this.connections = 0;
    }

    setState(state, detail) {
      this.state = state;
      this.onState(state, detail);
      refreshConnection();
    }

    /** Drop the current connection and open a new one now (a new token, say). */
    restart() {
      if (this.controller) this.controller.abort();
      if (this.wake) this.wake();
    }

    async run() {
      let delay = RECONNECT_MIN_MS;
      for (;;) {
        const outcome = await this.connectOnce();
        if (outcome === "missing") {
          this.setState("missing");
          if (this.onMissing) this.onMissing();
          await this.pause(EVENTS_RETRY_MS, null);
          continue;
        }
        if (outcome === "opened") delay = this.retryMs; // it worked: start the backoff afresh
        if (outcome === "auth" || outcome === "restart") continue;
        await this.pause(delay, "reconnecting");
        delay = Math.min(delay * 2, RECONNECT_MAX_MS);
      }
    }

    /** Wait ``ms`` (counting down in the state line), or less if restart() is called. */
    pause(ms, state) {
      return new Promise((resolve) => {
        const until = performance.now() + ms;
        const tick = () => {
          if (state) this.setState(state, Math.max(0, Math.ceil((until - performance.now()) / 1000)));
        };
        tick();
        const interval = setInterval(tick, 1000);
        const done = () => {
          clearInterval(interval);
          clearTimeout(timer);
          this.wake = null;
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.wake = done;
      });
    }

    async connectOnce() {
      const controller = new AbortController();
      this.controller = controller;
      const generation = auth.generation;
      let stall = null;
      const armStall = () => {
        clearTimeout(stall);
        stall = setTimeout(() => controller.abort(), STALL_MS);
      };
      let opened = false;
      try {
        const headers = { Accept: "text/event-stream", ...auth.headers() };
        if (this.lastEventId !== null && this.lastEventId !== undefined) headers["Last-Event-ID"] = this.lastEventId;
        armStall();
        const response = await fetch(this.path, { headers, cache: "no-store", signal: controller.signal });
        if (response.status === 401 || response.status === 403) {
          clearTimeout(stall);
          this.setState("auth");
          if (generation === auth.generation) await auth.required(new AuthError(response.status, await errorMessage(response)));
          return "auth";
        }
        if (response.status === 404 && this.onMissing) return "missing";
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        opened = true;
        this.connections += 1;
        this.setState("live");
        this.onOpen(this.connections);
        const parser = new EventStreamParser(
          (event) => {
            if (event.id !== undefined) this.lastEventId = event.id;
            this.onEvent(event);
          },
          (ms) => { this.retryMs = Math.max(ms, 100); },
        );
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          armStall();
          parser.push(decoder.decode(value, { stream: true }));
        }
      } catch (error) {
        if (generation !== auth.generation) return "restart";
      } finally {
        clearTimeout(stall);
        if (this.controller === controller) this.controller = null;
      }
      return opened ? "opened" : "failed";
    }
  }

  const streams = new Map();

  function describeStreamState(state, seconds) {
    switch (state) {
      case "live": return "Streaming live";
      case "reconnecting": return seconds ? `Disconnected · reconnecting in ${seconds} s` : "Reconnecting…";
      case "auth": return "Waiting for a token";
      case "missing": return "Not available";
      default: return "Connecting…";
    }
  }

  // -- the log tail ----------------------------------------------------------------------------

  const logs = {
    lines: [], // every kept line, oldest first (also those hidden by the filter)
    held: [], // lines received while paused
    pendingRender: [],
    renderTimer: null,
    minLevel: 0,
    paused: false,
    dropped: 0,
    sinceAnnounce: { count: 0, serious: 0, last: null },
    announceTimer: null,
  };

  function levelNumber(level) {
    return LEVEL_NUMBERS[level] || 0;
  }

  function logRow(line) {
    const level = String(line.level || "INFO");
    return h("li", { class: `log-line level-${level.toLowerCase()}`, "data-id": line.id },
      h("time", { datetime: line.timestamp, text: clockTime(line.timestamp) }),
      h("span", { class: "level", text: level }),
      h("span", { class: "identity", text: line.identity || "—" }),
      h("span", { class: "message", text: line.message }),
    );
  }

  function isNearBottom(node) {
    return node.scrollHeight - node.scrollTop - node.clientHeight < 40;
  }

  function renderLogLines(lines, { replace = false } = {}) {
    const view = $("log-view");
    const list = $("log-lines");
    const stick = replace || isNearBottom(view);
    const rows = lines.filter((line) => levelNumber(line.level) >= logs.minLevel).map(logRow);
    if (replace) list.replaceChildren(...rows);
    else list.append(...rows);
    while (list.childElementCount > MAX_LOG_LINES) list.firstElementChild.remove();
    $("log-empty").hidden = list.childElementCount > 0;
    if (stick) view.scrollTop = view.scrollHeight;
  }

  function scheduleLogRender() {
    if (logs.renderTimer !== null) return;
    logs.renderTimer = setTimeout(() => {
      logs.renderTimer = null;
      const batch = logs.pendingRender.splice(0);
      renderLogLines(batch);
    }, 50);
  }

  function keep(array, max) {
    if (array.length > max) array.splice(0, array.length - max);
  }

  function acceptLogLine(line) {
    logs.lines.push(line);
    keep(logs.lines, MAX_LOG_LINES);
    if (logs.paused) {
      logs.held.push(line);
      keep(logs.held, MAX_LOG_LINES);
      showLogState();
      return;
    }
    logs.pendingRender.push(line);
    scheduleLogRender();
    noteForAnnouncement(line);
  }

  /** The polite live region: a summary of what arrived, at most every ANNOUNCE_EVERY_MS. */
  function noteForAnnouncement(line) {
    if (levelNumber(line.level) < logs.minLevel) return;
    const pending = logs.sinceAnnounce;
    pending.count += 1;
    if (levelNumber(line.level) >= LEVEL_NUMBERS.WARNING) {
      pending.serious += 1;
      pending.last = line;
    }
    if (logs.announceTimer !== null) return;
    logs.announceTimer = setTimeout(() => {
      logs.announceTimer = null;
      const { count, serious, last } = logs.sinceAnnounce;
      logs.sinceAnnounce = { count: 0, serious: 0, last: null };
      let text = `${plural(count, "new log line")}.`;
      if (serious) text += ` ${plural(serious, "warning or error", "warnings or errors")}; latest: ${last.level} ${String(last.message).split("\n")[0].slice(0, 160)}`;
      $("log-announcer").textContent = text;
    }, ANNOUNCE_EVERY_MS);
  }

  function showLogState() {
    const stream = streams.get("logs");
    const node = $("log-state");
    if (logs.paused) {
      node.dataset.state = "paused";
      const shown = logs.held.filter((line) => levelNumber(line.level) >= logs.minLevel).length;
      node.textContent = `Paused · ${plural(shown, "new line")} held`;
      return;
    }
    node.dataset.state = stream ? stream.state : "connecting";
    node.textContent = describeStreamState(stream ? stream.state : "connecting", logs.lastCountdown);
  }

  $("log-level").addEventListener("change", (event) => {
    logs.minLevel = Number(event.target.value);
    clearTimeout(logs.renderTimer); // the lines waiting for a render are in logs.lines too
    logs.renderTimer = null;
    logs.pendingRender = [];
    const held = new Set(logs.held);
    const visible = logs.paused ? logs.lines.filter((line) => !held.has(line)) : logs.lines;
    renderLogLines(visible, { replace: true });
  });

  $("log-pause").addEventListener("click", (event) => {
    logs.paused = !logs.paused;
    // A toggle button keeps its name; aria-pressed (and the look) says whether it is on.
    event.currentTarget.setAttribute("aria-pressed", String(logs.paused));
    if (!logs.paused) {
      const held = logs.held.splice(0);
      renderLogLines(held);
      held.forEach(noteForAnnouncement);
    }
    showLogState();
  });

  $("log-clear").addEventListener("click", () => {
    logs.lines = [];
    logs.held = [];
    logs.pendingRender = [];
    $("log-lines").replaceChildren();
    $("log-empty").hidden = false;
    showLogState();
  });

  function startLogStream() {
    // "0" on the first connection asks for the lines the server still keeps; from then on the
    // id of the last line received. A "dropped" event that opens that very first replay only says
    // that older lines were not kept, which this client never asked for: it is not counted.
    let leadingEvent = false;
    const stream = new LiveStream("/system/logs/stream", {
      initialLastEventId: "0",
      onEvent(event) {
        const leading = leadingEvent;
        leadingEvent = false;
        if (event.type === "dropped") {
          const count = Number(JSON.parse(event.data).dropped) || 0;
          if (!leading) {
            logs.dropped += count;
            $("log-dropped").textContent = logs.dropped.toLocaleString();
          }
          return;
        }
        if (event.type !== "message") return;
        try {
          acceptLogLine(JSON.parse(event.data));
        } catch (_) {
          // a malformed line is skipped rather than stopping the stream
        }
      },
      onOpen(connections) {
        leadingEvent = connections === 1;
      },
      onState(state, seconds) {
        logs.lastCountdown = seconds;
        showLogState();
      },
    });
    streams.set("logs", stream);
    stream.run();
  }

  // -- event chains ----------------------------------------------------------------------------

  const events = { records: new Map(), open: new Set(), renderTimer: null };

  function acceptEventRecord(record) {
    if (!record || typeof record.id !== "string") return;
    events.records.set(record.id, record);
    while (events.records.size > MAX_EVENT_RECORDS) events.records.delete(events.records.keys().next().value);
    if (events.renderTimer === null) {
      events.renderTimer = setTimeout(() => {
        events.renderTimer = null;
        renderChains();
      }, 250);
    }
  }

  /** Group the known records into chains: each record under the oldest ancestor still known. */
  function chains() {
    const groups = new Map();
    for (const record of events.records.values()) {
      let top = record;
      const seen = new Set([top.id]);
      while (top.parent_id && events.records.has(top.parent_id) && !seen.has(top.parent_id)) {
        top = events.records.get(top.parent_id);
        seen.add(top.id);
      }
      const key = top.parent_id || top.id; // events caused by one request share its id
      if (!groups.has(key)) groups.set(key, { key, fromRequest: Boolean(top.parent_id), records: [] });
      groups.get(key).records.push(record);
    }
    const list = [...groups.values()];
    for (const chain of list) {
      chain.records.sort((a, b) => a.timestamp - b.timestamp);
      chain.latest = Math.max(...chain.records.map((r) => Number(r.timestamp) || 0));
      chain.failures = chain.records.filter((r) => (r.subscribers || []).some((s) => s.outcome === "error")).length;
    }
    return list.sort((a, b) => b.latest - a.latest).slice(0, MAX_CHAINS);
  }

  function eventNode(record, children) {
    const subscribers = record.subscribers || [];
    const failed = subscribers.filter((s) => s.outcome === "error");
    return h("li", { class: failed.length ? "event has-error" : "event" },
      h("div", { class: "event-head" },
        h("span", { class: "name", text: record.name }),
        failed.length ? badge("ERROR") : null,
        h("span", { class: "muted", text: `${record.emitter || "unknown emitter"} · ${formatMs(record.duration_ms)}` }),
      ),
      subscribers.length
        ? h("ul", { class: "subscribers" }, subscribers.map((s) =>
          h("li", { class: s.outcome === "error" ? "error-text" : "" },
            `${s.subscriber}: ${s.outcome}${s.duration_ms !== null && s.duration_ms !== undefined ? ` in ${formatMs(s.duration_ms)}` : ""}`,
            s.error ? h("pre", { class: "error", text: s.error }) : null)))
        : h("p", { class: "muted", text: "no subscribers" }),
      children.length ? h("ol", { class: "event-children" }, children) : null,
    );
  }

  function chainTree(chain) {
    const ids = new Set(chain.records.map((r) => r.id));
    const children = new Map();
    for (const record of chain.records) {
      const parent = ids.has(record.parent_id) ? record.parent_id : null;
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(record);
    }
    const build = (record, depth) =>
      eventNode(record, depth > 50 ? [] : (children.get(record.id) || []).map((child) => build(child, depth + 1)));
    return h("ol", { class: "event-tree" }, (children.get(null) || []).map((record) => build(record, 0)));
  }

  function renderChains() {
    const list = chains();
    const container = $("chains");
    const focusedKey = document.activeElement && document.activeElement.closest("[data-chain]")
      ? document.activeElement.closest("[data-chain]").dataset.chain
      : null;
    if (!list.length) {
      container.replaceChildren(h("p", { class: "empty", text: "No events yet." }));
      return;
    }
    container.replaceChildren(
      ...list.map((chain) => {
        const first = chain.records[0];
        const title = chain.fromRequest ? `request ${chain.key.slice(0, 12)}` : first.name;
        const details = h("details", { class: "chain", "data-chain": chain.key, open: events.open.has(chain.key) },
          h("summary", {},
            h("span", { class: "name", text: title }),
            chain.failures ? badge("ERROR") : badge("OK"),
            h("span", { class: "muted", text: `${plural(chain.records.length, "event")} · ${clockTime(chain.latest).slice(0, 8)}` }),
          ),
          chainTree(chain),
        );
        details.addEventListener("toggle", () => {
          if (details.open) events.open.add(chain.key);
          else events.open.delete(chain.key);
        });
        return details;
      }),
    );
    if (focusedKey) {
      const summary = container.querySelector(`[data-chain="${CSS.escape(focusedKey)}"] > summary`);
      if (summary) summary.focus();
    }
  }

  function startEventStream() {
    const stream = new LiveStream("/system/events/stream", {
      initialLastEventId: "0",
      onEvent(event) {
        if (event.type !== "trace" && event.type !== "message") return;
        try {
          acceptEventRecord(JSON.parse(event.data));
        } catch (_) {
          // skipped, as for log lines
        }
      },
      onOpen() {
        $("events-panel").hidden = false;
      },
      onMissing() {
        $("events-panel").hidden = true; // no event bus in this service: no panel
      },
      onState(state, seconds) {
        const node = $("events-state");
        node.dataset.state = state;
        node.textContent = describeStreamState(state, seconds);
      },
    });
    streams.set("events", stream);
    stream.run();
  }

  // -- start -----------------------------------------------------------------------------------

  poll();
  startLogStream();
  startEventStream();

  // The wire-format parser, reachable so the browser tests can feed it awkward chunkings.
  window.keelDashboard = Object.freeze({ EventStreamParser });
})();
