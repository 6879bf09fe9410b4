// The dashboard end to end in headless Chromium: open it, sign in with an API key, create a job
// through the API, see it listed, trigger it with the page's button, see the run reach SUCCEEDED
// and its attempt detail. Then a workflow (a diamond: extract → transform, aggregate → report):
// trigger its root, wait for the last job's run, see the graph on the job page and the run page's
// links to its parents' runs for the same instant. Last, the job page's instant ledger of a job due
// every minute: a cell per instant of the last 24 hours, the legend counting them, the instant
// the tick ran linking to its run. A job's normal band (the baseline five runs teach it) behind
// its recent runs' bars, and the note of a job without one. Between, the one-off exceptions on a job page: skips of
// instants (listed, marked in the next runs, taken back), a pause with a reason and an until (its
// banner) and the resume with its catch-up. And DST: a job at 02:30 New York time lists the API's
// warning of the next spring change under its schedule, and one that starts two days before that
// change badges the instant the gap moves; a union schedule (`any`) shows its description; a
// named calendar is linked from the job that names it, and its pages list its days and jobs; a
// job's page shows its audit trail, and the audit page lists changes filtered by action.
// Screenshots go to $SCREENSHOTS. Usage:
//   node dashboard.test.mjs <sundial base URL> <api key>
// Exits non-zero (with the reason) on the first failed expectation; bounded by a global timeout.
import { chromium } from "playwright-core";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";

const [base, key] = process.argv.slice(2);
const shots = process.env.SCREENSHOTS || "target/screenshots";
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
fs.mkdirSync(shots, { recursive: true });
const deadline = setTimeout(() => { console.error("browser test: timed out after 240 s"); process.exit(1); }, 240_000);

function fail(message) { throw new Error(message); }

