// The Basalt console's script: plain JavaScript, no framework, no build.
// Views fetch JSON from /console/api/*, the live charts read the
// server-sent events of /console/api/events (uPlot draws them), actions
// POST /console/api/action with the session token after a confirmation
// and show the node's answer.
"use strict";

const state = { session: null, view: null, es: null, timer: null, samples: [], charts: {} };
const OPS = ["get", "put", "delete", "index", "mapred", "datatype"];
const OP_LABEL = { get: "GET", put: "PUT", delete: "DELETE", index: "2i", mapred: "MapReduce", datatype: "data types" };
const COLORS = ["#2f6fdf", "#d9480f", "#2b8a3e", "#ae3ec9", "#0b7285", "#e67700", "#5c940d", "#c2255c"];
const KEEP = 300; // samples: five minutes at one a second

const $ = (sel) => document.querySelector(sel);

function esc(s) {
  return String(s === undefined || s === null ? "" : s).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(1)) + " " + u[i];
}

function pct(r) { return r === null || r === undefined ? "–" : (100 * r).toFixed(1) + " %"; }
function num(v, d) { return v === null || v === undefined ? "–" : Number(v).toFixed(d || 0); }

function kv(pairs) {
  return "<dl class=\"kv\">" + pairs.map(([k, v]) => "<dt>" + esc(k) + "</dt><dd>" + v + "</dd>").join("") + "</dl>";
}

async function api(path) {
  const r = await fetch("/console/api/" + path, { credentials: "same-origin", cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status + " " + (await r.text()));
  return r.json();
}

function answer(text, ok) {
  const li = document.createElement("li");
  li.className = ok ? "ok" : "err";
  li.textContent = new Date().toLocaleTimeString() + "  " + text;
  const log = $("#answer-log");
  log.insertBefore(li, log.firstChild);
}

async function loadSession() {
  state.session = await api("session");
  $("#node-name").textContent = state.session.node;
  $("#user").textContent = "user: " + state.session.user + (state.session.security ? " (security on)" : "");
}

// An action: confirm, POST with the token, show the node's answer. A
// stale token (the node restarted) is fetched again once.
async function act(body, question) {
  if (question && !window.confirm(question)) return null;
  for (let attempt = 0; attempt < 2; attempt++) {
    let r;
    try {
      r = await fetch("/console/api/action", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-console-token": state.session ? state.session.token : "" },
        body: JSON.stringify(body),
      });
    } catch (e) {
      answer(body.action + ": the node did not answer (" + e.message + ")", false);
      return null;
    }
    let v;
    try { v = await r.json(); } catch (e) { v = { ok: false, error: "HTTP " + r.status }; }
    if (r.status === 403 && attempt === 0 && /token/.test(v.error || "")) {
      await loadSession().catch(() => {});
      continue;
    }
    if (v.ok) answer(body.action + ": " + (v.message || "done"), true);
    else answer(body.action + " refused: " + (v.error || ("HTTP " + r.status)), false);
    refresh();
    return v;
  }
  return null;
}

