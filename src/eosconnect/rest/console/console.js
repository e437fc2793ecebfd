// The eosconnect console: polls the worker's /console/api routes and acts through its REST API.
// Plain browser JavaScript, no build step and no library: the worker serves this file as it is.
"use strict";

const STATE_EVERY_MS = 3000;
const SERIES_EVERY_MS = 10000;
const HOUR_S = 3600;

const ui = {
  state: null,
  series: { connectors: {} },
  open: new Set(),          // <details> kept open across refreshes, by data-key
  offsets: new Map(),       // connector -> {offsets} | {error}
  messages: new Map(),      // connector -> {text, error}
  confirmResolve: null,
};

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

function path(name) { return "/connectors/" + encodeURIComponent(name); }

function fmt(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return esc(value);
  if (Math.abs(value) >= 1e6) return (value / 1e6).toFixed(digits) + "M";
  if (Math.abs(value) >= 1e4) return (value / 1e3).toFixed(digits) + "k";
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

function age(ms) {
  if (ms === null || ms === undefined) return "none open";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

async function getJson(url) {
  const response = await fetch(url, { headers: { accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

// ---------------------------------------------------------------- charts (inline SVG)

function chart(title, points, cssClass, unit) {
  const width = 300, height = 80, pad = 4;
  const now = Date.now() / 1000;
  const shown = points.filter((p) => p[1] !== null && p[1] !== undefined && now - p[0] <= HOUR_S);
  const max = Math.max(1, ...shown.map((p) => p[1]));
  // The last hour, or less while the worker has sampled for less (samples start with the page).
  const start = shown.length ? Math.max(now - HOUR_S, shown[0][0] - 10) : now - HOUR_S;
  const span = Math.max(now - start, 1);
  const since = now - start >= HOUR_S - 1 ? "1 h ago" : "since " + new Date(start * 1000).toLocaleTimeString();
  const x = (t) => pad + ((t - start) / span) * (width - 2 * pad);
  const y = (v) => height - pad - (v / max) * (height - 2 * pad - 10);
  const line = shown.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
  const last = shown.length ? shown[shown.length - 1][1] : null;
  return `<div class="chart"><div class="title">${esc(title)}: <b>${fmt(last)}</b> ${esc(unit)}</div>
    <svg width="${width}" height="${height}" role="img" aria-label="${esc(title)}">
      <line class="axis" x1="${pad}" y1="${height - pad}" x2="${width - pad}" y2="${height - pad}"/>
      <text x="${pad}" y="10">max ${fmt(max)}</text>
      <text x="${pad}" y="${height - 6}">${esc(since)}</text>
      <text x="${width - pad}" y="${height - 6}" text-anchor="end">now</text>
      ${shown.length > 1 ? `<polyline class="line ${cssClass}" points="${line}"/>` : ""}
      ${shown.length <= 1 ? `<text x="${width / 2}" y="${height / 2}" text-anchor="middle">collecting samples...</text>` : ""}
    </svg></div>`;
}

// ---------------------------------------------------------------- rendering

function isFailed(connector) {
  return connector.connector.state === "FAILED" || connector.tasks.some((t) => t.state === "FAILED");
}

function renderHeader(state) {
  const w = state.worker;
  document.getElementById("worker").innerHTML =
    `worker <b>${esc(w.id)}</b> · ${w.leader ? "leader" : "follower of " + esc(w.leader_url || "no leader")}` +
    ` · eosconnect ${esc(w.version)} · Kafka cluster ${esc(w.kafka_cluster_id || "?")}`;
  document.getElementById("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
  const failed = state.connectors.filter(isFailed);
  let alerts = failed.length
    ? `<div class="alert" id="failed-alert">${failed.length} connector(s) with a FAILED task or connector: ` +
      failed.map((c) => esc(c.name)).join(", ") + "</div>"
    : "";
  if (!state.metrics_here) {
    alerts += `<div class="alert info">Task metrics are kept by the leader: open the console on ` +
      `${esc(state.worker.leader_url || "the leader")} for throughput and exactly-once figures.</div>`;
  }
  setHtml(document.getElementById("alerts"), alerts);
}

function renderWorkers(workers) {
  const rows = workers.map((w) => `<tr><td>${esc(w.id)}${w.this ? " <span class=\"muted\">(this page)</span>" : ""}</td>` +
    `<td>${w.leader ? "<span class=\"badge RUNNING\">leader</span>" : "member"}</td><td class="num">${w.tasks}</td></tr>`);
  setHtml(document.querySelector("#workers tbody"), rows.join(""));
}

function connectorHead(c) {
  const state = c.connector.state || "UNASSIGNED";
  const version = c.connector.version ? ` <span class="muted">v${esc(c.connector.version)}</span>` : "";
  const n = esc(c.name);
  return `<h3>${n}</h3><span class="muted">${esc(c.type)}${version}</span>
    <span class="badge ${esc(state)}" data-role="connector-state">${esc(state)}</span>
    <span class="muted">on ${esc(c.connector.worker_id || "–")}</span>
    <span class="actions">
      <button data-action="pause" data-name="${n}">Pause</button>
      <button data-action="resume" data-name="${n}">Resume</button>
      <button data-action="stop" data-name="${n}">Stop</button>
      <button data-action="restart" data-name="${n}">Restart</button>
      <button data-action="offsets" data-name="${n}">Offsets</button>
      <button data-action="delete" data-name="${n}" class="danger">Delete</button>
    </span>`;
}

function taskRow(c, t) {
  const m = t.metrics || {};
  const trace = t.trace
    ? `<details data-key="trace:${esc(c.name)}:${t.id}"><summary>trace</summary><pre class="trace">${esc(t.trace)}</pre></details>`
    : "";
  const restart = t.state === "FAILED"
    ? ` <button data-action="restart-task" data-name="${esc(c.name)}" data-task="${t.id}">Restart task</button>` : "";
  return `<tr class="task-${esc(t.state)}" data-task="${t.id}">
    <td>${t.id}</td>
    <td class="state"><span class="badge ${esc(t.state)}">${esc(t.state)}</span>${restart}${trace}</td>
    <td>${esc(t.worker_id || "–")}${t.version ? ` <span class="muted">v${esc(t.version)}</span>` : ""}</td>
    <td class="num">${fmt(m.records_per_s)}</td>
    <td class="num">${fmt(m.records, 0)}</td>
    <td class="num">${fmt(m.commits_per_s, 2)}</td>
    <td class="num">${fmt(m.commits, 0)}</td>
    <td class="num">${fmt(m.aborts, 0)}</td>
    <td class="num">${t.metrics && c.type === "source" ? age(m.open_transaction_age_ms) : "–"}</td>
    <td class="num">${fmt(m.lag, 0)}</td>
    <td class="num">${c.dead_letter_topic ? fmt(m.dead_letters ?? 0, 0) : "–"}</td>
  </tr>`;
}

function connectorBody(c) {
  const series = ui.series.connectors[c.name] || [];
  const charts = chart(c.type === "sink" ? "records read" : "records written", series.map((p) => [p[0], p[1]]), "", "records/s") +
    (c.type === "sink" ? chart("consumer lag", series.map((p) => [p[0], p[2]]), "lag", "records") : "");
  const commits = c.tasks.reduce((sum, t) => sum + ((t.metrics || {}).commits || 0), 0);
  const aborts = c.tasks.reduce((sum, t) => sum + ((t.metrics || {}).aborts || 0), 0);
  const eos = c.type === "source"
    ? `<div class="eos" data-role="eos">exactly once: <span>${c.exactly_once ? "<b>on</b>" : "off"}</span>
        <span>transactions committed <b>${fmt(commits, 0)}</b></span>
        <span>aborted <b>${fmt(aborts, 0)}</b></span>
        <span>zombie fencing rounds <b>${fmt(c.fencing_rounds ?? 0, 0)}</b></span>
        <span>last verify: <span class="muted">run <code>eosconnect verify</code>; its result is not sent to the worker</span></span></div>`
    : `<div class="eos" data-role="eos">positions commit with each flush:
        <span>commits <b>${fmt(commits, 0)}</b></span>
        <span>dead letter queue <b>${esc(c.dead_letter_topic || "none")}</b></span></div>`;
  const tasks = `<table class="grid tasks"><thead><tr><th>Task</th><th>State</th><th>Worker</th>
      <th>records/s</th><th>records</th><th>commits/s</th><th>commits</th><th>aborts</th>
      <th>open transaction</th><th>lag</th><th>DLQ</th></tr></thead>
      <tbody>${c.tasks.map((t) => taskRow(c, t)).join("") || "<tr><td colspan=\"11\" class=\"muted\">no tasks</td></tr>"}</tbody></table>`;
  const connectorTrace = c.connector.trace
    ? `<details data-key="trace:${esc(c.name)}"><summary>connector trace</summary><pre class="trace">${esc(c.connector.trace)}</pre></details>` : "";
  const config = Object.entries(c.config).sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("");
  const offsets = ui.offsets.get(c.name);
  const offsetsHtml = offsets === undefined ? "" : `<div class="offsets" data-role="offsets">
      <b>Offsets</b> <button data-action="reset-offsets" data-name="${esc(c.name)}">Reset offsets</button>
      <button data-action="offsets" data-name="${esc(c.name)}">Reload</button>
      <button data-action="close-offsets" data-name="${esc(c.name)}">Close</button>
      <pre>${offsets.error ? esc(offsets.error) : esc(JSON.stringify(offsets.offsets, null, 2))}</pre></div>`;
  const message = ui.messages.get(c.name);
  const messageHtml = message ? `<div class="message ${message.error ? "error" : ""}" data-role="message">${esc(message.text)}</div>` : "";
  return `${messageHtml}${connectorTrace}${eos}<div class="charts">${charts}</div>${tasks}${offsetsHtml}
    <details data-key="config:${esc(c.name)}"><summary>configuration (secrets hidden)</summary>
      <table class="grid config">${config}</table></details>`;
}

function setHtml(element, html) {
  if (element.dataset.html !== html) {
    element.innerHTML = html;
    element.dataset.html = html;
    element.querySelectorAll("details[data-key]").forEach((d) => { d.open = ui.open.has(d.dataset.key); });
  }
}

function renderConnectors(connectors) {
  const root = document.getElementById("connectors");
  document.getElementById("connector-count").textContent = `(${connectors.length})`;
  const wanted = new Set(connectors.map((c) => c.name));
  root.querySelectorAll(".connector").forEach((card) => { if (!wanted.has(card.dataset.name)) card.remove(); });
  if (!connectors.length && !root.querySelector(".empty")) {
    root.innerHTML = "<p class=\"muted empty\">No connectors. Create one with <code>POST /connectors</code> or <code>eosconnect connectors create</code>.</p>";
  } else if (connectors.length) {
    root.querySelector(".empty")?.remove();
  }
  connectors.forEach((c, index) => {
    let card = [...root.children].find((el) => el.dataset.name === c.name);
    if (!card) {
      card = document.createElement("section");
      card.dataset.name = c.name;
      card.innerHTML = "<div class=\"connector-head\"></div><div class=\"connector-body\"></div>";
    }
    if (root.children[index] !== card) root.insertBefore(card, root.children[index] || null);
    card.className = `connector state-${c.connector.state || "UNASSIGNED"}${isFailed(c) ? " failed" : ""}`;
    setHtml(card.querySelector(".connector-head"), connectorHead(c));
    setHtml(card.querySelector(".connector-body"), connectorBody(c));
  });
}

function render() {
  if (!ui.state) return;
  renderHeader(ui.state);
  renderWorkers(ui.state.workers);
  renderConnectors(ui.state.connectors);
}

// ---------------------------------------------------------------- actions

function confirmAction(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

async function call(method, url) {
  const response = await fetch(url, { method, headers: { accept: "application/json" } });
  let body = null;
  const text = await response.text();
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = text; }
  if (!response.ok) throw new Error((body && body.message) || `HTTP ${response.status}`);
  return body;
}

const ACTIONS = {
  pause: { method: "PUT", url: (n) => path(n) + "/pause", done: "pause requested" },
  resume: { method: "PUT", url: (n) => path(n) + "/resume", done: "resume requested" },
  stop: {
    method: "PUT", url: (n) => path(n) + "/stop", done: "stop requested",
    confirm: (n) => `Stop connector ${n}? Its tasks end and its offsets can then be changed.`,
  },
  restart: { method: "POST", url: (n) => path(n) + "/restart?includeTasks=true&onlyFailed=false", done: "restart requested" },
  delete: {
    method: "DELETE", url: (n) => path(n), done: "deleted",
    confirm: (n) => `Delete connector ${n}? Its configuration is removed; its offsets stay in the offsets topic.`,
  },
  "reset-offsets": {
    method: "DELETE", url: (n) => path(n) + "/offsets", done: "offsets reset", reload: true,
    confirm: (n) => `Reset the offsets of ${n}? It starts from scratch when it is resumed (the connector must be STOPPED).`,
  },
};

async function showOffsets(name) {
  try {
    ui.offsets.set(name, { offsets: await call("GET", path(name) + "/offsets") });
  } catch (error) {
    ui.offsets.set(name, { error: String(error.message || error) });
  }
  render();
}

async function act(button) {
  const name = button.dataset.name;
  const action = button.dataset.action;
  if (action === "offsets") return showOffsets(name);
  if (action === "close-offsets") { ui.offsets.delete(name); return render(); }
  let spec = ACTIONS[action];
  if (action === "restart-task") {
    spec = { method: "POST", url: (n) => `${path(n)}/tasks/${button.dataset.task}/restart`, done: `task ${button.dataset.task} restart requested` };
  }
  if (!spec) return;
  if (spec.confirm && !(await confirmAction(spec.confirm(name)))) {
    ui.messages.set(name, { text: `${action}: cancelled` });
    return render();
  }
  try {
    await call(spec.method, spec.url(name));
    ui.messages.set(name, { text: `${action}: ${spec.done}` });
    if (spec.reload) await showOffsets(name);
  } catch (error) {
    ui.messages.set(name, { text: `${action} failed: ${error.message || error}`, error: true });
  }
  await refreshState();
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  if (button) { event.preventDefault(); act(button); }
});
document.addEventListener("toggle", (event) => {
  const d = event.target;
  if (d.dataset && d.dataset.key) { if (d.open) ui.open.add(d.dataset.key); else ui.open.delete(d.dataset.key); }
}, true);

// ---------------------------------------------------------------- polling

async function refreshState() {
  try {
    ui.state = await getJson("/console/api/state");
    render();
  } catch (error) {
    document.getElementById("refreshed").textContent = "refresh failed: " + (error.message || error);
  }
}

async function refreshSeries() {
  try {
    ui.series = await getJson("/console/api/series");
    render();
  } catch (error) { /* the next round tries again; the state refresh reports a worker away */ }
}

refreshState();
refreshSeries();
setInterval(refreshState, STATE_EVERY_MS);
setInterval(refreshSeries, SERIES_EVERY_MS);
