// Sundial's dashboard: a small client of the public API. The API key is asked once and kept in
// sessionStorage (gone when the browser session ends); every call sends it as a Bearer token.
"use strict";

const KEY = "sundial-api-key";
const IN_FLIGHT = ["QUEUED", "RUNNING", "RETRYING"];
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
let refreshTimer = null;

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const when = (t) => (t ? new Date(t).toLocaleString() : "—");
/** The work an attempt started (an execution's or a task's ARN), linked to its page in the AWS console. */
const workLink = (arn) => {
  const [, partition, service, region, , resource = ""] = arn.split(":");
  const host = partition === "aws" ? `https://${region}.console.aws.amazon.com` : null;
  let url = null;
  if (host && service === "states") url = `${host}/states/home?region=${region}#/v2/executions/details/${encodeURIComponent(arn)}`;
  const task = resource.match(/^task\/([^/]+)\/([^/]+)$/);
  if (host && service === "ecs" && task) url = `${host}/ecs/v2/clusters/${encodeURIComponent(task[1])}/tasks/${encodeURIComponent(task[2])}`;
  const label = `<code>${esc(arn)}</code>`;
  return url ? `<a href="${esc(url)}" target="_blank" rel="noopener">${label}</a>` : label;
};
const ms = (a, b) => (a && b ? new Date(b) - new Date(a) : null);
const duration = (m) => (m == null ? "—" : m < 1000 ? `${m} ms` : m < 60000 ? `${(m / 1000).toFixed(1)} s` : `${Math.floor(m / 60000)} min ${Math.round((m % 60000) / 1000)} s`);
const badge = (s) => `<span class="state ${esc(s)}">${esc(s)}</span>`;

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY)}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) { sessionStorage.removeItem(KEY); route(); throw new Error("the API key was refused"); }
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw Object.assign(new Error(data?.error?.message || `${response.status}`), { status: response.status, field: data?.error?.field });
  return data;
}

// An error as the page says it: the API's message, after the field it blames when it names one.
const failure = (err) => (err.field ? `${err.field}: ${err.message}` : err.message);

function login(message) {
  document.getElementById("signout").hidden = true;
  main.innerHTML = `<form class="login card" id="login"><h1>Sign in</h1>
    <label>API key <input type="password" id="key" autocomplete="off" required></label>
    <button type="submit">Open the dashboard</button><p class="error">${esc(message || "")}</p>
    <p class="muted">The key stays in this browser tab's session only.</p></form>`;
  document.getElementById("login").onsubmit = async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("key").value.trim());
    try { await api("GET", "/v1/jobs?limit=1"); route(); } catch (err) { login(err.message); }
  };
}

function schedule(refresh, inFlight) {
  clearTimeout(refreshTimer);
  if (inFlight) refreshTimer = setTimeout(refresh, 2000);
  statusLine.textContent = `updated ${new Date().toLocaleTimeString()}${inFlight ? " · runs in flight, refreshing" : ""}`;
}

// Every job the API's filters select (all pages): `q` (name or description), `state`, `tag`.
async function allJobs(filter = "") {
  let jobs = [], next = null;
  do {
    const page = await api("GET", `/v1/jobs?limit=100${filter}${next ? `&next=${encodeURIComponent(next)}` : ""}`);
    jobs = jobs.concat(page.jobs); next = page.next;
  } while (next);
  return jobs;
}

// The jobs page's filters as the listing's query: the API filters, page after page.
function jobsFilter() {
  const q = document.getElementById("search")?.value.trim() || "";
  const state = document.getElementById("filter")?.value || "all";
  const tag = document.getElementById("tag")?.value.trim() || "";
  return `${q ? `&q=${encodeURIComponent(q)}` : ""}${state !== "all" ? `&state=${state}` : ""}${tag ? `&tag=${encodeURIComponent(tag)}` : ""}`;
}

const tagsOf = (job) => Object.entries(job.tags || {}).map(([k, v]) => `<span class="label">${esc(k)}: ${esc(v)}</span>`).join(" ");

async function jobsPage() {
  if (!document.getElementById("jobs")) {
    main.innerHTML = `<h1>Jobs</h1><div class="toolbar"><input id="search" placeholder="Search name or description" aria-label="Search">
      <input id="tag" placeholder="tag key:value" aria-label="Tag">
      <select id="filter" aria-label="Filter"><option value="all">All</option><option value="active">Active</option>
      <option value="paused">Paused</option><option value="failing">Failing</option></select><span id="filter-error" class="error"></span></div>
      <table><thead><tr><th>Name</th><th>Schedule</th><th class="hide-narrow">Next run</th><th>Last run</th><th class="hide-narrow">Success</th></tr></thead>
      <tbody id="jobs"></tbody></table>
      <h2>Load forecast, next 24 hours</h2><div class="forecast card" id="forecast"><p class="muted">Counting…</p></div>`;
    let typing = null;
    const again = () => { clearTimeout(typing); typing = setTimeout(() => jobsPage().catch(() => {}), 300); };
    document.getElementById("search").oninput = again;
    document.getElementById("tag").oninput = again;
    document.getElementById("filter").onchange = again;
    forecastPanel();
  }
  const filter = jobsFilter();
  let jobs;
  try {
    jobs = await allJobs(filter);
    document.getElementById("filter-error").textContent = "";
  } catch (err) {
    if (!err.field) throw err;
    document.getElementById("filter-error").textContent = failure(err);
    return;
  }
  if (filter !== jobsFilter()) return; // the filters changed while reading: the next read shows them
  const recent = await Promise.all(jobs.map((j) => api("GET", `/v1/jobs/${j.id}/runs?limit=20`).then((r) => r.runs).catch(() => [])));
  const rows = jobs.map((job, i) => {
    const ended = recent[i].filter((r) => !IN_FLIGHT.includes(r.state) && r.state !== "SKIPPED" && r.state !== "CANCELLED");
    const ok = ended.filter((r) => r.state === "SUCCEEDED").length;
    return { job, rate: ended.length ? Math.round((100 * ok) / ended.length) : null, inFlight: recent[i].some((r) => IN_FLIGHT.includes(r.state)) };
  });
  document.getElementById("jobs").innerHTML = rows.map(({ job, rate }) => `<tr data-job="${esc(job.id)}">
      <td><a href="#/jobs/${esc(job.id)}">${esc(job.name)}</a>${job.paused ? ' <span class="paused">paused</span>' : ""} ${tagsOf(job)}</td>
      <td>${esc(job.schedule_description)}</td><td class="hide-narrow">${when(job.next_run_at)}</td>
      <td>${job.last_run ? `${badge(job.last_run.state)} <span class="muted">${when(job.last_run.updated_at)}</span>` : '<span class="muted">never ran</span>'}</td>
      <td class="hide-narrow">${rate == null ? "—" : `${rate}%`}</td></tr>`).join("")
    || `<tr><td colspan="5" class="muted">No jobs${filter ? " match" : " yet: create one with the API or the sundial CLI"}.</td></tr>`;
  schedule(jobsPage, rows.some((r) => r.inFlight));
}