// ---- the ring picture: one arc per partition, coloured by owner; an
// outer arc for a pending new owner.
function ringSvg(owners, next, colorOf) {
  const n = owners.length;
  if (n === 0) return "";
  const R = 90, r = 60, R2 = 100, c = 105;
  const pt = (rad, a) => [c + rad * Math.sin(a), c - rad * Math.cos(a)];
  const arc = (r1, r2, a0, a1, fill, title) => {
    const large = a1 - a0 > Math.PI ? 1 : 0;
    const [x0, y0] = pt(r2, a0), [x1, y1] = pt(r2, a1), [x2, y2] = pt(r1, a1), [x3, y3] = pt(r1, a0);
    return "<path d=\"M" + x0 + " " + y0 + " A" + r2 + " " + r2 + " 0 " + large + " 1 " + x1 + " " + y1 +
      " L" + x2 + " " + y2 + " A" + r1 + " " + r1 + " 0 " + large + " 0 " + x3 + " " + y3 + " Z\" fill=\"" + fill +
      "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>" + esc(title) + "</title></path>";
  };
  let out = "<svg id=\"ring-svg\" width=\"210\" height=\"210\" viewBox=\"0 0 210 210\">";
  for (let p = 0; p < n; p++) {
    const a0 = (2 * Math.PI * p) / n, a1 = (2 * Math.PI * (p + 1)) / n;
    out += arc(r, R, a0, a1, colorOf(owners[p]), "partition " + p + ": " + owners[p]);
    if (next[p]) out += arc(R + 2, R2, a0, a1, colorOf(next[p]), "partition " + p + " moving to " + next[p]);
  }
  out += "<text x=\"" + c + "\" y=\"" + (c + 4) + "\" text-anchor=\"middle\" font-size=\"12\">" + n + " partitions</text></svg>";
  return out;
}

async function showCluster() {
  const v = await api("cluster");
  const members = (v.members && v.members.members) || [];
  const names = members.map((m) => m.node);
  const colorOf = (node) => { const i = names.indexOf(node); return i < 0 ? "#999" : COLORS[i % COLORS.length]; };
  $("#members tbody").innerHTML = members.map((m) => "<tr data-node=\"" + esc(m.node) + "\"><td><span class=\"swatch\" style=\"background:" +
    colorOf(m.node) + "\"></span>" + esc(m.node) + "</td><td class=\"status-" + esc(m.up ? m.status : "unreachable") + "\">" + esc(m.up ? m.status : m.status + ", unreachable") +
    "</td><td>" + (m.up ? "yes" : "no") + "</td><td class=\"num\">" + num(m.ring_pct, 1) + "</td><td class=\"num\">" + esc(m.partitions) +
    "</td><td class=\"num\">" + esc(m.pending) + "</td><td>" + esc(m.address) + "</td></tr>").join("");
  $("#cluster-meta").textContent = "claimant " + (v.members.claimant || "–") + " · cluster " + (v.members.cluster_id || "–") +
    " · ring version " + (v.members.version || "–") + " · transfer limit " + v.transfer_limit;
  $("#ring").innerHTML = ringSvg(v.owners || [], v.next || {}, colorOf);
  $("#ring-legend").innerHTML = names.map((n) => "<span><span class=\"swatch\" style=\"background:" + colorOf(n) + "\"></span>" + esc(n) + "</span>").join("") +
    "<span class=\"meta\">outer arc: pending new owner</span>";
  const t = v.transfers || {};
  const rows = [];
  for (const a of t.active || []) rows.push(["active", a]);
  for (const a of t.pending || []) rows.push(["pending", a]);
  for (const a of t.waiting || []) rows.push(["waiting", a]);
  const hs = (v.handoffs && v.handoffs.nodes) || [];
  $("#transfers").innerHTML =
    (rows.length ? "<table><thead><tr><th>state</th><th>detail</th></tr></thead><tbody>" +
      rows.map(([s, a]) => "<tr><td>" + s + "</td><td><code>" + esc(JSON.stringify(a)) + "</code></td></tr>").join("") + "</tbody></table>"
      : "<p class=\"meta\">No transfers running or pending.</p>") +
    (hs.length ? "<table><thead><tr><th>node</th><th>ownership active/known</th><th>hinted active/known</th></tr></thead><tbody>" +
      hs.map((h) => "<tr><td>" + esc(h.node) + "</td><td>" + esc(h.ownership_active) + " / " + esc(h.ownership_known) + "</td><td>" +
        esc(h.hinted_active) + " / " + esc(h.hinted_known) + "</td></tr>").join("") + "</tbody></table>" : "") +
    "<p class=\"meta\">pending ownership transfers: " + ((v.ring && v.ring.pending) || []).length + "</p>";
  const plan = v.plan || {};
  if (plan.error) $("#plan").innerHTML = "<p class=\"meta\">" + esc(plan.error) + "</p>";
  else if (!(plan.staged || []).length) $("#plan").innerHTML = "<p class=\"meta\">No staged changes.</p>";
  else $("#plan").innerHTML = "<ul>" + plan.staged.map((s) => "<li>" + esc(s.change) + " " + esc(s.node) + (s.to ? " → " + esc(s.to) : "") + "</li>").join("") +
    "</ul><p class=\"meta\">" + esc(plan.transfers) + " transfers after commit</p>";
  const tl = $("#form-transfer-limit input");
  if (document.activeElement !== tl) tl.value = v.transfer_limit;
}

