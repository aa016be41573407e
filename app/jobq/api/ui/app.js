// The jobq dashboard. Plain JavaScript, no build step: every read and every action is a
// call of the public API (/v1/...) with the operator's token, which lives only in this
// tab's sessionStorage. Views are chosen by the URL's hash (#/queues, #/jobs?queue=q, ...)
// and refresh in place every POLL_MS.
"use strict";

const POLL_MS = 3000;
const THROUGHPUT_EVERY_MS = 10000;
const CHART_MINUTES = 15; // a queue's small chart
const HISTORY_MINUTES = 60; // the overall graph (the API's longest window); one read serves both
const PAGE_SIZE = 50;
const TOKEN_KEY = "jobq.token";
const STATUSES = ["pending", "running", "failed", "completed", "dead", "cancelled"];

const state = { gen: 0, timer: null, throughput: null, throughputAt: 0, throughputRead: null, cursors: [], busy: false,
  selected: new Set(), totals: null, totalsAt: 0, totalsPages: 0, totalsPartial: false };

// ---- helpers ----------------------------------------------------------------------------
const $ = (sel, root = document) => root.querySelector(sel);
function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function ago(iso) {
  if (!iso) return "";
  return duration(Date.now() - Date.parse(iso)) + " ago";
}
function duration(ms) {
  if (ms == null) return "";
  ms = Math.max(0, ms);
  if (ms < 1000) return ms + " ms";
  const s = Math.round(ms / 1000);
  if (s < 120) return s + " s";
  const m = Math.round(s / 60);
  if (m < 120) return m + " min";
  const h = Math.round(m / 60);
  return h < 48 ? h + " h" : Math.round(h / 24) + " d";
}
// When, relative to now: "3 min ago", "in 2 h", "just now".
function relative(iso) {
  if (!iso) return "";
  const ms = Date.parse(iso) - Date.now();
  if (Math.abs(ms) < 1000) return "just now";
  return ms < 0 ? duration(-ms) + " ago" : "in " + duration(ms);
}
// A time as UTC, with how long ago (or until) beside it; the exact value is the title.
function time(iso) {
  if (!iso) return "";
  return `<span class="time" title="${esc(iso)}">${esc(iso.replace("T", " ").replace(/\.\d+Z$/, "Z"))}
    <span class="rel" data-rel>(${esc(relative(iso))})</span></span>`;
}
function badge(text) { return `<span class="badge ${esc(text)}">${esc(text)}</span>`; }
function json(v) { return `<pre>${esc(JSON.stringify(v, null, 2))}</pre>`; }
function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}
function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "queues";
  const [path, qs] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  return { view: parts[0], arg: parts[1], params: Object.fromEntries(new URLSearchParams(qs || "")) };
}
function setStatus(text, isError = false) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "muted";
}

// ---- the API ----------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.code = problem && problem.code;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) {
    const err = new ApiError(r.status, data);
    if (r.status === 401) showLogin(sessionStorage.getItem(TOKEN_KEY) ? "That token is not valid (unknown or revoked)." : "");
    throw err;
  }
  return data;
}

// ---- access -----------------------------------------------------------------------------
// GET /v1/queues needs an admin token: it tells a usable token (or local mode) from one
// that is not valid (401) and from one of another role (403).
async function checkAccess() {
  try {
    await api("GET", "/v1/queues" + query({ limit: 1 }));
    return true;
  } catch (e) {
    if (e.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("That token is not an admin token: the dashboard needs an admin token (" + e.message + ").");
    } else if (e.status !== 401) {
      showLogin("The service did not answer: " + e.message);
    }
    return false;
  }
}