// Runs due per minute as bars (inline SVG, one path for ordinary minutes and one for peaks, so a
// week of minutes stays light), with the hours marked and the peak minutes listed below.
function forecastSvg(f) {
  const n = f.counts.length, height = 120, top = Math.max(1, f.busiest), start = new Date(f.from);
  const bar = (c, i) => `M${i},${height} v${-Math.max(1, (c / top) * (height - 12))}`;
  let plain = "", peak = "";
  f.counts.forEach((c, i) => { if (c > 0) { if (c >= f.peak_threshold) peak += bar(c, i); else plain += bar(c, i); } });
  const step = n > 1441 ? 1440 : 180;
  let ticks = "";
  for (let i = 0; i < n; i += step) {
    const t = new Date(start.getTime() + i * 60000);
    const label = step === 1440 ? t.toLocaleDateString() : t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    ticks += `<line class="tick" x1="${i}" x2="${i}" y1="0" y2="${height}"/><text class="hour" x="${i + 4}" y="${height + 16}">${esc(label)}</text>`;
  }
  const average = height - (f.average / top) * (height - 12);
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${n} ${height + 22}" preserveAspectRatio="none" role="img"
    aria-label="Runs due per minute; ${f.peak_minutes} peak minutes">${ticks}<path class="bars" d="${plain}"/><path class="bars peak" d="${peak}"/>
    <line class="average" x1="0" x2="${n}" y1="${average}" y2="${average}"/></svg>`;
}

async function forecastPanel() {
  const panel = document.getElementById("forecast");
  let f;
  try { f = await api("GET", "/v1/forecast"); } catch (err) { panel.innerHTML = `<p class="error">${esc(err.message)}</p>`; return; }
  const peaks = f.peaks.slice(0, 5).map((p) => `<li><strong>${when(p.minute)}</strong>: ${p.runs} runs · ${p.jobs
    .map((j) => `<a href="#/jobs/${esc(j.job_id)}">${esc(j.name)}</a> (${j.runs})`).join(", ")}</li>`).join("");
  panel.innerHTML = `<p>${f.total} runs · busiest minute ${f.busiest} · ${f.average} a minute on average ·
    <span class="peak-key">${f.peak_minutes} peak minutes</span> (${f.peak_threshold} runs or more)${f.after_parents ? ` · ${f.after_parents} more after their parents` : ""}</p>
    <div class="chart">${forecastSvg(f)}</div>${peaks ? `<ul class="peaks">${peaks}</ul>` : '<p class="muted">No peaks: the load is even.</p>'}`;
}

// A run's key: the part of its id after the job's. Runs of one workflow instant share it, so a
// parent's or child's run for the same instant is `<its job id>.<key>`.
const runKey = (runId) => runId.slice(runId.indexOf(".") + 1);

// Cuts `text` into at most `max` lines of `width` characters, at a space when there is one in the
// line's second half, the last line ending in "…" when something was left out (SVG text does not
// wrap by itself).
function lines(text, width, max) {
  const out = [];
  let rest = String(text ?? "").trim();
  while (rest && out.length < max) {
    let cut = rest.length <= width ? rest.length : rest.lastIndexOf(" ", width);
    if (cut < width / 2 && rest.length > width) cut = width;
    out.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest) out[out.length - 1] = `${out[out.length - 1].slice(0, width - 1)}…`;
  return out;
}

// A workflow as inline SVG, parents left of their children: a job sits one column right of its
// furthest parent (longest-path layering); within a column, jobs are ordered by the mean height
// of their parents, which keeps most edges from crossing. An edge that skips columns runs in a
// lane of its own below the nodes, so that it never passes behind a job it does not touch. Each
// node links to its job's page and is coloured by its latest run's state.
const BOX = { w: 230, h: 92, gapX: 80, gapY: 26, pad: 14, lane: 14 };
function graphSvg(graph, current) {
  const parents = new Map(graph.nodes.map((n) => [n.id, []]));
  graph.edges.forEach((e) => parents.get(e.to)?.push(e.from));
  const depth = new Map();
  const depthOf = (id, path = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (path.has(id)) return 0; // the API refuses cycles; never recurse forever on one anyway
    path.add(id);
    const d = Math.max(-1, ...(parents.get(id) || []).filter((p) => parents.has(p)).map((p) => depthOf(p, path))) + 1;
    depth.set(id, d);
    return d;
  };
  const columns = [];
  graph.nodes.forEach((n) => (columns[depthOf(n.id)] ||= []).push(n));
  const tallest = Math.max(...columns.map((c) => c.length));
  const at = new Map();
  columns.forEach((column, x) => {
    const mean = (n) => { const ys = parents.get(n.id).filter((p) => at.has(p)).map((p) => at.get(p).y); return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : 0; };
    column.sort((a, b) => mean(a) - mean(b) || a.name.localeCompare(b.name));
    const top = BOX.pad + ((tallest - column.length) * (BOX.h + BOX.gapY)) / 2;
    column.forEach((n, y) => at.set(n.id, { x: BOX.pad + x * (BOX.w + BOX.gapX), y: top + y * (BOX.h + BOX.gapY) }));
  });
  const shown = graph.edges.filter((e) => at.has(e.from) && at.has(e.to));
  const long = shown.filter((e) => depth.get(e.to) - depth.get(e.from) > 1);
  const width = 2 * BOX.pad + columns.length * BOX.w + (columns.length - 1) * BOX.gapX;
  const bottom = BOX.pad + tallest * BOX.h + (tallest - 1) * BOX.gapY;
  const height = bottom + BOX.pad + long.length * BOX.lane;
  const edges = shown.map((e) => {
    const a = at.get(e.from), b = at.get(e.to), lane = long.indexOf(e);
    const x1 = a.x + BOX.w, y1 = a.y + BOX.h / 2, x2 = b.x - 7, y2 = b.y + BOX.h / 2, bend = BOX.gapX / 2;
    const y = bottom + (lane + 0.5) * BOX.lane;
    const d = lane < 0 ? `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`
      : `M${x1},${y1} C${x1 + bend},${y1} ${x1 + bend},${y} ${x1 + BOX.gapX},${y} L${b.x - BOX.gapX},${y} C${x2 - bend},${y} ${x2 - bend},${y2} ${x2},${y2}`;
    return `<path class="edge" data-from="${esc(e.from)}" data-to="${esc(e.to)}" marker-end="url(#arrow)" d="${d}"/>`;
  }).join("");
  const nodes = graph.nodes.map((n) => {
    const { x, y } = at.get(n.id), run = n.latest_run, state = run?.state || "NONE";
    const schedule = lines(n.schedule, 30, 2).map((l, i) => `<tspan x="${x + 14}" dy="${i ? 15 : 0}">${esc(l)}</tspan>`).join("");
    const pill = run ? Math.round(run.state.length * 7.2 + 14) : 0;
    return `<a href="#/jobs/${esc(n.id)}" class="node ${esc(state)}${n.id === current ? " current" : ""}" data-job="${esc(n.id)}">
      <title>${esc(n.name)}${n.paused ? " (paused)" : ""} · ${esc(n.schedule)} · ${run ? `${esc(run.state)} ${when(run.updated_at)}` : "never ran"}</title>
      ${n.id === current ? `<rect class="here" x="${x - 4}" y="${y - 4}" width="${BOX.w + 8}" height="${BOX.h + 8}" rx="11"/>` : ""}
      <rect class="box" x="${x}" y="${y}" width="${BOX.w}" height="${BOX.h}" rx="8"/>
      <text class="name" x="${x + 14}" y="${y + 22}">${esc(lines(n.name, n.paused ? 17 : 24, 1)[0])}${n.paused ? '<tspan class="paused"> paused</tspan>' : ""}</text>
      <text class="sched" x="${x + 14}" y="${y + 40}">${schedule}</text>
      ${run ? `<rect class="pill" x="${x + 14}" y="${y + BOX.h - 24}" width="${pill}" height="16" rx="8"/>
        <text class="pill" x="${x + 14 + pill / 2}" y="${y + BOX.h - 12}">${esc(run.state)}</text>
        <text class="sched" x="${x + 20 + pill}" y="${y + BOX.h - 12}">${esc(new Date(run.updated_at).toLocaleTimeString())}</text>`
        : `<text class="sched" x="${x + 14}" y="${y + BOX.h - 12}">never ran</text>`}</a>`;
  }).join("");
  // As wide as it needs, shrunk to the page down to 85%; past that, the card scrolls.
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" role="img"
    style="width:100%;max-width:${width}px;min-width:${Math.round(width * 0.85)}px;height:auto"
    aria-label="Workflow graph: ${graph.nodes.length} jobs, ${graph.edges.length} edges"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5"
    markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>${edges}${nodes}</svg>`;
}

