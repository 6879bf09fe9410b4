// The dashboard end to end in headless Chromium: open it, sign in with an API key, create a job
// through the API, see it listed, trigger it with the page's button, see the run reach SUCCEEDED
// and its attempt detail. Screenshots go to $SCREENSHOTS. Usage:
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
const deadline = setTimeout(() => { console.error("browser test: timed out after 180 s"); process.exit(1); }, 180_000);

function fail(message) { throw new Error(message); }

// The job's target: a real HTTP server on loopback that answers 200.
let hits = 0;
const target = http.createServer((req, res) => { hits += 1; req.resume(); req.on("end", () => { res.writeHead(200, { "Content-Type": "application/json" }); res.end('{"ok":true}'); }); });
await new Promise((resolve) => target.listen(0, "127.0.0.1", resolve));
const targetUrl = `http://127.0.0.1:${target.address().port}/hook`;

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

  await page.reload();
  const row = page.locator(`tr[data-job="${job.id}"]`);
  await row.waitFor({ timeout: 15_000 });
  const rowText = await row.innerText();
  if (!rowText.includes("every day at 02:30 America/New_York")) fail(`the list shows the schedule in words: ${rowText}`);
  await page.fill("#search", name);
  await shot("02-jobs-list");

  await row.locator("a").click();
  await page.waitForSelector('button[data-act="trigger"]');
  await shot("03-job-page");
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
  await shot("05-job-page-phone");
  console.log(`browser test passed; screenshots in ${shots}`);
} finally {
  await browser.close();
  target.close();
  clearTimeout(deadline);
}