async function showNode() {
  const v = await api("node");
  const t = v.totals || {};
  $("#node-totals").innerHTML = kv([
    ["backend", esc(v.backend)], ["data dir", esc(v.data_dir)], ["on disk", bytes(v.disk_bytes)],
    ["disk free", v.disk && v.disk.free_bytes !== undefined ? bytes(v.disk.free_bytes) + " (" + num(v.disk.free_pct, 1) + " %)" : esc(v.disk && v.disk.error)],
    ["journal", bytes(t.journal_bytes) + " in " + esc(t.journal_files) + " files"],
    ["ledger", bytes(t.ledger_bytes) + " in " + esc(t.ledger_files) + " files; per level " + esc((t.ledger_level_files || []).join(" / "))],
    ["compaction runs", esc(t.compaction_runs) + ", reclaimed " + bytes(t.compaction_bytes_reclaimed)],
    ["write amplification", num(t.write_amplification, 2)],
    ["value cache hits", pct(t.value_cache_hit_ratio)], ["block cache hits", pct(t.block_cache_hit_ratio)],
    ["memtables", bytes(t.memtable_bytes) + (t.memtable_budget_bytes ? " of a " + bytes(t.memtable_budget_bytes) + " budget" : "")],
  ]);
  const p = v.process || {};
  $("#node-process").innerHTML = kv([
    ["CPU time", num(p.cpu_seconds, 1) + " s"], ["resident memory", bytes(p.rss_bytes)], ["threads", esc(p.threads)],
    ["open files", esc(p.open_files) + " of " + esc(p.max_open_files)], ["console streams", esc(v.console_streams)],
  ]);
  const c = v.counters || {};
  $("#node-counters").innerHTML = kv(Object.keys(c).map((k) => [k, esc(c[k])]));
  $("#vnodes tbody").innerHTML = (v.vnodes || []).map((r) => {
    const f = r.figures || {};
    if (r.error) return "<tr><td>" + r.partition + "</td><td>" + esc(r.role) + "</td><td>" + esc(r.owner) + "</td><td class=\"num\">" + r.queue +
      "</td><td class=\"num\">" + r.overloads + "</td><td class=\"num\">" + esc(r.reads_here) + "</td><td class=\"num\">" + esc(r.writes_here) + "</td><td colspan=\"9\">did not answer: " + esc(r.error) + "</td></tr>";
    return "<tr><td>" + r.partition + "</td><td>" + esc(r.role) + "</td><td>" + esc(r.owner) + "</td><td class=\"num\">" + r.queue +
      "</td><td class=\"num\">" + r.overloads + "</td><td class=\"num\">" + esc(r.reads_here) + "</td><td class=\"num\">" + esc(r.writes_here) + "</td><td class=\"num\">" + bytes(r.disk_bytes) + "</td><td class=\"num\">" + bytes(f.journal_bytes) +
      "</td><td class=\"num\">" + bytes(f.ledger_bytes) + "</td><td>" + esc((f.ledger_level_files || []).join("/")) + "</td><td class=\"num\">" +
      esc(f.compaction_runs) + "</td><td class=\"num\">" + bytes(f.compaction_bytes_reclaimed) + "</td><td class=\"num\">" + num(f.write_amplification, 2) +
      "</td><td class=\"num\">" + pct(f.value_cache_hit_ratio) + "</td><td class=\"num\">" + pct(f.block_cache_hit_ratio) + "</td></tr>";
  }).join("");
}