// The job's instant ledger (GET /v1/jobs/{id}/instants) for the last 24 hours as a day strip: one
// cell per scheduled instant, oldest first, coloured by outcome, a cell with a run linking to it;
// every page of the day is read, at most LEDGER_PAGES. Below, the missed and skipped instants,
// newest first, consecutive ones with the same explanation in one row (a new minutely job's day
// before it began is one row, not 1440). The panel's last answer is kept, so that the job page's
// refresh while runs are in flight neither blanks it nor reads the day again every 2 s (only
// every 30 s); opening the page reads it afresh.
const OUTCOMES = ["ran", "skipped", "missed", "pending"];
const LEDGER_PAGES = 5;
const REASONS = { catchup_dropped: "dropped by the catch-up policy", paused: "the job was paused", before_start: "before the schedule began",
  after_end: "after the schedule ended", edited: "not on the schedule then: edited since", upstream_missing: "a parent had no run at this instant", unrecorded: "no record of why" };
const rfc3339 = (t) => t.toISOString().replace(/\.\d{3}Z$/, "Z");
const ledgerShown = { id: null, html: "", at: 0, reading: null };

async function ledgerDay(id) {
  const to = new Date(), from = new Date(to.getTime() - 24 * 3600_000);
  let instants = [], manual = [], next = rfc3339(from), pages = 0;
  do {
    const page = await api("GET", `/v1/jobs/${id}/instants?from=${encodeURIComponent(next)}&to=${encodeURIComponent(rfc3339(to))}&limit=1000`);
    instants = instants.concat(page.instants); manual = manual.concat(page.manual); next = page.next; pages += 1;
  } while (next && pages < LEDGER_PAGES);
  return { from, to, instants, manual, more: Boolean(next) };
}

const why = (e) => REASONS[e.reason] || e.reason || "";
// A detail's sentence with its RFC 3339 instants in local time, as the rest of the page shows them.
const said = (detail) => String(detail ?? "").replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)/g, (t) => when(t));

function ledgerCell(e) {
  const failed = e.outcome === "ran" && ["FAILED", "TIMED_OUT"].includes(e.state);
  const flying = e.outcome === "ran" && IN_FLIGHT.includes(e.state);
  const cls = `${e.outcome}${failed ? " failed" : ""}${flying ? " flying" : ""}${e.reason ? ` ${e.reason}` : ""}`;
  const title = [when(e.at), `${e.outcome}${e.outcome === "ran" && e.state ? ` (${e.state})` : ""}${e.reason ? `: ${why(e)}` : ""}`, said(e.detail)].filter(Boolean).join(" · ");
  const attrs = `class="${esc(cls)}" data-outcome="${esc(e.outcome)}" data-at="${esc(e.at)}" title="${esc(title)}"`;
  return e.run_id ? `<a href="#/runs/${esc(e.run_id)}" ${attrs}></a>` : `<span ${attrs}></span>`;
}

function ledgerHtml({ from, to, instants, manual, more }) {
  if (!instants.length) return `<p class="muted">No scheduled instant in the last 24 hours.${manual.length ? ` ${manual.length} manual run(s): see Recent runs.` : ""}</p>`;
  const counts = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
  instants.forEach((e) => { counts[e.outcome] = (counts[e.outcome] || 0) + 1; });
  const failed = instants.filter((e) => e.outcome === "ran" && ["FAILED", "TIMED_OUT"].includes(e.state)).length;
  const flying = instants.filter((e) => e.outcome === "ran" && IN_FLIGHT.includes(e.state)).length;
  const notDue = instants.filter((e) => e.reason === "before_start" || e.reason === "after_end").length;
  const notes = {
    ran: [failed && `<i class="ran failed"></i>${failed} failed`, flying && `<i class="ran flying"></i>${flying} in flight`].filter(Boolean).join(", "),
    missed: notDue ? `<i class="missed before_start"></i>${notDue} outside the schedule's dates` : "",
  };
  const legend = OUTCOMES.map((o) => `<span><i class="${o}"></i>${o} <strong data-count="${o}">${counts[o]}</strong>${notes[o] ? ` <span class="muted">(${notes[o]})</span>` : ""}</span>`)
    .join('<span class="muted">·</span>');
  // Runs of missed or skipped instants with nothing else between them and the same explanation.
  const rows = [];
  instants.forEach((e, i) => {
    if (e.outcome !== "missed" && e.outcome !== "skipped") return;
    const last = rows[rows.length - 1];
    if (last && last.end === i - 1 && last.outcome === e.outcome && last.reason === e.reason && last.detail === e.detail) Object.assign(last, { end: i, to: e.at, n: last.n + 1, run: null });
    else rows.push({ outcome: e.outcome, reason: e.reason, detail: e.detail, from: e.at, to: e.at, end: i, n: 1, run: e.run_id });
  });
  const shown = rows.slice().reverse().slice(0, 20);
  const table = shown.length ? `<table class="why"><thead><tr><th>Instant</th><th>Outcome</th><th>Why</th></tr></thead><tbody>
    ${shown.map((r) => `<tr data-outcome="${esc(r.outcome)}"><td>${r.n === 1 ? (r.run ? `<a href="#/runs/${esc(r.run)}">${when(r.from)}</a>` : when(r.from))
      : `${when(r.from)} – ${when(r.to)} <span class="muted">(${r.n} instants)</span>`}</td>
      <td><i class="${esc(r.outcome)}${r.reason ? ` ${esc(r.reason)}` : ""}"></i>${esc(r.outcome)}</td>
      <td>${r.reason ? `${esc(why(r))}${r.detail ? `<div class="muted">${esc(said(r.detail))}</div>` : ""}` : esc(said(r.detail))}</td></tr>`).join("")}</tbody></table>
    ${rows.length > shown.length ? `<p class="muted">${rows.length - shown.length} older row(s) not shown.</p>` : ""}`
    : '<p class="muted">No instant missed or skipped.</p>';
  return `<p class="legend">${legend}</p>
    <div class="strip${instants.length > 300 ? " dense" : ""}" aria-label="${instants.length} instants, oldest first">${instants.map(ledgerCell).join("")}</div>
    <p class="range muted"><span>${when(from)}</span><span>${when(to)}</span></p>
    ${more ? `<p class="muted">The first ${instants.length} instants only: the day has more than ${LEDGER_PAGES} pages.</p>` : ""}
    ${manual.length ? `<p class="muted">And ${manual.length} manual run(s) (triggers, reruns), not on the schedule: see Recent runs.</p>` : ""}
    ${table}`;
}