async function call(method, url, body) {
  const response = await fetch(`${base}${url}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

// The job's target: a real HTTP server on loopback that answers 200.
let hits = 0;
const target = http.createServer((req, res) => { hits += 1; req.resume(); req.on("end", () => { res.writeHead(200, { "Content-Type": "application/json" }); res.end('{"ok":true}'); }); });
await new Promise((resolve) => target.listen(0, "127.0.0.1", resolve));
const targetUrl = `http://127.0.0.1:${target.address().port}/hook`;
// The minutely job's target, apart: its runs never count as the first job's calls.
const ticking = http.createServer((req, res) => { req.resume(); req.on("end", () => { res.writeHead(200); res.end("{}"); }); });
await new Promise((resolve) => ticking.listen(0, "127.0.0.1", resolve));

const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

  await page.goto(`${base}/`);
  await page.waitForSelector("#login");
  await shot("01-sign-in");
  await page.fill("#key", key);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#jobs");

  const name = `browser-${Date.now()}`;
  const created = await fetch(`${base}/v1/jobs`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name, schedule: { cron: "30 2 * * *", timezone: "America/New_York" }, target: { type: "http", url: targetUrl } }),
  });
  if (created.status !== 201) fail(`creating the job: HTTP ${created.status} ${await created.text()}`);
  const job = await created.json();
  // A job due every minute, created now so that the tick has run one of its instants by the
  // ledger's turn at the end.
  const minutelyFrom = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  const minutely = await call("POST", "/v1/jobs", { name: `minutely-${Date.now()}`, schedule: { cron: "* * * * *" }, catchup: "skip",
    target: { type: "http", url: `http://127.0.0.1:${ticking.address().port}/tick` } });
  if (minutely.status !== 201) fail(`creating the minutely job: HTTP ${minutely.status} ${JSON.stringify(minutely.body)}`);

  await page.reload();
  const row = page.locator(`tr[data-job="${job.id}"]`);
  await row.waitFor({ timeout: 15_000 });
  const rowText = await row.innerText();
  if (!rowText.includes("every day at 02:30 America/New_York")) fail(`the list shows the schedule in words: ${rowText}`);
  await page.fill("#search", name);
  await shot("02-jobs-list");
  // The API filters: a tag no job has empties the list; the job's own tag finds it.
  await page.fill("#tag", "team:nobody");
  await page.locator("#jobs td.muted", { hasText: "match" }).waitFor({ timeout: 15_000 });
  await page.fill("#tag", "");
  await row.waitFor({ timeout: 15_000 });

  await row.locator("a").click();
  await page.waitForSelector('button[data-act="trigger"]');
  await shot("03-job-page");
  if (await page.locator("#graph").count()) fail("a job outside any workflow shows no graph");
  await page.click('button[data-act="trigger"]');
  await page.waitForURL(/#\/runs\//, { timeout: 15_000 });
  // The run page refreshes itself while the run is in flight.
  await page.waitForSelector("h1 .state.SUCCEEDED", { timeout: 60_000 });
  const attempts = await page.locator("#attempts").innerText();
  if (!/\b1\b/.test(attempts) || !attempts.includes("succeeded") || !attempts.includes("200")) fail(`attempt detail: ${attempts}`);
  if (!/local:\d+\/worker-\d+/.test(attempts)) fail(`the attempt names its worker: ${attempts}`);
  // The run's lines of the local log (every line inside a run carries its run_id).
  await page.locator("#logs pre", { hasText: "run_id" }).waitFor({ timeout: 15_000 });
  await shot("04-run-succeeded");
  if (hits !== 1) fail(`the target was called ${hits} times`);

  // A phone-sized screen still shows the job and its run.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.goto(`${base}/ui/index.html#/jobs/${job.id}`);
  await page.waitForSelector("#timeline a.SUCCEEDED");
  // One run is no baseline: the bars alone, and a note saying when the normal band comes.
  if (await page.locator("#band").count()) fail("a job with one run shows no normal band");
  const noBand = await page.locator("#band-key").innerText();
  if (!noBand.includes("no baseline yet (learned after 5 successful runs)")) fail(`a job without a baseline says so: ${noBand}`);
  await shot("05-job-page-phone");

  // A job's normal band: five successful runs of a target that takes 0.8 to 1.3 s learn its
  // baseline (the recorder learns it at the fifth success); its page draws the band behind the
  // bars, scaled like them, with the baseline's numbers in its caption.
  await page.setViewportSize({ width: 1280, height: 800 });
  const delays = [800, 900, 1000, 1100, 1300];
  let paced = 0;
  const measured = http.createServer((req, res) => {
    const delay = delays[paced++ % delays.length];
    req.resume();
    req.on("end", () => setTimeout(() => { res.writeHead(200); res.end("{}"); }, delay));
  });
  await new Promise((resolve) => measured.listen(0, "127.0.0.1", resolve));
  try {
    const timed = await call("POST", "/v1/jobs", { name: `baseline-${Date.now()}`, schedule: { cron: "0 0 1 1 *" },
      target: { type: "http", url: `http://127.0.0.1:${measured.address().port}/hook` } });
    if (timed.status !== 201) fail(`creating the timed job: HTTP ${timed.status} ${JSON.stringify(timed.body)}`);
    for (const _ of delays) {
      const t = await call("POST", `/v1/jobs/${timed.body.id}/trigger`, {});
      if (t.status !== 202) fail(`triggering the timed job: HTTP ${t.status} ${JSON.stringify(t.body)}`);
    }
    const learnedBy = Date.now() + 60_000;
    let baseline = null;
    while (!baseline) {
      if (Date.now() > learnedBy) fail("no baseline learned within 60 s of five triggers");
      await new Promise((resolve) => setTimeout(resolve, 500));
      baseline = (await call("GET", `/v1/jobs/${timed.body.id}`)).body.baseline;
    }
    if (baseline.runs !== 5 || baseline.typical_ms < 1000 || baseline.p95_ms < 1300 || baseline.typical_ms > baseline.p95_ms) fail(`the baseline of the five runs: ${JSON.stringify(baseline)}`);
    await page.goto(`${base}/ui/index.html#/jobs/${timed.body.id}`);
    await page.waitForSelector("#band", { timeout: 15_000 });
    const band = await page.locator("#band").evaluate((b) => ({ ...b.dataset, label: b.getAttribute("aria-label"), title: b.title, height: b.getBoundingClientRect().height }));
    if (Number(band.typicalMs) !== baseline.typical_ms || Number(band.p95Ms) !== baseline.p95_ms || Number(band.runs) !== 5) fail(`the band is the job's baseline: ${JSON.stringify(band)} ${JSON.stringify(baseline)}`);
    // The dashboard's duration(): 1000 ms and over to the tenth of a second.
    const said = (m) => (m < 1000 ? `${m} ms` : m < 60000 ? `${(m / 1000).toFixed(1)} s` : `${Math.floor(m / 60000)} min ${Math.round((m % 60000) / 1000)} s`);
    const normal = `normal: typical ${said(baseline.typical_ms)}, p95 ${said(baseline.p95_ms)}, from 5 runs`;
    const caption = await page.locator("#band-key").innerText();
    if (!caption.includes(normal)) fail(`the caption says the band's numbers (${normal}): ${caption}`);
    if (!band.label.includes(normal) || !band.title.includes(normal)) fail(`the band says its numbers to a screen reader and on hover: ${JSON.stringify(band)}`);
    // Scaled like the bars: the band reaches the p95 run's height, and every bar is drawn over it.
    const bars = await page.locator("#timeline a").evaluateAll((as) => as.map((a) => {
      const r = a.getBoundingClientRect();
      return { height: r.height, top: document.elementFromPoint(r.x + r.width / 2, r.bottom - 2) === a };
    }));
    if (bars.length !== 5 || bars.some((b) => !b.top)) fail(`the five bars are drawn over the band: ${JSON.stringify(bars)}`);
    const tallest = Math.max(...bars.map((b) => b.height));
    if (Math.abs(tallest - band.height) > 2) fail(`the band reaches the longest run of five, its p95: band ${band.height} px, bars ${JSON.stringify(bars)}`);
    if (await page.locator("#threshold").count()) fail("the anomaly threshold, a minute past a 1.3 s p95, is not drawn on a chart that ends near 1.4 s");
    await page.locator("#timeline").scrollIntoViewIfNeeded();
    await shot("job-baseline");
  } finally {
    measured.close();
  }

  // A diamond: transform and aggregate after extract (by id and by name), report after both (by
  // name). Extract's schedule never comes due during the test: the trigger alone runs the diamond.
  const suffix = Date.now().toString(36);
  const create = async (body) => {
    const r = await call("POST", "/v1/jobs", { ...body, target: { type: "http", url: targetUrl } });
    if (r.status !== 201) fail(`creating ${body.name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const extract = await create({ name: `extract-${suffix}`, schedule: { cron: "30 2 * * *" } });
  const transform = await create({ name: `transform-${suffix}`, depends_on: [extract.id] });
  const aggregate = await create({ name: `aggregate-${suffix}`, depends_on: [extract.name] });
  const report = await create({ name: `report-${suffix}`, depends_on: [transform.name, aggregate.name] });
  if (JSON.stringify(report.depends_on) !== JSON.stringify([transform.id, aggregate.id])) fail(`depends_on is stored as ids: ${JSON.stringify(report.depends_on)}`);
  const triggered = await call("POST", `/v1/jobs/${extract.id}/trigger`, {});
  if (triggered.status !== 202) fail(`triggering extract: HTTP ${triggered.status} ${JSON.stringify(triggered.body)}`);
  // Every run of the diamond for this instant has the trigger's key.
  const runKey = triggered.body.id.slice(triggered.body.id.indexOf(".") + 1);
  const runOf = (job) => `${job.id}.${runKey}`;
  const until = Date.now() + 60_000;
  let reportRun = null;
  while (reportRun?.state !== "SUCCEEDED") {
    if (Date.now() > until) fail(`report's run ${runOf(report)} did not succeed within 60 s: ${JSON.stringify(reportRun)}`);
    const r = await call("GET", `/v1/runs/${runOf(report)}`);
    if (r.status === 200) reportRun = r.body;
    else if (r.status !== 404) fail(`reading report's run: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    if (reportRun && !["QUEUED", "RUNNING", "RETRYING", "SUCCEEDED"].includes(reportRun.state)) fail(`report's run ended ${reportRun.state}: ${reportRun.reason}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }

  await page.goto(`${base}/ui/index.html#/jobs/${report.id}`);
  await page.waitForSelector("#graph svg");
  const nodes = await page.locator("#graph a.node").evaluateAll((as) => as.map((a) => ({ job: a.dataset.job, href: a.getAttribute("href"), cls: a.getAttribute("class"), text: a.textContent })));
  const edges = await page.locator("#graph path.edge").evaluateAll((ps) => ps.map((p) => `${p.dataset.from}>${p.dataset.to}`).sort());
  if (nodes.length !== 4) fail(`the graph shows 4 nodes: ${JSON.stringify(nodes)}`);
  if (edges.length !== 4) fail(`the graph shows 4 edges: ${JSON.stringify(edges)}`);
  const expected = [[extract, transform], [extract, aggregate], [transform, report], [aggregate, report]].map(([a, b]) => `${a.id}>${b.id}`).sort();
  if (JSON.stringify(edges) !== JSON.stringify(expected)) fail(`the graph's edges: ${JSON.stringify(edges)}`);
  for (const job of [extract, transform, aggregate, report]) {
    const node = nodes.find((n) => n.job === job.id);
    if (!node || node.href !== `#/jobs/${job.id}` || !node.text.includes(job.name) || !/\bSUCCEEDED\b/.test(node.cls)) fail(`the node of ${job.name}: ${JSON.stringify(node)}`);
  }
  if (!nodes.find((n) => n.job === report.id).text.includes(`after ${transform.name}, ${aggregate.name}`)) fail("report's node says what it runs after");
  // Parents sit left of their children.
  const left = async (job) => (await page.locator(`#graph a.node[data-job="${job.id}"] rect.box`).boundingBox()).x;
  const [xe, xt, xa, xr] = [await left(extract), await left(transform), await left(aggregate), await left(report)];
  if (!(xe < xt && xt === xa && xa < xr)) fail(`the graph's layers: ${xe} ${xt} ${xa} ${xr}`);
  await shot("06-job-graph-diamond");

  // Report's run links to its parents' runs for the same instant, and to the run its new child
  // never had (the child came after the instant ended).
  const audit = await create({ name: `audit-${suffix}`, depends_on: [report.id] });
  await page.goto(`${base}/ui/index.html#/runs/${runOf(report)}`);
  await page.waitForSelector("#workflow");
  for (const parent of [transform, aggregate]) {
    const link = page.locator(`#workflow a[href="#/runs/${runOf(parent)}"]`);
    if ((await link.count()) !== 1 || (await link.innerText()) !== parent.name) fail(`report's run links to ${parent.name}'s run`);
    const row = await page.locator(`#workflow tr[data-run="${runOf(parent)}"]`).innerText();
    if (!row.includes("parent") || !row.includes("SUCCEEDED")) fail(`${parent.name}'s row: ${row}`);
  }
  const child = await page.locator(`#workflow tr[data-run="${runOf(audit)}"]`).innerText();
  if (!child.includes(audit.name) || !child.includes("child") || !child.includes("not run yet")) fail(`the new child's row: ${child}`);
  if ((await page.locator("#workflow tbody tr").count()) !== 3) fail("report's run links to its two parents and its child only");
  await shot("07-run-workflow");
  // And a parent's run page follows the link to the child's run.
  await page.click(`#workflow a[href="#/runs/${runOf(transform)}"]`);
  await page.locator(`#workflow a[href="#/runs/${runOf(report)}"]`, { hasText: report.name }).waitFor({ timeout: 15_000 });

  // The load forecast on the jobs page: 24 jobs at the top of every hour (from two hours on, so
  // none fires during the test) make peaks; 6 with a 600 s flexible window spread theirs.
  const later = new Date(Date.now() + 2 * 3600_000).toISOString();
  for (let k = 0; k < 24; k += 1) {
    const made = await call("POST", "/v1/jobs", { name: `hourly-${k}-${Date.now()}`, schedule: { cron: "0 * * * *", start_at: later }, target: { type: "http", url: targetUrl } });
    if (made.status !== 201) fail(`creating an hourly job: ${made.status} ${JSON.stringify(made.body)}`);
  }
  for (let k = 0; k < 6; k += 1) {
    const made = await call("POST", "/v1/jobs", { name: `spread-${k}-${Date.now()}`, schedule: { cron: "30 * * * *", start_at: later }, flexible_window_s: 600, target: { type: "http", url: targetUrl } });
    if (made.status !== 201) fail(`creating a flexible job: ${made.status} ${JSON.stringify(made.body)}`);
  }
  const forecast = (await call("GET", "/v1/forecast")).body;
  if (!(forecast.peak_minutes >= 20) || forecast.peaks[0].runs < 24) fail(`the forecast's peaks: ${JSON.stringify(forecast.peaks[0])}`);
  await page.goto(`${base}/ui/index.html#/`);
  await page.waitForSelector("#forecast svg path.peak");
  const peakBars = await page.locator("#forecast svg path.peak").getAttribute("d");
  if (!peakBars || (peakBars.match(/M/g) || []).length < 20) fail(`the chart highlights the peak minutes: ${peakBars}`);
  const peakList = await page.locator("#forecast .peaks").innerText();
  if (!peakList.includes("hourly-")) fail(`the peak minutes name their jobs: ${peakList}`);
  await page.locator("#forecast").scrollIntoViewIfNeeded();
  await shot("08-jobs-forecast");

  // A concurrency group of one: while a slow run holds its slot, the next run's page says it
  // waits for the group.
  const slow = http.createServer((req, res) => { req.resume(); setTimeout(() => { res.writeHead(200); res.end("{}"); }, 12_000); });
  await new Promise((resolve) => slow.listen(0, "127.0.0.1", resolve));
  const slowUrl = `http://127.0.0.1:${slow.address().port}/hook`;
  const pool = `pool-${Date.now()}`;
  const put = await call("PUT", `/v1/groups/${pool}`, { max_running: 1 });
  if (put.status !== 200) fail(`creating the group: ${put.status} ${JSON.stringify(put.body)}`);
  const member = async (name, url) => {
    const made = await call("POST", "/v1/jobs", { name: `${name}-${Date.now()}`, schedule: { cron: "0 0 1 1 *" }, group: pool, target: { type: "http", url } });
    if (made.status !== 201) fail(`creating ${name}: ${made.status} ${JSON.stringify(made.body)}`);
    return made.body;
  };
  const holder = await member("holder", slowUrl);
  const waiter = await member("waiter", targetUrl);
  const holding = (await call("POST", `/v1/jobs/${holder.id}/trigger`, {})).body;
  for (let i = 0; i < 100 && (await call("GET", `/v1/runs/${holding.id}`)).body.state !== "RUNNING"; i += 1) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const waiting = (await call("POST", `/v1/jobs/${waiter.id}/trigger`, {})).body;
  await page.goto(`${base}/ui/index.html#/runs/${waiting.id}`);
  await page.locator("#waiting", { hasText: `its group ${pool} is full: 1 of 1 running` }).waitFor({ timeout: 15_000 });
  await shot("09-run-waiting-for-group");
  slow.close();

  // One-off exceptions on the page of a job due every hour: skip its next two instants (the list
  // of skips and the next runs show them), take one back, pause it with a reason until an hour
  // ahead (a refused pause says why, naming the field; the banner says the pause), and resume it
  // skipping what the pause covered. Not within 20 s of the hour, so that no instant skipped or
  // listed comes due meanwhile.
  const toHour = 3600_000 - (Date.now() % 3600_000);
  if (toHour < 20_000) await new Promise((resolve) => setTimeout(resolve, toHour + 2000));
  const hourly = await create({ name: `exceptions-${suffix}`, schedule: { cron: "0 * * * *" } });
  await page.goto(`${base}/ui/index.html#/jobs/${hourly.id}`);
  await page.waitForSelector("#skip-form");
  if (await page.locator("#pause-banner").count()) fail("a job that runs shows no pause banner");
  if (await page.locator("#skips").count()) fail("a job without skips lists none");
  if (await page.locator("#remaining").count()) fail("a job without max_runs says nothing of runs remaining");
  if (await page.locator("#pause-form").isVisible()) fail("the pause form stays closed until Pause is pressed");
  if ((await page.inputValue("#skip-next")) !== "1") fail("Skip next asks for 1 instant unless told");
  await page.fill("#skip-next", "2");
  await page.click("#skip-button");
  await page.locator("#skips [data-skip]").nth(1).waitFor({ timeout: 15_000 });
  const skipItems = page.locator("#skips [data-skip]");
  const skipped = await skipItems.evaluateAll((ls) => ls.map((l) => l.dataset.skip));
  if (skipped.length !== 2) fail(`the summary lists the 2 skips: ${JSON.stringify(skipped)}`);
  const viewed = (await call("GET", `/v1/jobs/${hourly.id}`)).body;
  if (JSON.stringify((viewed.skips || []).map((k) => k.at)) !== JSON.stringify(skipped)) fail(`the skips listed are the job's: ${JSON.stringify(viewed.skips)}`);
  if (Date.parse(skipped[1]) - Date.parse(skipped[0]) !== 3600_000 || Date.parse(skipped[0]) - Date.now() > 3600_000) fail(`the skips are the next two hours: ${skipped}`);
  const nextRuns = () => page.locator("#next-runs li").evaluateAll((ls) => ls.map((l) => ({ at: l.dataset.at, skipped: l.dataset.skipped ?? null, text: l.textContent })));
  let next = await nextRuns();
  if (next.length !== 5 || next[0].skipped !== "true" || next[1].skipped !== "true" || next.slice(2).some((n) => n.skipped !== null)) fail(`the next runs mark the first two skipped: ${JSON.stringify(next)}`);
  if (!next[0].text.includes("skipped") || Date.parse(next[0].at) !== Date.parse(skipped[0])) fail(`a skipped next run says so: ${JSON.stringify(next[0])}`);
  if ((await page.locator("#next-runs [data-skipped] s").count()) !== 2) fail("the skipped next runs are struck through");
  // Take back the second: the first stays skipped.
  await page.click(`#skips [data-skip="${skipped[1]}"] button[data-unskip]`);
  await skipItems.nth(1).waitFor({ state: "detached", timeout: 15_000 });
  if ((await skipItems.count()) !== 1) fail(`taking back one skip leaves one: ${await skipItems.count()}`);
  if ((await skipItems.getAttribute("data-skip")) !== skipped[0]) fail("taking back one skip leaves the other");
  if (JSON.stringify((await call("GET", `/v1/jobs/${hourly.id}`)).body.skips.map((k) => k.at)) !== JSON.stringify([skipped[0]])) fail("the API took the skip back");
  next = await nextRuns();
  if (next[0].skipped !== "true" || next[1].skipped !== null) fail(`the next runs after taking one back: ${JSON.stringify(next)}`);
  if (!(await page.locator("#unskip-all").isVisible())) fail("the skips have a take back all");

  // The pause form: a reason and an until typed in the browser's time, sent in UTC.
  await page.click('button[data-act="pause"]');
  await page.waitForSelector("#pause-form", { state: "visible" });
  const localAhead = (hours) => page.evaluate((h) => {
    const d = new Date(Date.now() + h * 3600_000);
    d.setMinutes(d.getMinutes() - d.getTimezoneOffset());
    return d.toISOString().slice(0, 16);
  }, hours);
  await page.fill("#pause-reason", "maintenance window");
  // Past the 366 days a pause may last: the API refuses it, and the page says so naming `until`.
  await page.fill("#pause-until", await localAhead(400 * 24));
  await page.click('#pause-form button[type="submit"]');
  await page.locator("#action.error", { hasText: "until:" }).waitFor({ timeout: 15_000 });
  if (!/366 days/.test(await page.locator("#action").innerText())) fail(`a refused pause says why: ${await page.locator("#action").innerText()}`);
  if ((await call("GET", `/v1/jobs/${hourly.id}`)).body.paused) fail("a refused pause pauses nothing");
  if ((await page.inputValue("#pause-reason")) !== "maintenance window") fail("a refused pause keeps what was typed");
  await page.fill("#pause-until", await localAhead(1));
  const pausedAt = Date.now();
  await page.click('#pause-form button[type="submit"]');
  await page.waitForSelector("#pause-banner", { timeout: 15_000 });
  const banner = await page.locator("#pause-banner").innerText();
  if (!banner.includes("maintenance window") || !banner.includes("Paused since") || !banner.includes("by browser") || !banner.includes("resumes by itself at")) fail(`the pause banner: ${banner}`);
  const paused = (await call("GET", `/v1/jobs/${hourly.id}`)).body;
  if (!paused.paused || paused.pause?.reason !== "maintenance window" || paused.pause?.by !== "browser") fail(`the job's pause: ${JSON.stringify(paused.pause)}`);
  // The until typed is the minute an hour ahead, in the browser's time zone.
  const lasts = Date.parse(paused.pause.until) - pausedAt;
  if (!(lasts > 3500_000 && lasts <= 3600_000)) fail(`the pause lasts until an hour ahead: ${paused.pause.until} (${lasts} ms)`);
  if (await page.locator("#pause-form").isVisible()) fail("the pause form closes once the job is paused");
  if ((await page.locator("#skips [data-skip]").count()) !== 1) fail("the skip stays through the pause");
  await shot("job-exceptions");

  // Resume, skipping the instants the pause covered.
  if ((await page.inputValue("#resume-catchup")) !== "skip") fail("resume skips what the pause covered unless told");
  const [resumed] = await Promise.all([
    page.waitForRequest((r) => r.url().endsWith(`/v1/jobs/${hourly.id}/resume`) && r.method() === "POST"),
    page.click('#pause-banner button[data-act="resume"]'),
  ]);
  if (JSON.stringify(resumed.postDataJSON()) !== JSON.stringify({ catchup: "skip" })) fail(`the resume's body: ${resumed.postData()}`);
  await page.locator("#pause-banner").waitFor({ state: "detached", timeout: 15_000 });
  if ((await call("GET", `/v1/jobs/${hourly.id}`)).body.paused) fail("the job runs again after Resume");
  await page.waitForSelector('button[data-act="pause"]');

  // A schedule with max_runs says how many runs remain.
  const limited = await create({ name: `limited-${suffix}`, schedule: { cron: "0 0 1 1 *", max_runs: 3 } });
  if (limited.remaining_runs !== 3) fail(`the view's remaining_runs: ${JSON.stringify(limited)}`);
  await page.goto(`${base}/ui/index.html#/jobs/${limited.id}`);
  const remaining = await page.locator("#remaining").innerText({ timeout: 15_000 });
  if (!remaining.includes("3 runs remain (max_runs 3)")) fail(`the summary says the runs that remain: ${remaining}`);

  // DST, on the real clock: the next spring change in New York (within the year ahead, whatever
  // the day) has no 02:30, so a job at 02:30 there is warned of it, and its page lists the
  // warning under the schedule. A job on the same cron that starts two days before that change
  // has the moved instant (03:00, the gap's end) among its next runs, badged, the change's words
  // on hover.
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  const newYork = { cron: "30 2 * * *", timezone: "America/New_York" };
  const dst = await create({ name: `dst-${suffix}`, schedule: newYork });
  const gap = (dst.warnings || []).find((w) => /^DST: \d{4}-\d\d-\d\d: 02:30 does not exist in America\/New_York; runs at 03:00$/.test(w));
  if (!gap) fail(`the view warns of the next spring change: ${JSON.stringify(dst.warnings)}`);
  await page.goto(`${base}/ui/index.html#/jobs/${dst.id}`);
  const warned = await page.locator("#schedule #schedule-warnings").innerText({ timeout: 15_000 });
  if (!warned.includes("does not exist in America/New_York") || !warned.includes(gap)) fail(`the job page lists the warning under the schedule: ${warned}`);
  if ((await page.locator("#schedule-warnings").getAttribute("aria-label")) !== "Schedule warnings") fail("the warnings are labelled for a screen reader");
  if ((await page.locator("pre", { hasText: gap }).count()) !== 0) fail("the warnings are not part of the definition shown");
  const changeDay = gap.slice("DST: ".length, "DST: ".length + 10);
  const startAt = new Date(Date.parse(`${changeDay}T00:00:00Z`) - 2 * 86400_000).toISOString().replace(/\.\d{3}Z$/, "Z");
  const soon = await create({ name: `dst-soon-${suffix}`, schedule: { ...newYork, start_at: startAt } });
  await page.goto(`${base}/ui/index.html#/jobs/${soon.id}`);
  await page.waitForSelector("#next-runs li", { timeout: 15_000 });
  const upcoming = await page.locator("#next-runs li").evaluateAll((ls) => ls.map((l) => ({ at: l.dataset.at, dst: l.dataset.dst ?? null,
    text: l.textContent, title: l.querySelector(".tag.dst")?.title ?? null })));
  const moved = upcoming[2];
  if (upcoming.length !== 5 || upcoming.filter((u) => u.dst).length !== 1 || moved.dst !== "moved") fail(`the third of the next runs is the moved one: ${JSON.stringify(upcoming)}`);
  if (!moved.text.includes(`${changeDay}T03:00:00-04:00`) || !moved.text.includes("DST moved")) fail(`the moved instant runs at 03:00, badged: ${JSON.stringify(moved)}`);
  if (moved.title !== gap.slice("DST: ".length)) fail(`the badge's title is the change's words: ${JSON.stringify(moved)}`);
  if (!(await page.locator("#schedule-warnings").innerText()).includes(gap)) fail("the job starting before the change is warned of it too");
  await page.locator("#schedule").scrollIntoViewIfNeeded();
  await shot("job-dst-warning");

  // A union schedule: its page says it in words and draws its next runs.
  const union = await create({ name: `union-${suffix}`, schedule: { any: [{ cron: "0 9 * * 1-5", timezone: "America/New_York" }, { cron: "0 13 1 * *" }] } });
  const described = "every Monday to Friday at 09:00 America/New_York, and on day 1 of every month at 13:00 UTC";
  if (union.schedule_description !== described) fail(`the union's description: ${union.schedule_description}`);
  await page.goto(`${base}/ui/index.html#/jobs/${union.id}`);
  const unionSchedule = await page.locator("#schedule").innerText({ timeout: 15_000 });
  if (!unionSchedule.includes(described)) fail(`the job page shows the union's description: ${unionSchedule}`);
  if ((await page.locator("#next-runs li").count()) !== 5) fail("the union's next runs are listed");
  await shot("job-union");
  if (pageErrors.length) fail(`the DST and union pages raised: ${pageErrors.join("; ")}`);

  // A named calendar: the job naming it links to it from its schedule; the calendar's page lists
  // its holidays and the job with the version it follows; the calendars page lists it.
  const desk = `desk-${suffix}`;
  const putCalendar = await call("PUT", `/v1/calendars/${desk}`, { description: "desk holidays", timezone: "America/New_York",
    holidays: ["2031-12-24", { from: "2031-12-29", to: "2031-12-31" }] });
  if (putCalendar.status !== 201) fail(`creating the calendar: HTTP ${putCalendar.status} ${JSON.stringify(putCalendar.body)}`);
  const onDesk = await create({ name: `on-desk-${suffix}`, schedule: { cron: "0 9 * * *", timezone: "America/New_York", calendar: { name: desk } } });
  await page.goto(`${base}/ui/index.html#/jobs/${onDesk.id}`);
  const link = page.locator(`#schedule-calendars a[href="#/calendars/${desk}"]`);
  await link.waitFor({ timeout: 15_000 });
  if (!(await page.locator("#schedule-calendars").innerText()).includes("v1")) fail("the job page says which version of the calendar it follows");
  await link.click();
  await page.locator("#holidays li").first().waitFor({ timeout: 15_000 });
  const holidays = await page.locator("#holidays li").allInnerTexts();
  if (holidays.length !== 2 || holidays[1] !== "2031-12-29 to 2031-12-31") fail(`the calendar's holidays, a range among them: ${JSON.stringify(holidays)}`);
  const follower = await page.locator(`#calendar-jobs tr[data-job="${onDesk.id}"]`).innerText();
  if (!follower.includes(`on-desk-${suffix}`) || !follower.includes("1")) fail(`the calendar lists the job that names it: ${follower}`);
  await shot("calendar");
  await page.goto(`${base}/ui/index.html#/calendars`);
  await page.locator(`#calendars tr[data-calendar="${desk}"]`).waitFor({ timeout: 15_000 });
  const listedRow = await page.locator(`#calendars tr[data-calendar="${desk}"]`).innerText();
  if (!listedRow.includes("desk holidays")) fail(`the calendars page lists it: ${listedRow}`);
  if (pageErrors.length) fail(`the calendar pages raised: ${pageErrors.join("; ")}`);

  // The audit trail: the job page shows its own (its creation, by the dashboard's key's owner);
  // the audit page lists every change, filtered by action.
  await page.goto(`${base}/ui/index.html#/jobs/${onDesk.id}`);
  await page.locator('#job-trail tr[data-action="job.create"]').waitFor({ timeout: 15_000 });
  const creation = await page.locator('#job-trail tr[data-action="job.create"]').innerText();
  if (!creation.includes("browser")) fail(`the job's trail names who created it: ${creation}`);
  await page.goto(`${base}/ui/index.html#/audit?action=calendar.put`);
  await page.locator('#audit tr[data-action="calendar.put"]').first().waitFor({ timeout: 15_000 });
  const actions = await page.locator("#audit tr[data-action]").evaluateAll((rows) => rows.map((r) => r.dataset.action));
  if (!actions.length || actions.some((a) => a !== "calendar.put")) fail(`the audit page, filtered by action: ${JSON.stringify(actions)}`);
  await shot("audit");
  if (pageErrors.length) fail(`the audit pages raised: ${pageErrors.join("; ")}`);

  // The instant ledger of the minutely job: wait (bounded) until one of its instants has come
  // and has a run (the tick claims a minute's instants ahead of it), then read the day strip on
  // its job page, which ends now.
  const outcomes = ["ran", "skipped", "missed", "pending"];
  const ranBy = Date.now() + 90_000;
  let ran = null;
  while (!ran) {
    if (Date.now() > ranBy) fail("no instant of the minutely job ran within 90 s");
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
    const r = await call("GET", `/v1/jobs/${minutely.body.id}/instants?from=${minutelyFrom}&to=${now}`);
    if (r.status !== 200) fail(`reading the minutely job's ledger: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    ran = r.body.instants.find((e) => e.outcome === "ran" && e.run_id);
    if (!ran) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  await page.goto(`${base}/ui/index.html#/jobs/${minutely.body.id}`);
  await page.waitForSelector("#ledger .legend", { timeout: 30_000 });
  const cells = await page.locator("#ledger .strip [data-outcome]").evaluateAll((cs) => cs.map((c) => ({
    outcome: c.dataset.outcome, at: c.dataset.at, href: c.getAttribute("href"), title: c.getAttribute("title") })));
  if (cells.length < 1) fail("the ledger shows a cell per instant");
  const strange = cells.find((c) => !outcomes.includes(c.outcome) || Number.isNaN(Date.parse(c.at)));
  if (strange) fail(`every cell has an outcome and an instant: ${JSON.stringify(strange)}`);
  // Every minute of the last 24 hours, read over more than one page, in time order.
  if (cells.length < 1439 || cells.length > 1441) fail(`the strip of a minutely job has a cell per minute of the day: ${cells.length}`);
  if (cells.some((c, i) => i > 0 && Date.parse(c.at) <= Date.parse(cells[i - 1].at))) fail("the cells are in time order");
  const legend = Object.fromEntries(await page.locator("#ledger .legend [data-count]").evaluateAll((ns) => ns.map((n) => [n.dataset.count, Number(n.textContent)])));
  for (const outcome of outcomes) {
    const n = cells.filter((c) => c.outcome === outcome).length;
    if (legend[outcome] !== n) fail(`the legend counts ${legend[outcome]} ${outcome}, the strip ${n}: ${JSON.stringify(legend)}`);
  }
  if (Object.values(legend).reduce((a, b) => a + b, 0) !== cells.length) fail(`the legend counts every cell: ${JSON.stringify(legend)}`);
  const ranCell = cells.find((c) => c.at === ran.at);
  if (!ranCell || ranCell.outcome !== "ran" || ranCell.href !== `#/runs/${ran.run_id}`) fail(`the instant that ran links to its run: ${JSON.stringify(ranCell)} ${JSON.stringify(ran)}`);
  // The day before the job began: missed, said so on hover and in the table below.
  const before = cells.find((c) => c.outcome === "missed");
  if (!before || !before.title.includes("before the schedule began")) fail(`a cell before the job began says why: ${JSON.stringify(before)}`);
  const why = await page.locator("#ledger table.why").innerText();
  if (!why.includes("before the schedule began") || !/\(14\d\d instants\)/.test(why)) fail(`the table says why the day before the job did not run: ${why}`);
  await page.locator("#ledger").scrollIntoViewIfNeeded();
  await shot("job-ledger");
  await page.click(`#ledger .strip a[href="#/runs/${ran.run_id}"]`);
  await page.locator("h1 .state").waitFor({ timeout: 15_000 });
  if (!page.url().endsWith(`#/runs/${ran.run_id}`)) fail(`a cell opens its run's page: ${page.url()}`);
  console.log(`browser test passed; screenshots in ${shots}`);
} finally {
  await browser.close();
  target.close();
  ticking.close();
  clearTimeout(deadline);
}