function jsonTable(obj) {
  if (!obj || typeof obj !== "object") return esc(obj);
  return kv(Object.keys(obj).map((k) => [k, typeof obj[k] === "object" && obj[k] !== null ? "<code>" + esc(JSON.stringify(obj[k])) + "</code>" : esc(obj[k])]));
}

async function showAae() {
  const v = await api("aae");
  const rb = v.rebuild || {};
  $("#aae").innerHTML = v.error ? "<p>" + esc(v.error) + "</p>" : kv([
    ["exchanges", esc(v.exchanges)], ["repairs", esc(v.repairs)], ["follow-up loops", esc(v.loops)], ["range repairs", esc(v.range_repairs)],
    ["vnodes with trees", esc(v.vnodes_built) + " of " + esc(v.vnodes)], ["tree size", esc(v.tree_size) + ", " + bytes(v.tree_bytes)],
    ["tree rebuilds", esc(rb.done) + " done, " + esc(rb.failed) + " failed, running: " + esc(rb.running === null ? "none" : JSON.stringify(rb.running))],
    ["next rebuild due in", esc(rb.next_in_secs) + " s"], ["exchange tick", esc(v.tick_ms) + " ms"], ["repairs per second (cap)", esc(v.repairs_per_sec)],
  ]);
}

async function showRepl() {
  const v = await api("repl");
  const sinks = v.sinks || [];
  $("#repl").innerHTML = v.error ? "<p>" + esc(v.error) + "</p>" :
    (sinks.length ? "<table><thead><tr><th>sink</th><th>detail</th></tr></thead><tbody>" + sinks.map((s) => "<tr><td>" + esc(s.name) +
      "</td><td><code>" + esc(JSON.stringify(s)) + "</code></td></tr>").join("") + "</tbody></table>" : "<p class=\"meta\">No sinks configured.</p>") +
    kv([["replication delay (mean)", esc(v.replication_time_mean_ms === null ? "–" : v.replication_time_mean_ms + " ms")],
      ["entries timed", esc(v.replication_time_count)], ["last full-sync", "<code>" + esc(JSON.stringify(v.last_fullsync)) + "</code>"],
      ["unclean queue", esc(v.unclean_queue)]]) +
    "<h3>Counters</h3>" + jsonTable(v.counters);
}

async function showTypes() {
  const v = await api("types");
  $("#types tbody").innerHTML = (v.types || []).map((t) => "<tr data-type=\"" + esc(t.name) + "\"><td>" + esc(t.name) + "</td><td>" +
    (t.active ? "active" : "created") + "</td><td><code>" + esc(JSON.stringify(t.props)) + "</code></td><td>" +
    (t.active ? "" : "<button class=\"small\" data-activate=\"" + esc(t.name) + "\">Activate</button>") + "</td></tr>").join("");
}

async function showSecurity() {
  const v = await api("security");
  const list = (x, k) => (x && x[k]) || [];
  $("#security").innerHTML = "<h3>Status</h3>" + jsonTable(v.status) +
    "<h3>Users</h3>" + (list(v.users, "users").length ? "<table><tbody>" + list(v.users, "users").map((u) => "<tr><td>" + esc(u.name) + "</td><td>groups: " +
      esc((u.groups || []).join(", ")) + "</td><td>" + (u.password ? "password set" : "no password") + "</td></tr>").join("") + "</tbody></table>" : "<p class=\"meta\">none</p>") +
    "<h3>Groups</h3><pre>" + esc(JSON.stringify(list(v.groups, "groups"), null, 1)) + "</pre>" +
    "<h3>Grants</h3><pre>" + esc(JSON.stringify(list(v.grants, "grants"), null, 1)) + "</pre>" +
    "<h3>Sources</h3><pre>" + esc(JSON.stringify(list(v.sources, "sources"), null, 1)) + "</pre>" +
    "<p class=\"meta\">Read-only: change security with <code>basalt admin security</code>.</p>";
}