async function ledgerPanel(id) {
  ledgerShown.reading = id;
  let html;
  try { html = ledgerHtml(await ledgerDay(id)); } catch (err) { html = `<p class="error">${esc(err.message)}</p>`; }
  Object.assign(ledgerShown, { id, html, at: Date.now(), reading: ledgerShown.reading === id ? null : ledgerShown.reading });
  const panel = document.getElementById("ledger");
  if (panel?.dataset.job === id) panel.innerHTML = html;
}

// The job's one-off exceptions (README, "One-off exceptions"): the pause it is in, said in a
// banner with Resume and its catch-up choice; the pause form (why, and until when: entered in the
// browser's time, sent in UTC); the skips of its instants, each taken back alone or all at once;
// and what is left of its schedule's max_runs.
const CATCHUP = [["skip", "skip the instants the pause covered"], ["latest", "run the latest of them now"], ["all", "run each of them now"]];
// An instant as a datetime-local input's value, in the browser's time zone ("2025-03-01T14:30").
const localInput = (t) => { const d = new Date(t); d.setMinutes(d.getMinutes() - d.getTimezoneOffset()); return d.toISOString().slice(0, 16); };

function pauseBanner(job) {
  const p = job.pause;
  const said = p ? `Paused since <strong>${when(p.from)}</strong>${p.by ? ` by <strong>${esc(p.by)}</strong>` : ""}${p.reason ? `: <q>${esc(p.reason)}</q>` : ""}${p.until ? ` — resumes by itself at <strong>${when(p.until)}</strong>` : ""}`
    : "Paused";
  return `<div class="banner" id="pause-banner" role="status"><p>${said}</p><div class="actions">
    <label>Catch up <select id="resume-catchup">${CATCHUP.map(([v, text]) => `<option value="${v}"${v === "skip" ? " selected" : ""}>${esc(text)}</option>`).join("")}</select></label>
    <button data-act="resume">Resume</button><button data-act="pause" aria-controls="pause-form">Change the pause…</button></div></div>`;
}

function pauseForm(job) {
  const p = job.paused ? job.pause : null;
  return `<form class="card exception" id="pause-form" hidden>
    <label>Reason <small>optional, shown with the pause</small><input type="text" id="pause-reason" maxlength="500" placeholder="e.g. maintenance window" value="${esc(p?.reason || "")}"></label>
    <label>Resume by itself at <small>optional, your time</small><input type="datetime-local" id="pause-until" value="${p?.until ? esc(localInput(p.until)) : ""}"></label>
    <div class="actions"><button type="submit">${job.paused ? "Change the pause" : "Pause the job"}</button><button type="button" id="pause-cancel">Cancel</button></div></form>`;
}

function skipsPanel(job) {
  const skips = job.skips || [];
  if (!skips.length) return "";
  const now = Date.now();
  const ahead = skips.filter((s) => Date.parse(s.at) > now).length;
  return `<div id="skips-panel"><span>Skipped instants</span><ul class="plain" id="skips">${skips.map((s) => `<li data-skip="${esc(s.at)}">${when(s.at)}
      <small class="muted">${s.by ? `by ${esc(s.by)}` : ""}</small>
      ${Date.parse(s.at) > now ? `<button type="button" class="link" data-unskip="${esc(s.at)}">take back</button>` : '<small class="muted">(passed)</small>'}</li>`).join("")}</ul>
    ${ahead ? `<button type="button" class="link" id="unskip-all">take back all</button>` : ""}</div>`;
}

// The job's next instants (its preview): one skipped on request struck through, one a DST change
// touched badged with what it did (its note's words on hover and for a screen reader). A change
// that marks no instant (a local time the gap skips) gets a line of its own, in time order.
const DST_MARKS = { moved: "DST moved", doubled: "DST doubled", first_only: "DST first only", skipped: "DST skipped" };
function nextRuns(preview) {
  const notes = preview.dst || [], used = new Set();
  // The note that marks instant `i`: for `moved`, the one it runs the gap's times at; for a
  // repeated local time, the nearest change of that effect.
  const noteOf = (i) => {
    const t = Date.parse(i.utc), same = notes.filter((n) => n.effect === i.dst);
    const near = (n) => Math.abs(Date.parse(n.at) - t);
    return same.find((n) => n.runs_at && Date.parse(n.runs_at) === t) || same.sort((a, b) => near(a) - near(b))[0];
  };
  const dstTag = (effect, detail) => (detail
    ? `<small class="tag dst" title="${esc(detail)}">${esc(DST_MARKS[effect] || `DST ${effect}`)}</small><small class="sr-only">: ${esc(detail)}</small>`
    : `<small class="tag dst">${esc(DST_MARKS[effect] || `DST ${effect}`)}</small>`);
  const items = preview.instants.map((i) => {
    const note = i.dst ? noteOf(i) : null;
    if (note) used.add(note);
    const dst = i.dst ? ` ${dstTag(i.dst, note?.detail)}` : "";
    const html = i.skipped
      ? `<li data-at="${esc(i.utc)}" data-skipped="true"${i.dst ? ` data-dst="${esc(i.dst)}"` : ""} title="skipped on request: it will not run"><s>${esc(i.local)}</s> <small class="tag">skipped</small>${dst}</li>`
      : `<li data-at="${esc(i.utc)}"${i.dst ? ` data-dst="${esc(i.dst)}"` : ""}>${esc(i.local)}${dst}</li>`;
    return { t: Date.parse(i.utc), html };
  });
  const alone = notes.filter((n) => !used.has(n)).map((n) => ({ t: Date.parse(n.at),
    html: `<li class="dst-note" data-dst-note="${esc(n.effect)}">${dstTag(n.effect, "")} <small class="muted">${esc(n.detail)}</small></li>` }));
  return `<ul class="plain" id="next-runs">${items.concat(alone).sort((a, b) => a.t - b.t).map((x) => x.html).join("")}</ul>`;
}