function showLogin(message) {
  stopPolling();
  $("#view").hidden = true;
  $("#nav").hidden = true;
  $("#login").hidden = false;
  $("#logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("#login-error").textContent = message || "";
  setStatus("");
}

function showApp() {
  $("#login").hidden = true;
  $("#view").hidden = false;
  $("#nav").hidden = false;
  $("#logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

// ---- views ------------------------------------------------------------------------------
// Each view has a frame (filters, headings: drawn once per navigation, so that typing in a
// filter survives a refresh) and a body refreshed in place.
const views = {};

views.queues = {
  // A page at a time (GET /v1/queues is paginated), searched by the start of the name.
  frame: (r) => `<h1>Queues</h1><div id="overview"></div><form class="filters" id="filters">
      <label>Name starts with<input name="prefix" value="${esc(r.params.prefix || "")}" placeholder="any"></label>
      <button type="submit">Search</button></form><div id="body"></div>
    <p class="muted">The counts are the API's (<code>GET /v1/queues</code>): Failed = failed, waiting
    to retry (not counted in Pending). Throughput: jobs finished per minute over the last
    ${CHART_MINUTES} minutes (<span class="swatch c"></span> completed, <span class="swatch d"></span>
    dead), from <code>GET /v1/throughput</code>. Rate limits, for a queue that has any: the pace of
    claims (jobs handed out in the window now / its limit, the busiest key's), the producers' enqueue
    rate, and the soft thresholds past which enqueues are slowed.</p>`,
  async body(r) {
    const prefix = r.params.prefix;
    const [page, tp] = await Promise.all([
      api("GET", "/v1/queues" + query({ prefix, limit: PAGE_SIZE, cursor: currentCursor() })), throughput(),
      overview()]);
    const queues = page.queues;
    const series = Object.fromEntries((tp ? tp.queues : []).map((q) => [q.name, q]));
    if (!queues.length) return prefix ? `<p class="muted">No queue's name starts with ${esc(prefix)}.</p>`
      : `<p class="muted">No queues yet: a queue appears with its first job.</p>`;
    // The rate limits' column only when a queue of the page has one (most have none).
    const withRates = queues.some(hasRates);
    const rows = queues.map((q) => {
      const c = q.counts;
      const paused = q.settings.paused;
      const t = series[q.name];
      return `<tr data-queue="${esc(q.name)}">
        <td class="name"><a href="#/queue/${encodeURIComponent(q.name)}">${esc(q.name)}</a>
          ${paused ? badge("paused") : ""}</td>
        ${countCells(c, q.name)}
        <td class="num" data-col="oldest" data-label="Oldest waiting">${q.oldest_waiting_ms == null ? "–" : duration(q.oldest_waiting_ms)}</td>
        <td class="chart" data-col="throughput">${t ? spark(t) : tp ? "" : '<span class="muted">n/a</span>'}</td>
        ${withRates ? `<td class="rates" data-col="rate" data-label="Rate limits">${rateCell(q)}</td>` : ""}
        <td class="act"><button type="button" data-act="${paused ? "resume" : "pause"}" data-queue="${esc(q.name)}">
          ${paused ? "Resume" : "Pause"}</button></td></tr>`;
    }).join("");
    return `<div class="table-wrap"><table class="queues"><thead><tr><th>Queue</th>${countHeads()}
      <th class="num">Oldest waiting</th><th>Throughput</th>${withRates ? RATE_HEAD : ""}<th></th></tr></thead>
      <tbody>${rows}</tbody></table></div>`
      + (page.next_cursor || state.cursors.length ? pager(page.next_cursor) : "");
  },
  async act(button) {
    if (paging[button.dataset.act]) { paging[button.dataset.act](button); return; }
    await pauseOrResume(button);
  },
  filter(form) {
    location.hash = "#/queues" + query({ prefix: new FormData(form).get("prefix").trim() });
  },
};

// A queue's counts, one column per status of GET /v1/queues (each job in exactly one).
const COUNT_COLUMNS = [
  ["pending", "Pending", "waiting to be claimed"],
  ["running", "Running", "held by a worker"],
  ["failed", "Failed", "failed, waiting to retry"],
  ["dead", "Dead", "failed for good"],
  ["completed", "Completed", "finished, kept for the queue's retention"],
  ["cancelled", "Cancelled", "cancelled, kept for the queue's retention"],
];
function countHeads() {
  return COUNT_COLUMNS.map(([, label, help]) => `<th class="num" title="${esc(help)}">${label}</th>`).join("");
}
function countCells(c, queue) {
  return COUNT_COLUMNS.map(([key, label]) => {
    const n = c[key] || 0;
    const shown = key === "dead" && n ? `<a href="#/dead?queue=${encodeURIComponent(queue)}">${n}</a>` : n;
    return `<td class="num" data-col="${key}" data-label="${label}">${shown}</td>`;
  }).join("");
}

// ---- rate limits (GUIDE.md, Rate limits): a queue's pace and its use now, its producers'
// bucket, and the soft thresholds of its backpressure.
const RATE_HEAD = `<th title="the pace of claims (jobs handed out in the window now / the limit), the producers'
  enqueue rate, and the soft thresholds past which enqueues are slowed">Rate limits</th>`;
function hasRates(q) {
  const s = q.settings;
  return s.rate_limit != null || s.enqueue_rate != null || s.soft_depth != null || s.soft_lag_ms != null;
}
// "10 per 1 s" (", per payload.tenant"; ", burst 200" when it is not the rate's jobs).
function rateWords(r) {
  let words = `${r.jobs} per ${duration(r.per_ms)}`;
  if (r.key) words += `, per ${r.key}`;
  if (r.burst != null && r.burst !== r.jobs) words += `, burst ${r.burst}`;
  return words;
}
// The pace's use now, "3/10" (the busiest key's), as `jobq queues` shows it.
function rateUse(q) {
  const use = q.rate_limit_use || { jobs: 0 };
  return `${use.jobs}/${q.settings.rate_limit.jobs}`;
}
function softWords(s) {
  const past = [];
  if (s.soft_depth != null) past.push(`${s.soft_depth} waiting`);
  if (s.soft_lag_ms != null) past.push(`${duration(s.soft_lag_ms)} of lag`);
  return past.length ? "past " + past.join(" or ") : "";
}
function rateCell(q) {
  const s = q.settings;
  const lines = [];
  if (s.rate_limit) {
    const full = q.rate_limit_use && q.rate_limit_use.free_in_ms != null;
    lines.push(`<div data-rate="pace">pace <b class="${full ? "at-limit" : ""}">${esc(rateUse(q))}</b>
      per ${esc(duration(s.rate_limit.per_ms))}${s.rate_limit.key ? `, per ${esc(s.rate_limit.key)}` : ""}</div>`);
  }
  if (s.enqueue_rate) lines.push(`<div data-rate="enqueue">enqueue ${esc(rateWords(s.enqueue_rate))}</div>`);
  const soft = softWords(s);
  if (soft) lines.push(`<div data-rate="soft">slowed ${esc(soft)}</div>`);
  return lines.join("") || "–";
}
// The queue page's section: every rate setting, "none"/"off" included, and the pace's use.
function rateSection(q) {
  const s = q.settings;
  const use = q.rate_limit_use;
  let used = "–";
  if (s.rate_limit && use) {
    used = `${rateUse(q)} in the last ${duration(s.rate_limit.per_ms)}`;
    if (s.rate_limit.key) used += `; ${use.keys} keys, ${use.keys_at_limit} at the limit`;
    if (use.free_in_ms != null) used += `; room again in ${duration(use.free_in_ms)}`;
  }
  const rows = [
    ["pace", "Pace of claims", s.rate_limit ? rateWords(s.rate_limit) : "none"],
    ["use", "In use now", used],
    ["enqueue", "Enqueue rate", s.enqueue_rate ? rateWords(s.enqueue_rate) : "none"],
    ["soft", "Backpressure", softWords(s) ? "enqueues slowed " + softWords(s) : "off"],
  ];
  return `<h2>Rate limits</h2><dl class="fields" data-section="rates">${rows.map(([key, label, value]) =>
    `<dt>${label}</dt><dd data-rate="${key}">${esc(value)}</dd>`).join("")}</dl>`;
}

async function pauseOrResume(button) {
  const name = button.dataset.queue;
  await api("PATCH", "/v1/queues/" + encodeURIComponent(name), { paused: button.dataset.act === "pause" });
  setStatus(`${name}: ${button.dataset.act === "pause" ? "paused" : "resumed"}`);
}

// One queue (#/queue/NAME): its counts and settings, Pause / Resume, and Delete queue.
views.queue = {
  frame: (r) => `<h1>Queue ${esc(r.arg)}</h1>
    <div class="actions"><a href="#/jobs?queue=${encodeURIComponent(r.arg)}">Jobs</a>
      <a href="#/dead?queue=${encodeURIComponent(r.arg)}">Dead letters</a></div>
    <div id="queue-delete" role="alert"></div><div id="body"></div>`,
  async body(r) {
    let q;
    const [got, tp] = await Promise.allSettled([
      api("GET", "/v1/queues/" + encodeURIComponent(r.arg)), throughput()]);
    if (got.status === "rejected") {
      if (got.reason.status === 404) return `<p class="error">No queue ${esc(r.arg)}.</p>`;
      throw got.reason;
    }
    q = got.value;
    const t = tp.status === "fulfilled" && tp.value ? tp.value.queues.find((x) => x.name === q.name) : null;
    const paused = q.settings.paused;
    const settings = Object.entries(q.settings).map(([k, v]) =>
      `<dt>${esc(k)}</dt><dd>${v == null ? "–" : esc(v.per_ms ? rateWords(v)
        : typeof v === "object" ? JSON.stringify(v) : v)}</dd>`).join("");
    return `<div class="actions">
        <button type="button" data-act="${paused ? "resume" : "pause"}" data-queue="${esc(q.name)}">${paused ? "Resume" : "Pause"}</button>
        <button type="button" class="danger" data-act="delete-queue">Delete queue</button></div>
      <div class="table-wrap"><table class="queues"><thead><tr>${countHeads()}<th class="num">Oldest waiting</th>
        <th>Throughput</th></tr></thead><tbody><tr data-queue="${esc(q.name)}">${countCells(q.counts, q.name)}
        <td class="num" data-col="oldest" data-label="Oldest waiting">${q.oldest_waiting_ms == null ? "–" : duration(q.oldest_waiting_ms)}</td>
        <td class="chart" data-col="throughput">${t ? spark(t) : ""}</td></tr></tbody></table></div>
      ${rateSection(q)}
      <h2>Settings</h2><dl class="fields">${settings}</dl>`;
  },
  async act(button, r) {
    const act = button.dataset.act;
    if (act === "pause" || act === "resume") { await pauseOrResume(button); return; }
    if (act === "delete-queue" || act === "delete-queue-purge") await deleteQueue(r.arg, act === "delete-queue-purge");
  },
};

// DELETE /v1/queues/{name}: refused (409 queue_not_empty) while the queue holds jobs; the
// refusal is shown with an offer to delete the jobs too (?purge=true), confirmed again.
async function deleteQueue(name, purge) {
  const box = $("#queue-delete");
  const question = purge
    ? `Delete queue ${name} AND every job in it (waiting, running, failed and dead)? This cannot be undone.`
    : `Delete queue ${name}?`;
  if (!confirm(question)) return;
  try {
    await api("DELETE", "/v1/queues/" + encodeURIComponent(name) + (purge ? "?purge=true" : ""));
  } catch (e) {
    if (e.status !== 409 || !box) throw e;
    box.innerHTML = deleteRefusal(e);
    return;
  }
  setStatus(`queue ${name} deleted`);
  location.hash = "#/queues";
}

// The 409's message, what blocks the delete, and the purge offer when only jobs do (a purge
// leaves schedules and topic subscriptions naming the queue in place).
function deleteRefusal(e) {
  const p = e.problem || {};
  const counts = Object.entries(p.counts || {}).filter(([, n]) => n);
  const names = [...(p.schedules || []).map((s) => `schedule ${s}`), ...(p.topics || []).map((t) => `topic ${t}`)];
  const blocking = counts.map(([k, n]) => `<li data-blocking="${esc(k)}">${n} ${esc(k)}</li>`)
    .concat(names.map((n) => `<li>${esc(n)}</li>`)).join("");
  const offer = e.code === "queue_not_empty" && counts.length && !names.length
    ? `<button type="button" class="danger" data-act="delete-queue-purge">Delete the queue with its jobs</button>`
    : names.length ? `<p class="muted">Delete or change what names it first.</p>` : "";
  return `<div class="notice"><p class="error" data-problem="${esc(e.code || "")}">${esc(e.message)}</p>
    ${blocking ? `<ul>${blocking}</ul>` : ""}${offer}</div>`;
}

// /v1/throughput reads the jobs finished in the window: asked for less often than the counts.
async function throughput() {
  if (state.throughput && Date.now() - state.throughputAt < THROUGHPUT_EVERY_MS) return state.throughput;
  // The queue rows and the overview ask at once: one read serves both.
  if (!state.throughputRead) state.throughputRead = readThroughput().finally(() => { state.throughputRead = null; });
  return state.throughputRead;
}
async function readThroughput() {
  try {
    state.throughput = await api("GET", "/v1/throughput" + query({ minutes: HISTORY_MINUTES }));
  } catch (e) {
    if (e.status !== 403) throw e;
    state.throughput = null; // an admin of some queues only: the chart is not theirs to read
  }
  state.throughputAt = Date.now();
  return state.throughput;
}

// ---- the overview: totals across queues and the jobs finished per minute ----------------
// Totals are the sum of every queue's counts (GET /v1/queues, followed page by page up to
// OVERVIEW_PAGES pages: with more queues than one page, read every THROUGHPUT_EVERY_MS);
// the graph sums /v1/throughput over the queues.
const OVERVIEW_PAGES = 5;
async function overview() {
  let totals, partial = false;
  try {
    if (!state.totals || state.totalsPages === 1 || Date.now() - state.totalsAt >= THROUGHPUT_EVERY_MS) {
      const sum = {};
      let cursor = null, pages = 0;
      do {
        const page = await api("GET", "/v1/queues" + query({ limit: 1000, cursor }));
        for (const q of page.queues) for (const [k, n] of Object.entries(q.counts)) sum[k] = (sum[k] || 0) + n;
        cursor = page.next_cursor;
        pages++;
      } while (cursor && pages < OVERVIEW_PAGES);
      Object.assign(state, { totals: sum, totalsPartial: cursor !== null, totalsPages: pages, totalsAt: Date.now() });
    }
    totals = state.totals;
    partial = state.totalsPartial;
  } catch (e) {
    if (e.status !== 403) throw e;
    return;
  }
  const tp = await throughput();
  const el = $("#overview");
  if (!el) return;
  el.innerHTML = statsBar(totals, partial, tp) + (tp ? historyGraph(tp) : "");
}

function statsBar(totals, partial, tp) {
  const stat = (key, label, n, help) => `<div class="stat" title="${esc(help)}"><span class="n" data-total="${key}">${n}</span>
    <span class="label">${esc(label)}</span></div>`;
  let html = COUNT_COLUMNS.map(([key, label, help]) => stat(key, label, totals[key] || 0, help)).join("");
  if (tp) {
    const sum = (k) => tp.queues.reduce((a, q) => a + q[k].reduce((x, y) => x + y, 0), 0);
    html += stat("processed", `Processed, ${tp.minutes} min`, sum("completed"), "jobs completed in the window")
      + stat("failed-for-good", `Dead, ${tp.minutes} min`, sum("dead"), "jobs that died in the window");
  }
  const note = partial ? `<p class="muted">Totals of the first ${OVERVIEW_PAGES * 1000} queues.</p>` : "";
  return `<div class="stats" id="stats">${html}</div>${note}`;
}

// The jobs processed (completed) and failed for good (dead) per minute, across queues.
function historyGraph(tp) {
  const n = tp.minutes;
  const completed = Array(n).fill(0), dead = Array(n).fill(0);
  for (const q of tp.queues) for (let i = 0; i < n; i++) { completed[i] += q.completed[i]; dead[i] += q.dead[i]; }
  const peak = Math.max(0, ...completed.map((c, i) => c + dead[i])), max = Math.max(1, peak);
  const w = 600, h = 90, bw = w / n;
  let bars = "";
  for (let i = 0; i < n; i++) {
    const ch = (completed[i] / max) * h, dh = (dead[i] / max) * h;
    const x = (i * bw + 0.5).toFixed(1), wd = Math.max(bw - 1.5, 1).toFixed(1);
    const tip = `${n - 1 - i ? n - 1 - i + " min ago" : "this minute"}: ${completed[i]} completed, ${dead[i]} dead`;
    if (ch) bars += `<rect class="c" x="${x}" y="${(h - ch).toFixed(1)}" width="${wd}" height="${ch.toFixed(1)}"><title>${tip}</title></rect>`;
    if (dh) bars += `<rect class="d" x="${x}" y="${(h - ch - dh).toFixed(1)}" width="${wd}" height="${dh.toFixed(1)}"><title>${tip}</title></rect>`;
  }
  const label = `Jobs finished per minute, last ${n} minutes: peak ${peak}/min`;
  return `<figure class="history" id="history"><figcaption>${esc(label)}
      (<span class="swatch c"></span> processed, <span class="swatch d"></span> failed for good)</figcaption>
    <svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img" aria-label="${esc(label)}">
      <rect x="0" y="${h - 1}" width="${w}" height="1" fill="#dde2e7"/>${bars}</svg>
    <div class="axis muted"><span>${n} min ago</span><span>now</span></div></figure>`;
}

// A queue's last CHART_MINUTES minutes, labelled with its busiest minute: the minute under
// way has barely begun, so its own count ("0/min" beside visible bars) says little.
function spark(full) {
  const t = { completed: full.completed.slice(-CHART_MINUTES), dead: full.dead.slice(-CHART_MINUTES) };
  const w = 150, h = 28, n = t.completed.length, bw = w / n;
  const totals = t.completed.map((c, i) => c + t.dead[i]);
  const peak = Math.max(0, ...totals), max = Math.max(1, peak);
  let bars = "";
  for (let i = 0; i < n; i++) {
    const ch = (t.completed[i] / max) * h, dh = (t.dead[i] / max) * h;
    const x = (i * bw + 0.5).toFixed(1), wd = Math.max(bw - 1, 1).toFixed(1);
    if (ch) bars += `<rect class="c" x="${x}" y="${(h - ch).toFixed(1)}" width="${wd}" height="${ch.toFixed(1)}"/>`;
    if (dh) bars += `<rect class="d" x="${x}" y="${(h - ch - dh).toFixed(1)}" width="${wd}" height="${dh.toFixed(1)}"/>`;
  }
  const last = totals[n - 1], sum = totals.reduce((a, b) => a + b, 0);
  const title = `${sum} finished in ${n} min; peak ${peak}/min; ${last} so far this minute`;
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img"
    aria-label="${esc(title)}"><title>${esc(title)}</title>
    <rect x="0" y="${h - 1}" width="${w}" height="1" fill="#dde2e7"/>${bars}</svg>
    <span class="muted" data-col="per-min" title="${esc(title)}">${sum ? `peak ${peak}/min` : "none"}</span>`;
}

function jobRows(jobs, withActions) {
  if (!jobs.length) return `<p class="muted">No jobs match.</p>`;
  const rows = jobs.map((j) => `<tr data-job="${esc(j.id)}">${selectCell(j)}
    <td><a href="#/job/${encodeURIComponent(j.id)}">${esc(j.id)}</a></td>
    <td>${esc(j.queue)}</td><td class="wrap">${esc(j.type)}</td><td>${badge(j.status)}</td>
    <td class="num">${j.attempt}/${j.max_attempts}</td>
    <td class="hide-narrow" data-col="${whenColumn(withActions)[0]}">${time(whenColumn(withActions)[1](j))}</td>
    <td class="wrap hide-narrow">${esc((j.last_error || "").slice(0, 120))}</td>
    ${withActions ? `<td><button type="button" data-act="replay-one" data-id="${esc(j.id)}">Replay</button>
      <button type="button" class="danger" data-act="purge-one" data-id="${esc(j.id)}">Purge</button></td>` : ""}
    </tr>`).join("");
  return `<div class="table-wrap"><table><thead><tr>${selectHead(jobs)}<th>Id</th><th>Queue</th><th>Type</th>
    <th>Status</th><th class="num">Attempt</th><th class="hide-narrow">${whenColumn(withActions)[2]}</th>
    <th class="hide-narrow">Last error</th>${withActions ? "<th></th>" : ""}</tr></thead>
    <tbody>${rows}</tbody></table></div>`;
}

// The dead-letter list (the one with actions) says when each job died (its completed_at),
// the job browser when each was created.
function whenColumn(dead) {
  return dead ? ["died", (j) => j.completed_at, "Died"] : ["created", (j) => j.created_at, "Created"];
}

function pager(nextCursor) {
  const page = state.cursors.length + 1;
  return `<div class="pager"><button type="button" data-act="first" ${page === 1 ? "disabled" : ""}>First</button>
    <button type="button" data-act="prev" ${page === 1 ? "disabled" : ""}>Previous</button>
    <span class="muted">page ${page}</span>
    <button type="button" data-act="next" data-cursor="${esc(nextCursor || "")}" ${nextCursor ? "" : "disabled"}>Next</button></div>`;
}

// The queue filter: a list of every queue while they fit in one page of the API (1000);
// past that, a text box that suggests the first page's names (any queue can be typed).
const QUEUE_CHOICES = 1000;
async function queueFilter(selected) {
  let names = [], more = false;
  try {
    const page = await api("GET", "/v1/queues" + query({ limit: QUEUE_CHOICES }));
    names = page.queues.map((q) => q.name);
    more = page.next_cursor !== null;
  } catch (e) { /* free text then */ }
  if (more || !names.length) {
    return `<input name="queue" list="queue-names" value="${esc(selected || "")}" placeholder="any">
      <datalist id="queue-names">${names.map((n) => `<option value="${esc(n)}">`).join("")}</datalist>`;
  }
  if (selected && !names.includes(selected)) names.push(selected);
  return `<select name="queue"><option value="">any</option>` + names.map((n) =>
    `<option ${n === selected ? "selected" : ""}>${esc(n)}</option>`).join("") + `</select>`;
}

function currentCursor() { return state.cursors.length ? state.cursors[state.cursors.length - 1] : null; }

const paging = {
  first() { state.cursors = []; },
  prev() { state.cursors.pop(); },
  next(button) { state.cursors.push(button.dataset.cursor); },
};

views.jobs = {
  async frame(r) {
    const p = r.params;
    return `<h1>Jobs</h1><form class="filters" id="filters">
      <label>Queue${await queueFilter(p.queue)}</label>
      <label>Status<select name="status"><option value="">any</option>${STATUSES.map((s) =>
        `<option ${s === p.status ? "selected" : ""}>${s}</option>`).join("")}</select></label>
      <label>Type<input name="type" value="${esc(p.type || "")}" placeholder="any"></label>
      ${searchBox(p)}
      <button type="submit">Filter</button></form>${bulkBar(["retry", "cancel", "delete"])}<div id="body"></div>`;
  },
  async body(r) {
    const p = r.params;
    const page = await api("GET", "/v1/jobs" + query({ queue: p.queue, status: p.status, type: p.type,
      search: p.search, limit: PAGE_SIZE, cursor: currentCursor() }));
    return searchNote(p, page) + jobRows(page.jobs, false) + pager(page.next_cursor);
  },
  async act(button) {
    if (!(await bulkAct(button))) paging[button.dataset.act](button);
  },
  filter(form) {
    const f = new FormData(form);
    location.hash = "#/jobs" + query({ queue: f.get("queue").trim(), status: f.get("status"), type: f.get("type").trim(),
      search: f.get("search") });
  },
};

views.dead = {
  async frame(r) {
    const p = r.params;
    return `<h1>Dead letters</h1><form class="filters" id="filters">
      <label>Queue${await queueFilter(p.queue)}</label>
      <label>Type<input name="type" value="${esc(p.type || "")}" placeholder="any"></label>
      <button type="submit">Filter</button></form>
      <div class="actions"><button type="button" data-act="replay-all">Replay all matching</button>
      <button type="button" class="danger" data-act="purge-all">Purge all matching</button></div>
      ${bulkBar(["retry", "delete"])}<div id="body"></div>`;
  },
  async body(r) {
    const p = r.params;
    const page = await api("GET", "/v1/jobs" + query({ status: "dead", queue: p.queue, type: p.type,
      limit: PAGE_SIZE, cursor: currentCursor() }));
    return jobRows(page.jobs, true) + pager(page.next_cursor);
  },
  async act(button, r) {
    const p = r.params;
    const what = [p.queue ? `queue ${p.queue}` : "every queue", p.type ? `type ${p.type}` : "any type"].join(", ");
    switch (button.dataset.act) {
      case "replay-one":
        await api("POST", `/v1/jobs/${encodeURIComponent(button.dataset.id)}/retry`);
        setStatus(`job ${button.dataset.id} replayed`);
        return;
      case "purge-one":
        if (!confirm(`Delete dead job ${button.dataset.id} for good?`)) return;
        await api("DELETE", `/v1/dead/${encodeURIComponent(button.dataset.id)}`);
        setStatus(`job ${button.dataset.id} purged`);
        return;
      case "replay-all": {
        if (!confirm(`Replay every dead job of ${what}?`)) return;
        const body = {};
        if (p.queue) body.queue = p.queue;
        if (p.type) body.type = p.type;
        const out = await api("POST", "/v1/dead/replay", body);
        setStatus(`${out.replayed} replayed`);
        return;
      }
      case "purge-all": {
        if (!confirm(`Delete every dead job of ${what} for good?`)) return;
        const out = await api("DELETE", "/v1/dead" + query({ queue: p.queue, type: p.type }));
        setStatus(`${out.purged} purged`);
        return;
      }
      default:
        if (!(await bulkAct(button))) paging[button.dataset.act](button);
    }
  },
  filter(form) {
    const f = new FormData(form);
    location.hash = "#/dead" + query({ queue: f.get("queue").trim(), type: f.get("type").trim() });
  },
};

views.job = {
  frame: (r) => `<h1>Job ${esc(r.arg)}</h1><div id="body"></div>`,
  async body(r) {
    let j;
    try {
      j = await api("GET", "/v1/jobs/" + encodeURIComponent(r.arg));
    } catch (e) {
      if (e.status === 404) return `<p class="error">No job ${esc(r.arg)}.</p>`;
      throw e;
    }
    const actions = [];
    if (["pending", "running", "failed"].includes(j.status))
      actions.push(`<button type="button" class="danger" data-act="cancel">Cancel</button>`);
    if (["dead", "cancelled", "failed"].includes(j.status))
      actions.push(`<button type="button" data-act="retry">${j.status === "dead" ? "Replay" : "Retry now"}</button>`);
    if (j.status === "dead") actions.push(`<button type="button" class="danger" data-act="purge">Purge</button>`);
    return `<div class="actions">${actions.join("")}</div>
      <dl class="fields">
        <dt>Status</dt><dd data-field="status">${badge(j.status)}</dd>
        <dt>Queue</dt><dd><a href="#/jobs?queue=${encodeURIComponent(j.queue)}">${esc(j.queue)}</a></dd>
        <dt>Type</dt><dd>${esc(j.type)}</dd>
        <dt>Attempts</dt><dd data-field="attempts">${j.attempt} of ${j.max_attempts}</dd>
        <dt>Priority</dt><dd>${j.priority}</dd>
        <dt>Idempotency key</dt><dd>${esc(j.idempotency_key || "–")}</dd>
        <dt>Created</dt><dd data-field="created">${time(j.created_at)}</dd>
        <dt>Visible at</dt><dd>${time(j.visible_at)}</dd>
        <dt>Worker</dt><dd>${esc(j.worker_id || "–")}</dd>
        <dt>Lease until</dt><dd>${time(j.locked_until) || "–"}</dd>
        <dt>Finished</dt><dd>${time(j.completed_at) || "–"}</dd>
      </dl>
      <h2>Payload</h2>${json(j.payload)}
      <h2>Result</h2>${j.result == null ? '<p class="muted">None.</p>' : json(j.result)}
      <h2>History</h2>${jobHistory(j)}`;
  },
  async act(button, r) {
    const id = encodeURIComponent(r.arg);
    const act = button.dataset.act;
    if (act === "cancel") {
      if (!confirm(`Cancel job ${r.arg}?`)) return;
      await api("POST", `/v1/jobs/${id}/cancel`);
    } else if (act === "retry") {
      await api("POST", `/v1/jobs/${id}/retry`);
    } else if (act === "purge") {
      if (!confirm(`Delete dead job ${r.arg} for good?`)) return;
      await api("DELETE", `/v1/dead/${id}`);
      location.hash = "#/dead";
      return;
    }
    setStatus(`job ${r.arg}: ${act} done`);
  },
};

// A job's attempts that did not complete: its errors and its released claims (handed back
// without spending the attempt), oldest first.
function jobHistory(j) {
  const entries = [
    ...j.errors.map((e) => ({ attempt: e.attempt, at: e.at, kind: e.kind || "error", text: e.error })),
    ...(j.releases || []).map((r) => ({ attempt: r.attempt, at: r.at, kind: "released",
      text: `handed back${r.worker_id ? ` by ${r.worker_id}` : ""}, not counted as an attempt`
        + (r.delay_ms ? `; visible again after ${duration(r.delay_ms)}` : "") })),
  ].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  if (!entries.length) return `<p class="muted">No errors, no releases.</p>`;
  return `<div class="table-wrap"><table id="errors"><thead><tr><th class="num">Attempt</th>
    <th>At</th><th>Kind</th><th>Error or note</th></tr></thead><tbody>${entries.map((e) => `<tr data-kind="${esc(e.kind)}">
    <td class="num">${esc(e.attempt)}</td><td>${time(e.at)}</td><td>${e.kind === "released" ? badge("released") : esc(e.kind)}</td>
    <td class="wrap">${esc(e.text)}</td></tr>`).join("")}</tbody></table></div>`;
}

views.schedules = {
  frame: () => `<h1>Schedules</h1><div id="body"></div>`,
  async body() {
    const { schedules } = await api("GET", "/v1/schedules");
    if (!schedules.length) return `<p class="muted">No schedules (<code>PUT /v1/schedules/{name}</code> makes one).</p>`;
    return `<div class="table-wrap"><table><thead><tr><th>Name</th><th>Cron</th><th>Job</th>
      <th>Next fire</th><th class="hide-narrow">Last fired</th><th>Enabled</th><th></th></tr></thead><tbody>${schedules.map((s) => `
      <tr data-schedule="${esc(s.name)}"><td>${esc(s.name)}</td>
      <td><code>${esc(s.cron)}</code> <span class="muted">${esc(s.timezone)}</span></td>
      <td class="wrap">${esc(s.job.type)} → ${esc(s.job.queue)}</td>
      <td data-col="next">${s.next_fire_at ? time(s.next_fire_at) : "–"}
        ${s.pending_fire_at ? `<span class="badge failed" title="the queue is full">held</span>` : ""}</td>
      <td class="hide-narrow">${s.last_fired_at ? `${time(s.last_fired_at)}${s.last_job_id ? ` <a href="#/job/${encodeURIComponent(s.last_job_id)}">job</a>` : ""}` : "–"}</td>
      <td>${s.enabled ? "yes" : badge("paused")}</td>
      <td><button type="button" data-act="${s.enabled ? "disable" : "enable"}" data-name="${esc(s.name)}">${s.enabled ? "Disable" : "Enable"}</button></td>
      </tr>`).join("")}</tbody></table></div>`;
  },
  async act(button) {
    await api("PATCH", "/v1/schedules/" + encodeURIComponent(button.dataset.name), { enabled: button.dataset.act === "enable" });
  },
};

views.workers = {
  frame: () => `<h1>Workers</h1><div id="body"></div>
    <p class="muted">Worker processes that report themselves (<code>POST /v1/workers/{id}/beat</code>,
    every 10 s or so: idle ones too), and workers that hold running jobs or finished one, in the
    last 5 minutes (<code>GET /v1/workers</code>). Host, pid, concurrency, in flight and state are
    what a worker says of itself: blank for one known only from its jobs. In flight counts what it
    holds, prefetched jobs included; Running, the leases it holds now.</p>`,
  async body() {
    const { workers } = await api("GET", "/v1/workers" + query({ window_s: 300 }));
    if (!workers.length) return `<p class="muted">No worker seen in the last 5 minutes.</p>`;
    return `<div class="table-wrap"><table><thead><tr><th>Worker</th><th>Host</th>
      <th class="num hide-narrow">PID</th><th class="num">Concurrency</th><th class="num">In flight</th>
      <th class="num">Running</th><th class="hide-narrow">Queues</th><th>State</th><th>Last seen</th>
      </tr></thead><tbody>${workers.map(workerRow).join("")}</tbody></table></div>`;
  },
};

// A worker that beats every ~10 s and has not for WORKER_SILENT_MS is probably gone without
// saying so (killed): its state is what it last said, so the page says it is silent.
const WORKER_SILENT_MS = 30000;
function workerRow(w) {
  const silent = w.state && w.state !== "stopped" && Date.now() - Date.parse(w.last_seen_at) > WORKER_SILENT_MS;
  const dash = (v) => (v == null ? "–" : esc(v));
  return `<tr data-worker="${esc(w.worker_id)}"><td class="wrap">${esc(w.worker_id)}</td>
    <td class="wrap" data-col="host">${dash(w.host)}</td>
    <td class="num hide-narrow" data-col="pid">${dash(w.pid)}</td>
    <td class="num" data-col="concurrency">${dash(w.concurrency)}</td>
    <td class="num" data-col="in-flight">${dash(w.in_flight)}</td>
    <td class="num" data-col="running">${w.running}</td>
    <td class="wrap hide-narrow" data-col="queues">${w.queues.map(esc).join(", ")}</td>
    <td data-col="state">${w.state ? badge(w.state) : "–"}${silent ? " " + badge("silent") : ""}</td>
    <td data-col="last-seen"><span title="${esc(w.last_seen_at)}">${ago(w.last_seen_at)}</span></td></tr>`;
}

// ---- search and bulk actions on job lists ------------------------------------------------
// The search box of the jobs page: GET /v1/jobs?search= scans a bounded number of jobs per
// page, so a page may be short, or empty, with a Next that searches on.
const SEARCH_SCAN = 5000;
function searchBox(p) {
  return `<label>Search<input name="search" type="search" maxlength="200" value="${esc(p.search || "")}"
    placeholder="payload or error text"></label>`;
}
function searchNote(p, page) {
  if (!p.search) return "";
  const more = page.next_cursor ? " Next searches older jobs." : "";
  const none = !page.jobs.length && page.next_cursor
    ? `No match among the ${SEARCH_SCAN.toLocaleString("en")} jobs examined.` : "";
  return `<p class="muted" id="search-note">${none} Payloads and errors containing
    <code>${esc(p.search)}</code>, ignoring case; each page examines up to
    ${SEARCH_SCAN.toLocaleString("en")} jobs.${more}</p>`;
}

// Checkboxes on the rows of a job list; the selection outlives the refresh (rows are redrawn
// every POLL_MS) and is kept across pages, until the next navigation.
function selectCell(j) {
  return `<td class="pick"><input type="checkbox" data-select="${esc(j.id)}" aria-label="select job ${esc(j.id)}"
    ${state.selected.has(String(j.id)) ? "checked" : ""}></td>`;
}
function selectHead(jobs) {
  const all = jobs.length > 0 && jobs.every((j) => state.selected.has(String(j.id)));
  return `<th class="pick"><input type="checkbox" data-select-all aria-label="select every job on this page"
    ${all ? "checked" : ""}></th>`;
}

const BULK = {
  retry: { label: "Retry", done: "retried", call: (id) => api("POST", `/v1/jobs/${id}/retry`) },
  cancel: { label: "Cancel", done: "cancelled", confirm: true, call: (id) => api("POST", `/v1/jobs/${id}/cancel`) },
  delete: { label: "Delete", done: "deleted", confirm: true, call: (id) => api("DELETE", `/v1/jobs/${id}`) },
};
function bulkBar(kinds) {
  return `<div class="actions bulk" id="bulk"><span class="muted" id="bulk-count">${bulkCount()}</span>
    ${kinds.map((k) => `<button type="button" ${k === "retry" ? "" : 'class="danger"'} data-act="bulk-${k}">
      ${BULK[k].label} selected</button>`).join("")}
    <button type="button" data-act="bulk-clear">Clear selection</button></div><div id="bulk-report"></div>`;
}
function bulkCount() { return `${state.selected.size} selected`; }
// The count, and the boxes on screen as the selection is: a bulk action drops the jobs it
// did from the selection, and their boxes must not stay ticked until the next refresh (a
// click on a box still ticked would then untick it rather than select the job again).
function showBulkCount() {
  const count = $("#bulk-count");
  if (count) count.textContent = bulkCount();
  const boxes = [...document.querySelectorAll("#body input[data-select]")];
  boxes.forEach((b) => { b.checked = state.selected.has(b.dataset.select); });
  const all = $("#body input[data-select-all]");
  if (all) all.checked = boxes.length > 0 && boxes.every((b) => b.checked);
}

function onSelect(ev) {
  const box = ev.target;
  if (!(box instanceof HTMLInputElement) || !$("#body") || !$("#body").contains(box)) return;
  if (box.hasAttribute("data-select-all")) {
    document.querySelectorAll("#body input[data-select]").forEach((b) => {
      b.checked = box.checked;
      if (box.checked) state.selected.add(b.dataset.select); else state.selected.delete(b.dataset.select);
    });
  } else if (box.dataset.select) {
    if (box.checked) state.selected.add(box.dataset.select); else state.selected.delete(box.dataset.select);
  } else {
    return;
  }
  showBulkCount();
}

// One call per job (POST /v1/jobs/{id}/retry|cancel, DELETE /v1/jobs/{id}), a few at a time;
// each job's refusal is listed (a running job cannot be deleted, a finished one cancelled),
// and the jobs that failed stay selected.
const BULK_PARALLEL = 4;
async function bulkAct(button) {
  const act = button.dataset.act || "";
  if (!act.startsWith("bulk-")) return false;
  const report = $("#bulk-report");
  if (act === "bulk-clear") {
    state.selected.clear();
    showBulkCount();
    if (report) report.innerHTML = "";
    return true;
  }
  const kind = BULK[act.slice(5)];
  const ids = [...state.selected];
  if (!ids.length) { setStatus("no job selected", true); return true; }
  if (kind.confirm && !confirm(`${kind.label} ${ids.length} job${ids.length === 1 ? "" : "s"}?`)) return true;
  const failures = [];
  let next = 0, ok = 0;
  async function lane() {
    while (next < ids.length) {
      const id = ids[next++];
      try {
        await kind.call(encodeURIComponent(id));
        ok++;
        state.selected.delete(id);
      } catch (e) {
        if (e.status === 401) throw e;
        failures.push({ id, message: e.message });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(BULK_PARALLEL, ids.length) }, lane));
  showBulkCount();
  const summary = `${ok} ${kind.done}` + (failures.length ? `, ${failures.length} failed` : "");
  setStatus(summary, failures.length > 0);
  if (report) {
    report.innerHTML = `<p class="${failures.length ? "error" : "muted"}">${esc(summary)}</p>` + (failures.length
      ? `<ul class="bulk-failures">${failures.map((f) => `<li data-job="${esc(f.id)}">job
        <a href="#/job/${encodeURIComponent(f.id)}">${esc(f.id)}</a>: ${esc(f.message)}</li>`).join("")}</ul>` : "");
  }
  return true;
}

// ---- driving ----------------------------------------------------------------------------
let current = null; // the route the frame was drawn for
const PARENT_VIEW = { job: "jobs", queue: "queues" }; // the nav entry a detail page lights

function stopPolling() {
  clearTimeout(state.timer);
  state.timer = null;
}

// A queues table wider than its frame turns into cards (style.css, table.queues.cards), so
// that Pause and the chart are never behind a sideways scroll: a fixed breakpoint cannot
// know how wide the names and the rate limits make the table. Measured as a table each time.
function fitQueues() {
  for (const table of document.querySelectorAll("table.queues")) {
    table.classList.remove("cards");
    if (table.scrollWidth > table.parentElement.clientWidth + 1) table.classList.add("cards");
  }
}

async function refresh() {
  stopPolling();
  const gen = ++state.gen; // a newer refresh (an action's, a navigation's) supersedes this one
  const r = current;
  const view = views[r.view];
  const body = $("#body");
  if (!view || !body) return;
  try {
    const html = await view.body(r);
    if (r !== current || gen !== state.gen) return; // navigated away or refreshed meanwhile
    body.innerHTML = html;
    fitQueues();
    setStatus("updated " + new Date().toLocaleTimeString());
  } catch (e) {
    if (r !== current || e.status === 401) return;
    setStatus(e.status === 403 ? "not allowed: " + e.message : "error: " + e.message, true);
    if (e.status === 403) body.innerHTML = `<p class="error">This token may not read this page: ${esc(e.message)}</p>`;
  }
  if (r === current && gen === state.gen && !$("#view").hidden) state.timer = setTimeout(refresh, POLL_MS);
}

async function navigate() {
  stopPolling();
  const r = route();
  if (!views[r.view]) { location.hash = "#/queues"; return; }
  current = r;
  state.cursors = [];
  state.selected.clear();
  document.querySelectorAll("nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.view === (PARENT_VIEW[r.view] || r.view)));
  showApp();
  // The page being left stays on screen while the new one loads (a filter over 1,000 queues
  // reads them all first): say so, rather than show its rows under the new address.
  const stale = $("#body");
  if (stale) stale.innerHTML = `<p class="muted">loading…</p>`;
  const html = await views[r.view].frame(r);
  if (r !== current) return;
  $("#view").innerHTML = html;
  await refresh();
}

async function onClick(ev) {
  const button = ev.target.closest("button[data-act]");
  if (!button || !current || !$("#view").contains(button)) return;
  const view = views[current.view];
  if (!view.act || state.busy) return;
  state.busy = true;
  button.disabled = true;
  try {
    await view.act(button, current);
  } catch (e) {
    if (e.status !== 401) setStatus(`${button.textContent.trim()} failed: ${e.message}`, true);
  } finally {
    state.busy = false;
    button.disabled = false;
  }
  state.throughputAt = 0;
  state.totalsAt = 0;
  await refresh();
}

async function start() {
  if (!(await checkAccess())) return;
  if (current) await refresh(); else await navigate();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = $("#token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("#token").value = "";
    current = null;
    await start();
  });
  $("#logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    current = null;
    showLogin("Token forgotten.");
  });
  document.addEventListener("click", onClick);
  document.addEventListener("change", onSelect);
  document.addEventListener("submit", (ev) => {
    if (ev.target.id !== "filters") return;
    ev.preventDefault();
    views[current.view].filter(ev.target);
  });
  window.addEventListener("hashchange", () => { if ($("#login").hidden) navigate(); });
  window.addEventListener("resize", fitQueues);
  start();
});