async function showReports() {
  const v = await api("reports");
  if (!v.dir) { $("#reports").innerHTML = "<p class=\"meta\">" + esc(v.note || "No bench_results_dir configured.") + "</p>"; return; }
  const rs = v.reports || [];
  $("#reports").innerHTML = "<p class=\"meta\">" + esc(v.dir) + (v.error ? " — " + esc(v.error) : "") + "</p>" +
    (rs.length ? "<table id=\"report-list\"><thead><tr><th>report</th><th>size</th><th>written</th></tr></thead><tbody>" +
      rs.map((r) => "<tr><td><a target=\"_blank\" rel=\"noopener\" href=\"/console/reports/" + r.path.split("/").map(encodeURIComponent).join("/") + "\">" +
        esc(r.path) + "</a></td><td class=\"num\">" + bytes(r.bytes) + "</td><td>" + new Date(r.modified * 1000).toLocaleString() + "</td></tr>").join("") +
      "</tbody></table>" : "<p class=\"meta\">No reports yet.</p>");
}

// ---- live charts

function chartOpts(title, series, width) {
  return {
    width: width, height: 200,
    scales: { x: { time: true } },
    series: [{}].concat(series.map((s, i) => ({ label: s, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))),
    axes: [{}, { size: 60 }],
    legend: { live: true },
  };
}

function makeCharts() {
  if (state.charts.ops || typeof uPlot === "undefined") return;
  const w = Math.max(300, Math.min(640, ($("#view-charts").clientWidth || 900) / 2 - 40));
  const empty = (n) => Array.from({ length: n + 1 }, () => []);
  state.charts.ops = new uPlot(chartOpts("ops", OPS.map((o) => OP_LABEL[o]), w), empty(OPS.length), $("#chart-ops"));
  state.charts.errors = new uPlot(chartOpts("errors", ["errors", "overload refusals", "read repairs"], w), empty(3), $("#chart-errors"));
  state.charts.cpu = new uPlot(chartOpts("cpu", ["CPU %", "vnode queue (total)", "vnode queue (max)"], w), empty(3), $("#chart-cpu"));
  const box = $("#latency-charts");
  for (const o of OPS) {
    const d = document.createElement("div");
    d.className = "card chart";
    d.innerHTML = "<h3>" + OP_LABEL[o] + " latency (ms)</h3><div id=\"chart-lat-" + o + "\"></div>";
    box.appendChild(d);
    state.charts["lat_" + o] = new uPlot(chartOpts(o, ["median", "p99", "max"], w), empty(3), d.querySelector("div"));
  }
}

function drawCharts() {
  if (!state.charts.ops) return;
  const S = state.samples;
  const x = S.map((s) => s.t / 1000);
  state.charts.ops.setData([x].concat(OPS.map((o) => S.map((s) => s.ops[o].rate))));
  state.charts.errors.setData([x, S.map((s) => s.errors), S.map((s) => s.overloads), S.map((s) => s.read_repairs)]);
  state.charts.cpu.setData([x, S.map((s) => s.cpu_pct), S.map((s) => s.vnode_queue_total), S.map((s) => s.vnode_queue_max)]);
  for (const o of OPS) {
    state.charts["lat_" + o].setData([x, S.map((s) => s.ops[o].median_us / 1000), S.map((s) => s.ops[o].p99_us / 1000), S.map((s) => s.ops[o].max_us / 1000)]);
  }
}

// The stream reconnects by itself: EventSource retries after a dropped
// connection; a stream the browser gave up on (closed) is opened again
// after three seconds, and the session (its token) is read again since
// the node may have restarted.
function openStream() {
  if (state.es) state.es.close();
  const es = new EventSource("/console/api/events");
  state.es = es;
  const mark = (on) => { const s = $("#stream-state"); s.className = "stream " + (on ? "on" : "off"); };
  es.onopen = () => { mark(true); loadSession().catch(() => {}); };
  es.addEventListener("sample", (ev) => {
    let s;
    try { s = JSON.parse(ev.data); } catch (e) { return; }
    state.samples.push(s);
    if (state.samples.length > KEEP) state.samples.shift();
    // For the browser test: how many samples, and the newest.
    window.__consoleSamples = state.samples.length;
    window.__consoleLast = s;
    if (state.view === "charts") drawCharts();
  });
  es.onerror = () => {
    mark(false);
    if (es.readyState === EventSource.CLOSED) setTimeout(() => { if (state.es === es) openStream(); }, 3000);
  };
}

// ---- views and navigation

const VIEWS = { cluster: showCluster, node: showNode, charts: async () => { makeCharts(); drawCharts(); }, aae: showAae, repl: showRepl,
  types: showTypes, security: showSecurity, reports: showReports };

async function refresh() {
  const f = VIEWS[state.view];
  if (!f) return;
  try {
    await f();
    document.body.dataset.loaded = state.view;
  } catch (e) {
    answer("loading " + state.view + ": " + e.message, false);
  }
}

function show(view) {
  if (!VIEWS[view]) view = "cluster";
  state.view = view;
  document.querySelectorAll(".view").forEach((s) => s.classList.toggle("active", s.id === "view-" + view));
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === view));
  document.body.dataset.loaded = "";
  refresh();
}