// What the API warns of the schedule (`warnings`: each DST change of the next year that moves,
// skips or doubles an instant), listed under it.
// The named calendars a job's schedule uses, each linking to its page, with the version the
// job's instants follow.
const scheduleCalendars = (calendars) => {
  const named = Object.entries(calendars || {});
  return named.length ? `<p id="schedule-calendars">${named.map(([name, v]) =>
    `calendar <a href="#/calendars/${encodeURIComponent(name)}">${esc(name)}</a> <span class="muted">v${esc(v)}</span>`).join(", ")}</p>` : "";
};

const scheduleWarnings = (warnings) => (warnings?.length
  ? `<ul class="notice" id="schedule-warnings" aria-label="Schedule warnings">${warnings.map((w) => `<li>${esc(w)}</li>`).join("")}</ul>` : "");

function remainingRuns(job) {
  const n = job.remaining_runs, max = job.schedule?.max_runs;
  return `<div id="remaining"><span>Runs left</span>${n} ${n === 1 ? "run remains" : "runs remain"}${max != null ? ` (max_runs ${esc(max)})` : ""}</div>`;
}

// What was typed into the job page's forms, kept over its refresh while runs are in flight.
const FORM_FIELDS = ["pause-reason", "pause-until", "skip-next", "resume-catchup"];
function formsTyped() {
  const typed = Object.fromEntries(FORM_FIELDS.map((f) => [f, document.getElementById(f)?.value]));
  return { typed, open: document.getElementById("pause-form")?.hidden === false, focus: document.activeElement?.id };
}
function formsRetyped({ typed, open, focus }) {
  FORM_FIELDS.forEach((f) => { const input = document.getElementById(f); if (input && typed[f] !== undefined) input.value = typed[f]; });
  if (open) document.getElementById("pause-form").hidden = false;
  if (focus) document.getElementById(focus)?.focus();
}

function togglePauseForm() {
  const form = document.getElementById("pause-form");
  form.hidden = !form.hidden;
  main.querySelectorAll('button[data-act="pause"]').forEach((b) => b.setAttribute("aria-expanded", String(!form.hidden)));
  if (!form.hidden) { document.getElementById("pause-until").min = localInput(Date.now()); document.getElementById("pause-reason").focus(); }
}

// The pause form's body: the reason when there is one, and the until as RFC 3339 UTC.
function pauseBody() {
  const reason = document.getElementById("pause-reason").value.trim(), until = document.getElementById("pause-until").value;
  const body = {};
  if (reason) body.reason = reason;
  if (until) {
    const t = new Date(until);
    if (Number.isNaN(t.getTime())) throw Object.assign(new Error("is not a date and time"), { field: "until" });
    body.until = rfc3339(t);
  }
  return body;
}

function wireExceptions(job) {
  const form = document.getElementById("pause-form");
  form.onsubmit = (e) => {
    e.preventDefault();
    let body;
    try { body = pauseBody(); } catch (err) { say(err); return; }
    act(job, "pause", body);
  };
  document.getElementById("pause-cancel").onclick = () => { form.reset(); togglePauseForm(); };
  document.getElementById("skip-form")?.addEventListener("submit", (e) => {
    e.preventDefault();
    act(job, "skip", { next: Number(document.getElementById("skip-next").value) });
  });
  main.querySelectorAll("button[data-unskip]").forEach((b) => (b.onclick = () => unskip(job, b.dataset.unskip)));
  const all = document.getElementById("unskip-all");
  if (all) all.onclick = () => unskip(job, null);
}

// The job page's recent runs as bars, oldest first, each as tall as its run took, on one linear
// scale from 0 to a little over the longest run or the baseline's p95, whichever is longer.
// Behind them, the job's normal band (its `baseline`, README "Health learned from history"):
// shaded from 0 to its p95, a line at its typical duration, and the anomaly threshold dashed when
// a run came near it (drawn always, it would flatten a short job's band: the threshold is at
// least a minute past the p95). A job without a baseline yet says when it gets one.
const PLOT_PX = 64;
const anomalyAfter = (b) => Math.max(2 * b.p95_ms, b.p95_ms + 60_000); // health::Baseline::anomaly_after
function runsChart(runs, baseline) {
  const note = `<p class="band-key muted" id="band-key">no baseline yet (learned after 5 successful runs)</p>`;
  if (!runs.length && !baseline) return `<div class="timeline" id="timeline"><span class="muted">No runs yet.</span></div>${note}`;
  const took = runs.slice().reverse().map((r) => ({ r, d: ms(r.attempts[0]?.started_at, r.attempts[r.attempts.length - 1]?.finished_at) }));
  const top = 1.1 * Math.max(1, baseline?.p95_ms ?? 0, ...took.map(({ d }) => d ?? 0));
  const y = (m) => Math.round((m / top) * PLOT_PX);
  const bars = took.map(({ r, d }) => `<a href="#/runs/${esc(r.id)}" class="${esc(r.state)}${r.sla_missed ? " sla" : ""}" style="height:${Math.max(6, y(d ?? 0))}px"
      title="${esc(r.state)} · ${when(r.scheduled_at)} · ${duration(d)}${r.sla_missed ? " · SLA missed" : ""}"></a>`).join("");
  if (!baseline) return `<div class="timeline" id="timeline"><div class="plot" style="height:${PLOT_PX}px">${bars}</div></div>${note}`;
  const { typical_ms: typical, p95_ms: p95, runs: n, at } = baseline;
  const normal = `normal: typical ${duration(typical)}, p95 ${duration(p95)}, from ${n} runs`;
  const anomaly = anomalyAfter(baseline), marked = anomaly <= top;
  return `<div class="timeline" id="timeline"><div class="plot" style="height:${PLOT_PX}px">
      <div class="band" id="band" role="img" style="height:${y(p95)}px" data-typical-ms="${esc(typical)}" data-p95-ms="${esc(p95)}" data-runs="${esc(n)}"
        title="${esc(normal)}" aria-label="${esc(`The ${normal}`)}"></div>
      <div class="typical" style="bottom:${y(typical)}px" aria-hidden="true"></div>
      ${marked ? `<div class="threshold" id="threshold" style="bottom:${y(anomaly)}px" title="anomaly past ${esc(duration(anomaly))}" aria-hidden="true"></div>` : ""}
      ${bars}</div></div>
    <p class="band-key" id="band-key"><span><i class="band"></i>${esc(normal)}</span> <span><i class="typical"></i>typical</span>
      ${marked ? `<span><i class="threshold"></i>anomaly past ${esc(duration(anomaly))}</span>` : ""} <span class="muted">learned ${when(at)}</span></p>`;
}

