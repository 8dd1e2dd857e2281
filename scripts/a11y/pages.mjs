// Console pages in headless Debian chromium, measured (issue #28 item 6):
// for each PATH, the time from navigation to the load event, the bytes of
// the page, and a screenshot (OUTDIR/NAME.png, NAME from the path); then,
// when a rollout page is among them, whether it follows the log without
// reloading (a marker set in the page survives while its #plan changes).
// Prints one JSON line per page and one for the live check.
// Usage: node pages.mjs BASE_URL OUTDIR PATH...
import { launch } from "./browser.mjs";

const [base, outdir, ...paths] = process.argv.slice(2);
if (!base || !outdir || paths.length === 0) {
  console.error("usage: node pages.mjs BASE_URL OUTDIR PATH...");
  process.exit(2);
}
const name = (p) => (p === "/" ? "overview" : p.slice(1).replace(/[^A-Za-z0-9]+/g, "-"));
const browser = await launch();
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  for (const path of paths) {
    try {
      const started = Date.now();
      const response = await page.goto(base + path, { waitUntil: "load", timeout: 30000 });
      const loadMs = Date.now() - started;
      const bytes = (await response.body()).length;
      await page.screenshot({ path: `${outdir}/${name(path)}.png` });
      console.log(JSON.stringify({ path, status: response.status(), load_ms: loadMs, bytes }));
    } catch (e) {
      failed = true;
      console.log(JSON.stringify({ path, error: String(e) }));
    }
  }
  const rollout = paths.find((p) => /^\/rollouts\/r\d+$/.test(p));
  if (rollout) {
    await page.goto(base + rollout, { waitUntil: "load" });
    await page.evaluate(() => { window.fleetweftMarker = 42; });
    const before = await page.locator("#plan").innerText();
    const started = Date.now();
    let changed = false;
    try {
      await page.waitForFunction((was) => {
        const plan = document.querySelector("#plan");
        return plan && plan.innerText !== was;
      }, before, { timeout: 30000 });
      changed = true;
    } catch (e) { /* reported below */ }
    const marker = await page.evaluate(() => window.fleetweftMarker);
    const after = await page.locator("#plan").innerText();
    const progress = (t) => (t.split("\n").find((l) => l.startsWith("progress")) || "").trim();
    console.log(JSON.stringify({ live: rollout, changed, reloaded: marker !== 42,
      waited_ms: Date.now() - started, before: progress(before), after: progress(after) }));
    await page.screenshot({ path: `${outdir}/${name(rollout)}-live.png` });
  }
} finally {
  await browser.close();
}
process.exit(failed ? 2 : 0);
