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

  /** Username and password -> POST /users/login -> the token it answers with (kept like a pasted one). */
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const errorNode = $("login-error");
    errorNode.hidden = true;
    const username = $("login-username").value.trim();
    const password = $("login-password").value;
    if (!username || !password) return;
    let response;
    try {
      response = await fetch("/users/login", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ username, password }),
        cache: "no-store",
      });
    } catch (_) {
      errorNode.textContent = "The service could not be reached.";
      errorNode.hidden = false;
      return;
    }
    if (response.ok) {
      const body = await response.json().catch(() => ({}));
      if (typeof body.access_token === "string" && body.access_token) {
        $("login-password").value = "";
        auth.set(body.access_token);
        $("main").focus();
        return;
      }
    }
    const message = response.status === 404
      ? "This service has no password login (no users domain); paste a token instead."
      : response.status === 429
        ? `Too many attempts; try again in ${response.headers.get("Retry-After") || "a few"} s.`
        : await errorMessage(response);
    errorNode.textContent = message;
    errorNode.hidden = false;
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
    const generation = auth.generation; // a refusal of an older token is no reason to ask again
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
        if (generation === auth.generation) await auth.required(error);
        pollNow();
        return;
      }
      if (unreachableSince === null) unreachableSince = Date.now();
      const since = clockTime(unreachableSince / 1000).slice(0, 8);
      setConnection("down", `Disconnected since ${since} · retrying`);
      showDisconnected(since);
      pollTimer = setTimeout(poll, POLL_MS);
      return;
    }
    lastGoodPoll = Date.now();
    unreachableSince = null;
    showDisconnected(null);
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
    pollRuns();
    pollRoutes();
    pollCluster();
    pollTimer = setTimeout(poll, POLL_MS);
  }

  /** While the service cannot be reached, say so on the page and mark every figure as last known. */
  function showDisconnected(since) {
    const banner = $("disconnected");
    banner.hidden = since === null;
    if (since !== null) {
      banner.textContent = `Disconnected since ${since}. The figures below are the last ones received, not live.`;
    }
    for (const item of $("summary").children) item.classList.toggle("stale", since !== null);
    const health = $("summary").querySelector('[data-summary="Health"] .summary-value');
    if (health && since !== null) health.textContent = "Disconnected";
    if (since !== null) view.summaryKey = ""; // redraw from the next answer
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
    const healthy = health.status === "ok" || health.status === "degraded";
    const items = [
      {
        label: "Health",
        value: health.status === "degraded" ? "Degraded" : healthy ? "Healthy" : "Unavailable",
        tone: health.status === "degraded" ? "warn" : healthy ? "good" : "bad",
        note: health.status === "ok" ? "ready for traffic" : plural((health.reasons || []).length, "reason"),
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
        h("li", { class: `summary-item tone-${item.tone}`, "data-summary": item.label },
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
          h("table", { class: "table table-compact table-fixed table-stack" },
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
        h("td", { "data-label": "Status" }, badge(tool.status)),
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
          h("td", { "data-label": "Calls", text: row.count.toLocaleString() }),
          h("td", { "data-label": "Errors", class: row.errors ? "error-text" : "", text: row.errors.toLocaleString() }),
          h("td", { "data-label": "Error %", class: row.errors ? "error-text" : "", text: `${(row.rate * 100).toFixed(row.rate && row.rate < 0.1 ? 1 : 0)}%` }),
          h("td", { "data-label": "p50", text: formatMs(row.p50_ms) }),
          h("td", { "data-label": "p95", text: formatMs(row.p95_ms) }),
          h("td", { "data-label": "p99", text: formatMs(row.p99_ms) }),
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



  // -- routes ----------------------------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  let routesKey = "";

  /** Requests per bucket as a small line; the SVG is built as elements, never parsed from text. */
  function sparkline(series, label) {
    const width = 96;
    const height = 22;
    const top = Math.max(1, ...series);
    const step = series.length > 1 ? width / (series.length - 1) : width;
    const points = series.map((n, i) => `${(i * step).toFixed(1)},${(height - 2 - (n / top) * (height - 4)).toFixed(1)}`);
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "sparkline");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
    const base = document.createElementNS(SVG, "line");
    base.setAttribute("class", "baseline");
    for (const [key, value] of [["x1", 0], ["y1", height - 1], ["x2", width], ["y2", height - 1]]) base.setAttribute(key, value);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    svg.append(base, line);
    return svg;
  }

  async function pollRoutes() {
    let body;
    try {
      body = await getJSON("/system/metrics/routes", { allow: [404] });
    } catch (_) {
      return;
    }
    if (!body || !Array.isArray(body.routes)) {
      $("routes-panel").hidden = true;
      return;
    }
    $("routes-panel").hidden = false;
    const key = JSON.stringify(body.routes);
    if (key === routesKey) return;
    routesKey = key;
    const rows = body.routes.filter((route) => route.count > 0);
    const tbody = $("routes-table").tBodies[0];
    if (!rows.length) {
      tbody.replaceChildren(h("tr", {}, h("td", { colspan: 8, class: "empty", text: "No requests yet." })));
      return;
    }
    tbody.replaceChildren(...rows.map((route) => {
      const statuses = Object.entries(route.statuses).map(([code, n]) =>
        h("span", { class: `status-count ${code >= 500 ? "server" : code >= 400 ? "client" : ""}`, text: `${code}: ${n.toLocaleString()}` }));
      const bucket = route.bucket_seconds || 10;
      return h("tr", { "data-route": `${route.method} ${route.path}`, class: route.server_errors ? "has-error" : "" },
        h("th", { scope: "row" }, h("span", { class: "method", text: route.method }), h("span", { class: "name" }, breakable(route.path))),
        h("td", { "data-label": "Requests", text: route.count.toLocaleString() }),
        h("td", { "data-label": "Per second", text: route.rate_per_s.toFixed(2) }),
        h("td", { "data-label": "Last 5 min" }, sparkline(route.series, `${route.series.reduce((a, b) => a + b, 0)} requests in the last ${Math.round((route.series.length * bucket) / 60)} minutes`)),
        h("td", { "data-label": "p50", text: formatMs(route.p50_ms) }),
        h("td", { "data-label": "p95", text: formatMs(route.p95_ms) }),
        h("td", { "data-label": "p99", text: formatMs(route.p99_ms) }),
        h("td", { "data-label": "Statuses", class: "statuses" }, statuses),
      );
    }));
  }


  // -- the cluster -----------------------------------------------------------------------------

  let clusterKey = "";

  function countOf(statuses, good) {
    const values = Object.values(statuses || {});
    return `${values.filter((status) => good.includes(status)).length} / ${values.length}`;
  }

  async function pollCluster() {
    let body;
    try {
      body = await getJSON("/system/cluster", { allow: [404] });
    } catch (_) {
      return;
    }
    if (!body || !Array.isArray(body.processes) || !body.enabled) {
      $("cluster-panel").hidden = true; // one process: the page already shows it all
      return;
    }
    $("cluster-panel").hidden = false;
    const key = JSON.stringify([body.processes.map((p) => ({ ...p, heartbeat_at: 0 })), body.mismatched_plugin_files]);
    if (key === clusterKey) return;
    clusterKey = key;
    $("cluster-count").textContent = `${plural(body.processes.length, "live process", "live processes")} sharing Redis`;
    const now = Date.now() / 1000;
    $("cluster-table").tBodies[0].replaceChildren(...body.processes.map((p) => {
      const broken = Object.values(p.tools || {}).some((s) => s === "DEAD") || Object.values(p.plugins || {}).some((s) => s === "DEAD");
      return h("tr", { "data-process": p.id, class: broken ? "has-error" : "" },
        h("th", { scope: "row" }, h("span", { class: "name", text: `${p.host}:${p.pid}` }),
          p.id === body.self ? h("span", { class: "badge tone-info this-process", text: "this page's process" }) : null,
          h("span", { class: "file", text: p.id })),
        h("td", { "data-label": "Version", text: p.version }),
        h("td", { "data-label": "Up", text: formatDuration(now - p.started_at) }),
        h("td", { "data-label": "Tools", text: `${countOf(p.tools, ["OK"])} OK` }),
        h("td", { "data-label": "Plugins", text: `${countOf(p.plugins, ["READY"])} ready` }),
        h("td", { "data-label": "Tool calls", text: `${Number(p.calls).toLocaleString()} (${Number(p.call_errors).toLocaleString()} errors)` }),
        h("td", { "data-label": "Heartbeat", text: `${Math.max(0, now - p.heartbeat_at).toFixed(1)} s ago` }),
      );
    }));
    const mismatches = Object.entries(body.mismatched_plugin_files || {});
    const box = $("cluster-mismatches");
    box.hidden = !mismatches.length;
    box.replaceChildren(
      h("h3", { text: `${plural(mismatches.length, "plugin file")} ${mismatches.length === 1 ? "differs" : "differ"} between processes` }),
      h("ul", {}, mismatches.map(([file, versions]) =>
        h("li", { "data-mismatch": file }, h("code", { text: file }), ": ",
          Object.entries(versions).map(([digest, ids]) => `version ${digest} on ${ids.join(", ")}`).join("; ")))),
    );
  }

  // -- agent runs ------------------------------------------------------------------------------

  const runs = {
    views: new Map(), // run id -> its last GET /agents/runs/{id}, kept while the run can change
    listKey: "",
    selected: null,
    stream: null,
    events: [],
    busy: false,
  };
  const FINISHED = new Set(["completed", "failed", "cancelled"]);

  function runTokens(usage) {
    if (!usage) return null;
    const total = Number.isFinite(Number(usage.total_tokens))
      ? Number(usage.total_tokens)
      : (Number(usage.input_tokens) || 0) + (Number(usage.output_tokens) || 0);
    return usage.estimated ? `~${total.toLocaleString()}` : total.toLocaleString();
  }

  function runOwner(view) {
    return (view && (view.subject || view.owner || (view.owner_info && view.owner_info.subject))) || "—";
  }

  function runDuration(entry) {
    const start = Number(entry.created_at);
    const end = FINISHED.has(entry.status) ? Number(entry.updated_at) : Date.now() / 1000;
    return Number.isFinite(start) && Number.isFinite(end) ? formatDuration(end - start) : "–";
  }

  async function pollRuns() {
    if (runs.busy) return;
    runs.busy = true;
    try {
      const agent = $("runs-agent").value.trim();
      const query = agent ? `?limit=50&agent=${encodeURIComponent(agent)}` : "?limit=50";
      let listed;
      try {
        listed = await getJSON(`/agents/runs${query}`, { allow: [404] });
      } catch (error) {
        return; // an agents domain that is down shows in the status tables; keep the last list
      }
      if (!listed || !Array.isArray(listed.runs)) {
        $("runs-panel").hidden = true; // no agents domain in this service
        return;
      }
      $("runs-panel").hidden = false;
      // Details for the runs on screen: a finished run's are fetched once, a live run's each poll.
      await Promise.all(listed.runs.slice(0, 20).map(async (entry) => {
        const known = runs.views.get(entry.id);
        if (known && FINISHED.has(known.status) && known.status === entry.status) return;
        try {
          runs.views.set(entry.id, await getJSON(`/agents/runs/${encodeURIComponent(entry.id)}`));
        } catch (_) {
          // shown without details
        }
      }));
      renderRuns(listed.runs);
      if (runs.selected) renderRunDetail();
    } finally {
      runs.busy = false;
    }
  }

  function renderRuns(list) {
    const wanted = $("runs-status").value;
    const rows = list.filter((entry) => !wanted || entry.status === wanted);
    const key = JSON.stringify([rows, rows.map((entry) => runs.views.get(entry.id) || null), runs.selected]);
    if (key === runs.listKey) return;
    runs.listKey = key;
    $("runs-count").textContent = `${plural(rows.length, "run")} shown · newest first`;
    const body = $("runs-table").tBodies[0];
    if (!rows.length) {
      body.replaceChildren(h("tr", {}, h("td", { colspan: 7, class: "empty", text: "No runs yet." })));
      return;
    }
    body.replaceChildren(...rows.map((entry) => {
      const view = runs.views.get(entry.id);
      return h("tr", { "data-run": entry.id, class: runs.selected === entry.id ? "selected" : "" },
        h("th", { scope: "row" }, h("button", {
          type: "button", class: "link-button", text: entry.id.slice(0, 12),
          "aria-label": `Follow run ${entry.id}`, onclick: () => selectRun(entry.id),
        })),
        h("td", { "data-label": "Agent", text: entry.agent }),
        h("td", { "data-label": "Status" }, badge(String(entry.status).toUpperCase())),
        h("td", { "data-label": "Owner", text: runOwner(view) }),
        h("td", { "data-label": "Cost", text: view && view.cost_usd !== undefined ? `$${view.cost_usd}` : "–" }),
        h("td", { "data-label": "Tokens", text: (view && runTokens(view.usage)) || "–" }),
        h("td", { "data-label": "Duration", text: runDuration(entry) }),
      );
    }));
  }

  function selectRun(runId) {
    if (runs.stream) runs.stream.stop();
    runs.selected = runId;
    runs.events = [];
    runs.listKey = "";
    $("run-detail").hidden = false;
    $("run-title").textContent = `Run ${runId}`;
    $("run-events").replaceChildren();
    const stream = new LiveStream(`/agents/runs/${encodeURIComponent(runId)}/events`, {
      onEvent(event) {
        let data = event.data;
        try { data = JSON.parse(event.data); } catch (_) { /* shown as text */ }
        runs.events.push({ kind: event.type, data });
        appendRunEvent({ kind: event.type, data });
        if (event.type === "final") {
          stream.stop();
          refreshSelectedRun();
        }
      },
      onState() {},
    });
    runs.stream = stream;
    stream.run();
    refreshSelectedRun();
  }

  async function refreshSelectedRun() {
    if (!runs.selected) return;
    try {
      runs.views.set(runs.selected, await getJSON(`/agents/runs/${encodeURIComponent(runs.selected)}`));
    } catch (_) {
      return;
    }
    renderRunDetail();
  }

  function describeRunEvent(event) {
    const data = event.data || {};
    switch (event.kind) {
      case "message_delta": return typeof data.text === "string" ? data.text : JSON.stringify(data);
      case "tool_call": {
        const call = data.tool_call || {};
        return `${call.name || "tool"}(${JSON.stringify(call.arguments ?? {})})`;
      }
      case "tool_result": {
        const call = data.tool_call || {};
        return `${call.name || "tool"} → ${typeof data.result === "string" ? data.result : JSON.stringify(data.result)}`;
      }
      case "final": return data.text || "(the run ended)";
      default: return JSON.stringify(data, null, 1);
    }
  }

  function appendRunEvent(event) {
    const list = $("run-events");
    const last = list.lastElementChild;
    // Partial output arrives as many small deltas: they are shown joined, as one growing block.
    if (event.kind === "message_delta" && last && last.dataset.kind === "message_delta") {
      last.querySelector("pre").textContent += describeRunEvent(event);
      return;
    }
    list.append(h("li", { class: `run-event kind-${event.kind}`, "data-kind": event.kind },
      h("span", { class: "kind", text: event.kind }),
      h("pre", { text: describeRunEvent(event) })));
    while (list.childElementCount > 300) list.firstElementChild.remove();
  }

  function renderRunDetail() {
    const view = runs.views.get(runs.selected);
    if (!view) return;
    const budget = view.budget || {};
    const facts = [
      ["Status", String(view.status).toUpperCase()],
      ["Agent", view.agent],
      ["Owner", runOwner(view)],
      ["Cost", `$${view.cost_usd}`],
      ["Tokens", runTokens(view.usage) || "–"],
      ["Model calls", String(view.model_calls ?? "–")],
      ["Budget", [budget.max_cost_usd ? `$${budget.max_cost_usd}` : null, budget.max_calls ? `${budget.max_calls} calls` : null].filter(Boolean).join(" · ") || "unlimited"],
      ["Checkpoint", `v${view.version}`],
    ];
    if (view.reason) facts.push(["Reason", view.reason]);
    $("run-facts").replaceChildren(...facts.map(([term, value]) => h("div", {}, h("dt", { text: term }), h("dd", { text: value }))));
    const output = $("run-output");
    const text = view.output === null || view.output === undefined ? "" : typeof view.output === "string" ? view.output : JSON.stringify(view.output, null, 1);
    output.hidden = !text && !view.error;
    output.textContent = view.error ? `error: ${view.error}` : text;
    const finished = FINISHED.has(view.status);
    $("run-cancel").hidden = finished;
    const waiting = view.status === "suspended" || Boolean(view.awaiting_approval);
    $("run-approve").hidden = !waiting;
    $("run-deny").hidden = !waiting;
  }

  async function runAction(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...auth.headers() },
      body: JSON.stringify(body || {}),
      cache: "no-store",
    });
    if (!response.ok) window.alert(await errorMessage(response));
    refreshSelectedRun();
  }

  $("run-cancel").addEventListener("click", () => runAction(`/agents/runs/${encodeURIComponent(runs.selected)}/cancel`));
  $("run-approve").addEventListener("click", () => runAction(`/agents/runs/${encodeURIComponent(runs.selected)}/approval`, { approve: true }));
  $("run-deny").addEventListener("click", () => runAction(`/agents/runs/${encodeURIComponent(runs.selected)}/approval`, { approve: false }));
  $("run-close").addEventListener("click", () => {
    if (runs.stream) runs.stream.stop();
    runs.selected = null;
    runs.listKey = "";
    $("run-detail").hidden = true;
  });
  $("runs-status").addEventListener("change", () => { runs.listKey = ""; pollRuns(); });
  $("runs-agent").addEventListener("change", () => { runs.listKey = ""; pollRuns(); });

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

    /** Close for good: a run's stream that has delivered its final event, or a page closed. */
    stop() {
      this.stopped = true;
      if (this.controller) this.controller.abort();
      if (this.wake) this.wake();
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
        if (this.stopped) return;
        if (outcome === "missing") {
          this.setState("missing");
          if (this.onMissing) this.onMissing();
          await this.pause(EVENTS_RETRY_MS, null);
          continue;
        }
        if (outcome === "opened") delay = this.retryMs; // it worked: start the backoff afresh
        if (outcome === "auth" || outcome === "restart") continue;
        await this.pause(delay, "reconnecting");
        if (this.stopped) return;
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
    search: "",
    source: "",
    request: null,
    sources: new Set(),
    paused: false,
    dropped: 0,
    sinceAnnounce: { count: 0, serious: 0, last: null },
    announceTimer: null,
  };

  function levelNumber(level) {
    return LEVEL_NUMBERS[level] || 0;
  }

  /** Whether a line passes every filter: level, source, search text and the chosen request. */
  function shown(line) {
    if (levelNumber(line.level) < logs.minLevel) return false;
    if (logs.source && (line.identity || "") !== logs.source) return false;
    if (logs.request && line.event_id !== logs.request) return false;
    if (logs.search) {
      const haystack = `${line.message} ${line.identity || ""} ${line.event_id || ""}`.toLowerCase();
      if (!haystack.includes(logs.search)) return false;
    }
    return true;
  }

  /** The message as text nodes, with each match of the search wrapped in <mark>. */
  function highlighted(message) {
    const text = String(message);
    if (!logs.search) return [text];
    const parts = [];
    const lower = text.toLowerCase();
    let at = 0;
    for (let found = lower.indexOf(logs.search); found !== -1; found = lower.indexOf(logs.search, at)) {
      parts.push(text.slice(at, found), h("mark", { text: text.slice(found, found + logs.search.length) }));
      at = found + logs.search.length;
    }
    parts.push(text.slice(at));
    return parts;
  }

  function logRow(line) {
    const level = String(line.level || "INFO");
    const request = typeof line.event_id === "string" && line.event_id
      ? h("span", { class: "request" },
        h("button", {
          type: "button",
          class: "link-button",
          title: "Show this request's log lines and event chain",
          "data-request": line.event_id,
          text: `chain ${line.event_id.slice(0, 12)}`,
          onclick: () => followRequest(line.event_id),
        }))
      : null;
    return h("li", { class: `log-line level-${level.toLowerCase()}`, "data-id": line.id },
      h("time", { datetime: line.timestamp, text: clockTime(line.timestamp) }),
      h("span", { class: "level", text: level }),
      h("span", { class: "identity", title: line.identity || "", text: line.identity || "—" }),
      h("span", { class: "message" }, highlighted(line.message)),
      line.trace_id
        ? h("span", {
          class: "trace",
          title: `trace ${line.trace_id} span ${line.span_id}`,
          "data-trace-id": line.trace_id,
          text: line.trace_id.slice(0, 8),
        })
        : h("span", { class: "trace", text: "" }),
      request,
    );
  }

  function noteSource(identity) {
    if (!identity || logs.sources.has(identity)) return;
    logs.sources.add(identity);
    const select = $("log-source");
    const options = [...logs.sources].sort();
    const chosen = select.value;
    select.replaceChildren(
      h("option", { value: "", text: "All sources" }),
      ...options.map((name) => h("option", { value: name, text: name })),
    );
    select.value = chosen;
  }

  /** Narrow the log tail to one request and open its event chain. */
  function followRequest(requestId) {
    logs.request = requestId;
    $("log-request-id").textContent = requestId;
    $("log-request-filter").hidden = false;
    rerenderLogs();
    events.focus = requestId;
    events.open.add(requestId);
    renderChains();
    const chain = $("chains").querySelector(".chain.selected") || $("chains").querySelector(`[data-chain="${CSS.escape(requestId)}"]`);
    if (chain) {
      chain.open = true;
      chain.scrollIntoView({ block: "nearest" });
    }
  }

  function isNearBottom(node) {
    return node.scrollHeight - node.scrollTop - node.clientHeight < 40;
  }

  function renderLogLines(lines, { replace = false } = {}) {
    const view = $("log-view");
    const list = $("log-lines");
    const stick = replace || isNearBottom(view);
    const rows = lines.filter(shown).map(logRow);
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
    noteSource(line.identity);
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
    if (!shown(line)) return;
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
      const held = logs.held.filter(shown).length;
      node.textContent = `Paused · ${plural(held, "new line")} held`;
      return;
    }
    node.dataset.state = stream ? stream.state : "connecting";
    node.textContent = describeStreamState(stream ? stream.state : "connecting", logs.lastCountdown);
  }

  /** Draw the kept lines again after a filter changed. */
  function rerenderLogs() {
    clearTimeout(logs.renderTimer); // the lines waiting for a render are in logs.lines too
    logs.renderTimer = null;
    logs.pendingRender = [];
    const held = new Set(logs.held);
    const visible = logs.paused ? logs.lines.filter((line) => !held.has(line)) : logs.lines;
    renderLogLines(visible, { replace: true });
    showLogState();
  }

  $("log-level").addEventListener("change", (event) => {
    logs.minLevel = Number(event.target.value);
    rerenderLogs();
  });

  let searchTimer = null;
  $("log-search").addEventListener("input", (event) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      logs.search = event.target.value.trim().toLowerCase();
      rerenderLogs();
    }, 120);
  });

  $("log-source").addEventListener("change", (event) => {
    logs.source = event.target.value;
    rerenderLogs();
  });

  $("log-request-clear").addEventListener("click", () => {
    logs.request = null;
    events.focus = null;
    $("log-request-filter").hidden = true;
    rerenderLogs();
    renderChains();
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

  const events = { records: new Map(), open: new Set(), renderTimer: null, focus: null };

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
    return list.sort((a, b) => b.latest - a.latest);
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
    let list = chains();
    if (events.focus) {
      const focused = list.filter((chain) => chain.key === events.focus || chain.records.some((r) => r.id === events.focus));
      if (focused.length) list = focused;
    }
    list = list.slice(0, MAX_CHAINS);
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
        const names = [...new Set(chain.records.map((record) => record.name))];
        const title = names.length > 3 ? `${names.slice(0, 3).join(" → ")} → …` : names.join(" → ");
        const details = h("details", {
          class: events.focus && (events.focus === chain.key || chain.records.some((r) => r.id === events.focus)) ? "chain selected" : "chain",
          "data-chain": chain.key,
          open: events.open.has(chain.key),
        },
          h("summary", {},
            h("span", { class: "name", text: title }),
            chain.failures ? badge("ERROR") : badge("OK"),
            chain.fromRequest ? h("span", { class: "muted identity", text: `request ${chain.key.slice(0, 12)}` }) : null,
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