// A change's fields, old → new, shortened (values over 60 characters cut).
function changesText(changes) {
  const short = (v) => { const t = v === undefined || v === null ? "—" : JSON.stringify(v); return t.length > 60 ? `${t.slice(0, 57)}…` : t; };
  return (changes || []).map((c) => `<code>${esc(c.field)}</code> ${esc(short(c.old))} → ${esc(short(c.new))}`).join("<br>");
}

// Audit records as table rows: when, who, what, and the fields changed.
function auditRows(records, withTarget) {
  return records.map((r) => `<tr data-action="${esc(r.action)}"><td>${when(r.at)}</td>
    <td>${esc(r.actor.name)} <span class="muted">${esc(r.actor.kind.replace("_", " "))}</span></td><td><code>${esc(r.action)}</code></td>
    ${withTarget ? `<td>${r.job ? `<a href="#/jobs/${esc(r.job)}">${esc(r.target.name || r.target.id)}</a>` : esc(r.target.name || r.target.id)} <span class="muted">${esc(r.target.kind)}</span></td>` : ""}
    <td class="changes">${changesText(r.changes)}</td></tr>`).join("");
}

async function jobPage(id, refreshing = false) {
  const [job, runs, preview, graph, trail] = await Promise.all([
    api("GET", `/v1/jobs/${id}`), api("GET", `/v1/jobs/${id}/runs?limit=50`), api("GET", `/v1/jobs/${id}/preview?count=5`),
    api("GET", `/v1/jobs/${id}/graph`).catch(() => null), api("GET", `/v1/audit?job=${id}&limit=20`).catch(() => null),
  ]);
  const workflow = graph && graph.nodes.length > 1;
  const { id: _, owner, version, created_at, updated_at, next_run_at, last_run, subscriptions, schedule_description, pause, skips, remaining_runs, baseline, warnings, calendars, ...definition } = job;
  const about = job.description || Object.keys(job.tags || {}).length
    ? `<p id="about">${esc(job.description || "")} ${tagsOf(job)}</p>` : "";
  const typed = refreshing ? formsTyped() : null;
  main.innerHTML = `<p><a href="#/">← Jobs</a></p><h1>${esc(job.name)} ${job.paused ? '<span class="paused">paused</span>' : ""}</h1>
    ${about}${job.paused ? pauseBanner(job) : ""}
    <div class="toolbar">
      ${job.paused ? "" : '<button data-act="pause" aria-controls="pause-form" aria-expanded="false">Pause…</button>'}
      <button data-act="trigger">Trigger now</button>
      ${job.schedule && !job.depends_on?.length ? `<form class="inline" id="skip-form"><label>Skip next <input type="number" id="skip-next" min="1" max="100" value="1" required></label>
        <button type="submit" id="skip-button">Skip</button></form>` : ""}
      <button data-act="delete" class="danger">Delete</button>
      <span id="action" class="muted"></span></div>
    ${pauseForm(job)}
    <div class="grid card"><div id="schedule"${warnings?.length ? ' class="wide"' : ""}><span>Schedule</span>${esc(schedule_description)}${scheduleCalendars(calendars)}${scheduleWarnings(warnings)}</div>
      <div><span>Next runs</span>${preview.instants.length ? nextRuns(preview) : job.depends_on?.length ? "with its parents' runs" : "—"}</div>
      ${skipsPanel(job)}${job.remaining_runs != null ? remainingRuns(job) : ""}
      <div><span>Version</span>${version} · updated ${when(updated_at)}</div>
      <div><span>Delivery</span>${job.delivery === "at_most_once" ? "at most once" : "at least once"}${job.group ? ` · group <code>${esc(job.group)}</code>` : ""}${job.flexible_window_s ? ` · flexible window ${job.flexible_window_s} s` : ""}</div></div>
    ${workflow ? `<h2>Workflow <span class="muted">(parents left of their children; colour: latest run)</span></h2>
      <div class="graph card" id="graph">${graphSvg(graph, job.id)}</div>` : ""}
    <h2>Instants <span class="muted">(the last 24 hours, oldest to newest; hover a cell for what became of it)</span></h2>
    <div class="ledger card" id="ledger" data-job="${esc(job.id)}">${refreshing && ledgerShown.id === job.id ? ledgerShown.html : '<p class="muted">Reading the ledger…</p>'}</div>
    <h2>Recent runs <span class="muted">(oldest to newest; height: duration; outlined: SLA missed)</span></h2>
    ${runsChart(runs.runs, job.baseline)}
    <table style="margin-top:.8rem"><thead><tr><th>Run</th><th>State</th><th class="hide-narrow">Scheduled</th><th>Duration</th><th class="hide-narrow">Attempts</th></tr></thead><tbody>
    ${runs.runs.map((r) => `<tr><td><a href="#/runs/${esc(r.id)}">${esc(r.kind)} ${when(r.scheduled_at)}</a></td><td>${badge(r.state)}${r.sla_missed ? ' <span class="paused">SLA</span>' : ""}</td>
      <td class="hide-narrow">${when(r.scheduled_at)}</td><td>${duration(ms(r.attempts[0]?.started_at, r.attempts[r.attempts.length - 1]?.finished_at))}</td>
      <td class="hide-narrow">${r.attempts.length}</td></tr>`).join("")}</tbody></table>
    ${trail ? `<h2>Changes <span class="muted">(newest first; <a href="#/audit?job=${esc(job.id)}">the whole trail</a>)</span></h2>
      <table id="job-trail"><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Fields</th></tr></thead><tbody>
      ${auditRows(trail.records, false) || '<tr><td colspan="4" class="muted">No change recorded.</td></tr>'}</tbody></table>` : ""}
    ${subscriptions ? `<h2>Notifications</h2><table><tbody>${subscriptions.map((s) => `<tr><td>${esc(s.protocol)}</td><td>${esc(s.endpoint)}</td><td>${esc(s.status)}</td></tr>`).join("")}</tbody></table>` : ""}
    <h2>Definition</h2><pre>${esc(JSON.stringify(definition, null, 2))}</pre>`;
  main.querySelectorAll("button[data-act]").forEach((b) => (b.onclick = () => {
    if (b.dataset.act === "pause") togglePauseForm();
    else if (b.dataset.act === "resume") act(job, "resume", { catchup: document.getElementById("resume-catchup").value });
    else act(job, b.dataset.act);
  }));
  wireExceptions(job);
  if (typed) formsRetyped(typed);
  if (ledgerShown.reading !== job.id && (!refreshing || ledgerShown.id !== job.id || Date.now() - ledgerShown.at > 30_000)) ledgerPanel(job.id);
  schedule(() => jobPage(id, true), runs.runs.some((r) => IN_FLIGHT.includes(r.state))
    || (workflow && graph.nodes.some((n) => IN_FLIGHT.includes(n.latest_run?.state))));
}