function formValues(form) {
  const o = {};
  new FormData(form).forEach((v, k) => { o[k] = String(v).trim(); });
  return o;
}

function wire() {
  window.addEventListener("hashchange", () => show(location.hash.slice(1)));
  $("#form-join").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = formValues(e.target);
    act({ action: "join", addr: v.addr }, "Stage a join of this node (" + state.session.node + ") to the cluster at " + v.addr + "?");
  });
  $("#form-leave").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = formValues(e.target);
    act({ action: "leave", node: v.node }, "Stage a leave of " + (v.node || "this node") + "?");
  });
  $("#btn-plan").addEventListener("click", () => act({ action: "plan" }));
  $("#btn-commit").addEventListener("click", () => act({ action: "commit" }, "Commit the staged changes? Transfers start at once."));
  $("#btn-clear").addEventListener("click", () => act({ action: "clear" }, "Drop the staged changes?"));
  $("#form-transfer-limit").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = formValues(e.target);
    act({ action: "transfer-limit", limit: v.limit }, "Set this node's transfer limit to " + v.limit + "?");
  });
  $("#btn-aae-round").addEventListener("click", () => act({ action: "aae-round" }, "Start an anti-entropy round on this node now?"));
  $("#btn-fullsync").addEventListener("click", () => act({ action: "repl-fullsync" }, "Start a full-sync with every sink now?"));
  $("#form-type-create").addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = formValues(e.target);
    let props;
    try { props = v.props ? JSON.parse(v.props) : {}; } catch (err) { answer("type-create refused: props is not JSON: " + err.message, false); return; }
    const r = await act({ action: "type-create", name: v.name, props: props }, "Create bucket type " + v.name + " with " + JSON.stringify(props) + "?");
    if (r && r.ok) await act({ action: "type-activate", name: v.name }, "Activate bucket type " + v.name + " now?");
  });
  $("#types").addEventListener("click", (e) => {
    const name = e.target.dataset && e.target.dataset.activate;
    if (name) act({ action: "type-activate", name: name }, "Activate bucket type " + name + "?");
  });
}

async function main() {
  wire();
  try { await loadSession(); } catch (e) { answer("session: " + e.message, false); }
  openStream();
  show(location.hash.slice(1) || "cluster");
  // The open view refreshes every five seconds (the charts on each sample).
  state.timer = setInterval(() => { if (state.view !== "charts") refresh(); }, 5000);
}

main();