// Says on the job page what an action's API call refused (the field to blame first).
function say(err) {
  const note = document.getElementById("action");
  if (note) { note.textContent = failure(err); note.className = "error"; }
}

// A job page action: POST /v1/jobs/{id}/<action> with `body` (trigger, pause, resume, skip), or
// the delete; then the page as the job is now. A refusal is said, and what was typed is kept.
async function act(job, action, body = {}) {
  try {
    if (action === "delete") {
      if (!confirm(`Delete ${job.name}? Its run history is kept until it expires.`)) return;
      await api("DELETE", `/v1/jobs/${job.id}`);
      location.hash = "#/";
      return;
    }
    const result = await api("POST", `/v1/jobs/${job.id}/${action}`, body);
    if (action === "trigger") { location.hash = `#/runs/${result.id}`; return; }
    await jobPage(job.id);
  } catch (err) { say(err); }
}

// Takes back the skip of one instant (its RFC 3339 as the API gave it), or of every one ahead.
async function unskip(job, instant) {
  try {
    await api("DELETE", `/v1/jobs/${job.id}/skip${instant ? `?instant=${encodeURIComponent(instant)}` : ""}`);
    await jobPage(job.id);
  } catch (err) { say(err); }
}

// The runs of a run's parents and children for the same instant (same key), each with its state,
// or null when it does not exist (yet).
async function relatedRuns(run) {
  const graph = await api("GET", `/v1/jobs/${run.job_id}/graph`).catch(() => null);
  if (!graph) return { graph: null, related: [] };
  const names = new Map(graph.nodes.map((n) => [n.id, n.name]));
  const wanted = graph.edges.filter((e) => e.to === run.job_id).map((e) => ({ relation: "parent", job: e.from }))
    .concat(graph.edges.filter((e) => e.from === run.job_id).map((e) => ({ relation: "child", job: e.to })));
  const related = await Promise.all(wanted.map(async (r) => {
    const id = `${r.job}.${runKey(run.id)}`;
    const found = await api("GET", `/v1/runs/${encodeURIComponent(id)}`).catch((e) => (e.status === 404 ? null : { error: e.message }));
    return { ...r, id, name: names.get(r.job) || r.job, run: found };
  }));
  return { graph, related };
}

// Why a waiting run has not started yet, from the run's `waiting` (GET /v1/runs/{id}).
function waitingText(w) {
  switch (w.reason) {
    case "group": return `its group ${w.group} is full: ${w.running} of ${w.max_running} running${w.ahead ? `, ${w.ahead} older run(s) first` : ""}`;
    case "flexible_offset": return `its flexible window moved its start ${w.offset_s} s after its instant, to ${when(w.until)}`;
    case "backoff": return `attempt ${w.attempt} failed; the next starts after its backoff, at ${when(w.until)}`;
    case "not_due": return `its instant comes at ${when(w.until)}`;
    default: return w.reason;
  }
}

async function runPage(id) {
  const run = await api("GET", `/v1/runs/${id}`);
  const { graph, related } = await relatedRuns(run);
  const root = run.workflow && graph?.nodes.find((n) => n.id === run.workflow);
  main.innerHTML = `<p><a href="#/jobs/${esc(run.job_id)}">← Job</a></p><h1>Run ${badge(run.state)}</h1>
    <div class="grid card"><div><span>Run id</span><code>${esc(run.id)}</code></div><div><span>Scheduled</span>${when(run.scheduled_at)}</div>
      <div><span>Kind</span>${esc(run.kind)}</div><div><span>Updated</span>${when(run.updated_at)}</div>
      ${run.reason ? `<div><span>Reason</span>${esc(run.reason)}</div>` : ""}${run.sla_missed ? "<div><span>SLA</span>missed</div>" : ""}
      ${run.waiting ? `<div id="waiting"><span>Waiting</span>${esc(waitingText(run.waiting))}</div>` : ""}
      ${run.workflow ? `<div><span>Workflow</span>started by a trigger of <a href="#/runs/${esc(`${run.workflow}.${runKey(run.id)}`)}">${esc(root?.name || run.workflow)}</a></div>` : ""}</div>
    ${related.length ? `<h2>Parents and children <span class="muted">(their runs for this instant)</span></h2><table id="workflow"><thead><tr><th>Job</th><th>Relation</th><th>State</th></tr></thead><tbody>
      ${related.map((r) => `<tr data-run="${esc(r.id)}"><td><a href="#/runs/${esc(r.id)}">${esc(r.name)}</a></td><td>${r.relation}</td>
        <td>${r.run?.state ? `${badge(r.run.state)} <span class="muted">${when(r.run.updated_at)}</span>` : r.run?.error ? `<span class="error">${esc(r.run.error)}</span>` : '<span class="muted">not run yet</span>'}</td></tr>`).join("")}
      </tbody></table>` : ""}
    <h2>Attempts</h2><table><thead><tr><th>#</th><th>Started</th><th class="hide-narrow">Ended</th><th>Duration</th><th>Worker</th><th>Outcome</th><th>Status</th></tr></thead><tbody id="attempts">
    ${run.attempts.map((a) => `<tr><td>${a.n}</td><td>${when(a.started_at)}</td><td class="hide-narrow">${when(a.finished_at)}</td>
      <td>${duration(ms(a.started_at, a.finished_at))}</td><td><code>${esc(a.worker)}</code></td><td>${esc(a.outcome || "running")}</td><td>${esc(a.status_code ?? "—")}</td></tr>
      ${a.handle ? `<tr><td></td><td colspan="6">Follows ${workLink(a.handle)}${a.followed_at ? `, last looked at ${when(a.followed_at)}` : ""}${a.logs_url ? ` · <a href="${esc(a.logs_url)}" target="_blank" rel="noopener">its logs</a>` : ""}</td></tr>` : ""}
      ${a.error || a.output ? `<tr><td></td><td colspan="6">${a.error ? `<div class="error">${esc(a.error)}</div>` : ""}${a.output ? `<pre>${esc(a.output)}</pre>` : ""}</td></tr>` : ""}`).join("")
      || '<tr><td colspan="7" class="muted">No attempt yet.</td></tr>'}</tbody></table>
    ${run.alerts?.length ? `<h2>Alerts</h2><table id="alerts"><thead><tr><th>Event</th><th>Channel</th><th>State</th><th>Tries</th><th>At</th></tr></thead><tbody>
      ${run.alerts.map((d) => `<tr><td>${esc(d.event)}</td><td>${esc(d.channel)}</td><td>${d.state === "failed" ? '<span class="error">failed</span>' : esc(d.state)}</td><td>${esc(d.tries)}</td><td>${when(d.at)}</td></tr>
      ${d.error ? `<tr><td></td><td colspan="4"><div class="error">${esc(d.error)}</div></td></tr>` : ""}`).join("")}</tbody></table>` : ""}
    <h2>Logs</h2><div id="logs" class="card"></div>`;
  const logs = document.getElementById("logs");
  if (run.logs.url && run.logs.url.startsWith("/v1/")) {
    const lines = await api("GET", run.logs.url).then((l) => l.lines).catch((e) => [`(${e.message})`]);
    logs.innerHTML = `<pre>${esc(lines.join("\n") || "(no lines yet)")}</pre>`;
  } else if (run.logs.url) {
    logs.innerHTML = `<p><a href="${esc(run.logs.url)}" target="_blank" rel="noopener">Open CloudWatch Logs Insights</a> on ${esc(run.logs.log_groups.join(", "))} with:</p><pre>${esc(run.logs.query)}</pre>`;
  } else {
    logs.textContent = run.logs.query;
  }
  schedule(() => runPage(id), IN_FLIGHT.includes(run.state) || related.some((r) => IN_FLIGHT.includes(r.run?.state)));
}

// The owner's named calendars: each with its version, size and description.
async function calendarsPage() {
  const { calendars } = await api("GET", "/v1/calendars");
  main.innerHTML = `<p><a href="#/">← Jobs</a></p><h1>Calendars</h1>
    <table><thead><tr><th>Name</th><th>Version</th><th>Business days</th><th>Holidays</th><th class="hide-narrow">Description</th></tr></thead>
    <tbody id="calendars">${calendars.map((c) => `<tr data-calendar="${esc(c.name)}"><td><a href="#/calendars/${encodeURIComponent(c.name)}">${esc(c.name)}</a></td>
      <td>${esc(c.version)}</td><td>${esc((c.business_days || ["mon", "tue", "wed", "thu", "fri"]).join(" "))}</td>
      <td>${(c.holidays || []).length}</td><td class="hide-narrow">${esc(c.description)}</td></tr>`).join("")
      || '<tr><td colspan="5" class="muted">No calendars yet: PUT one to /v1/calendars/{name}, or apply a file with the sundial CLI.</td></tr>'}</tbody></table>`;
  schedule(calendarsPage, false);
}

// One calendar: its days and holidays, and the jobs that name it with the version each follows
// (one behind is marked: its edit has not reached it yet).
async function calendarPage(name) {
  const c = await api("GET", `/v1/calendars/${encodeURIComponent(name)}`);
  const holiday = (h) => (typeof h === "string" ? esc(h) : `${esc(h.from)} to ${esc(h.to)}`);
  main.innerHTML = `<p><a href="#/calendars">← Calendars</a></p><h1>Calendar ${esc(c.name)} <span class="muted">v${esc(c.version)}</span></h1>
    <div class="grid card"><div><span>Description</span>${esc(c.description) || "—"}</div>
      <div><span>Time zone of its dates</span>${esc(c.timezone) || "—"}</div>
      <div><span>Business days</span>${esc((c.business_days || ["mon", "tue", "wed", "thu", "fri"]).join(" "))}</div>
      <div><span>Updated</span>${when(c.updated_at)}</div></div>
    <h2>Holidays <span class="muted">(${(c.holidays || []).length})</span></h2>
    <ul class="holidays" id="holidays">${(c.holidays || []).map((h) => `<li>${holiday(h)}</li>`).join("") || '<li class="muted">none</li>'}</ul>
    <h2>Jobs that name it</h2>
    <table><thead><tr><th>Job</th><th>Follows version</th></tr></thead><tbody id="calendar-jobs">
    ${c.jobs.map((j) => `<tr data-job="${esc(j.id)}"><td><a href="#/jobs/${esc(j.id)}">${esc(j.name)}</a></td>
      <td>${esc(j.holds)}${j.holds < c.version ? ' <span class="paused">behind: PUT the calendar again</span>' : ""}</td></tr>`).join("")
      || '<tr><td colspan="2" class="muted">No job names it.</td></tr>'}</tbody></table>`;
  schedule(() => calendarPage(name), false);
}

// The audit trail, newest first, filtered by actor and action (and by job, from a job's page);
// "Older" follows the page token.
async function auditPage(query, next) {
  const params = new URLSearchParams(query);
  params.set("limit", "50");
  if (next) params.set("next", next);
  const page = await api("GET", `/v1/audit?${params}`);
  const field = (name, label) => `<label>${label} <input id="audit-${name}" value="${esc(params.get(name) || "")}"></label>`;
  main.innerHTML = `<p><a href="#/">← Jobs</a></p><h1>Audit trail</h1>
    <form class="inline" id="audit-filter">${field("actor", "Who")} ${field("action", "Action")} <button type="submit">Filter</button></form>
    <table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>What</th><th>Fields</th></tr></thead>
    <tbody id="audit">${auditRows(page.records, true) || '<tr><td colspan="5" class="muted">No records on this page.</td></tr>'}</tbody></table>
    ${page.next ? '<p><button id="audit-older">Older</button></p>' : ""}`;
  document.getElementById("audit-filter").onsubmit = (e) => {
    e.preventDefault();
    const asked = new URLSearchParams();
    if (params.get("job")) asked.set("job", params.get("job"));
    for (const name of ["actor", "action"]) { const v = document.getElementById(`audit-${name}`).value.trim(); if (v) asked.set(name, v); }
    location.hash = `#/audit?${asked}`;
  };
  const older = document.getElementById("audit-older");
  if (older) older.onclick = () => auditPage(query, page.next);
}

async function route() {
  clearTimeout(refreshTimer);
  if (!sessionStorage.getItem(KEY)) return login();
  document.getElementById("signout").hidden = false;
  const [path, query = ""] = (location.hash || "#/").split("?");
  const [, kind, id] = path.split("/");
  try {
    if (kind === "audit") return await auditPage(query);
    if (kind === "jobs" && id) await jobPage(decodeURIComponent(id));
    else if (kind === "calendars" && id) await calendarPage(decodeURIComponent(id));
    else if (kind === "calendars") await calendarsPage();
    else if (kind === "runs" && id) await runPage(decodeURIComponent(id));
    else { if (!document.getElementById("jobs")) main.innerHTML = ""; await jobsPage(); }
  } catch (err) {
    if (sessionStorage.getItem(KEY)) main.innerHTML = `<p class="error">${esc(err.message)}</p><p><a href="#/">Back to the jobs</a></p>`;
  }
}

document.getElementById("signout").onclick = () => { sessionStorage.removeItem(KEY); route(); };
window.addEventListener("hashchange", () => { main.innerHTML = ""; route(); });
route();
