// Acting from the console in a real browser (issue #28 items 3 and 6):
// headless Debian chromium (playwright-core, the machine's browser) logs
// in from a rollout's page, pauses and resumes the rollout from the page,
// sees the model's refusal when a stale second tab pauses again, and
// approves; a third tab, loaded before the approval, must follow the
// rollout to `completed` without reloading (`/live.js`). Prints one JSON
// line per step: {"step", "ok", "detail"}; exit 0 when every step ran
// (the caller judges `ok`), 2 when the browser could not run.
// Usage: node actions.mjs BASE_URL TOKEN ROLLOUT SCREENSHOT_DIR
import { launch } from "./browser.mjs";

const [base, token, rollout, shots] = process.argv.slice(2);
if (!base || !token || !rollout) {
  console.error("usage: node actions.mjs BASE_URL TOKEN ROLLOUT [SCREENSHOT_DIR]");
  process.exit(2);
}
const STEP_MS = 60000;
const page_url = `${base}/rollouts/${rollout}`;
const report = (step, ok, detail) => console.log(JSON.stringify({ step, ok, detail }));
const statusText = async (p) => (await p.locator("#rollout-status").innerText()).trim();

const browser = await launch();
try {
  const context = await browser.newContext();
  context.setDefaultTimeout(STEP_MS);
  const a = await context.newPage();

  // Log in from the rollout's page, and come back to it.
  await a.goto(page_url);
  await a.locator("#login-to-act a").click();
  await a.locator("#token").fill(token);
  await Promise.all([a.waitForURL(page_url), a.locator("#login button[type=submit]").click()]);
  const offered = await a.locator("#rollout-actions button").allInnerTexts();
  report("login", offered.includes("approve") && offered.includes("pause"), { offered });
  if (shots) await a.screenshot({ path: `${shots}/rollout-actions.png`, fullPage: true });

  // A second tab on the same page: its pause button goes stale.
  const b = await context.newPage();
  await b.goto(page_url);

  // Pause from the page.
  await Promise.all([a.waitForURL(page_url), a.locator("#rollout-actions button[value=pause]").click()]);
  await a.locator("#rollout-actions button[value=resume]").waitFor();
  report("pause", (await statusText(a)).includes("paused"), { status: await statusText(a) });

  // The stale tab pauses again: the model refuses, in its words.
  await b.locator("#rollout-actions button[value=pause]").click();
  await b.locator("#refusal").waitFor();
  const refusal = (await b.locator("#refusal").innerText()).trim();
  report("refusal", refusal.startsWith("The controller refused:"), { refusal });
  if (shots) await b.screenshot({ path: `${shots}/refusal.png`, fullPage: true });

  // A third tab follows the rollout live from here on.
  const c = await context.newPage();
  await c.goto(page_url);
  await c.evaluate(() => { window.fleetweftMarker = 42; });
  const before = await statusText(c);

  // Resume from the page: the third tab sees it without reloading.
  await Promise.all([a.waitForURL(page_url), a.locator("#rollout-actions button[value=resume]").click()]);
  await c.waitForFunction((was) => {
    const s = document.querySelector("#rollout-status");
    return s && s.innerText.trim() !== was;
  }, before, { timeout: STEP_MS });
  report("resume", !(await statusText(a)).includes("paused"), { before, after: await statusText(c) });

  // Approve: the third tab reaches `completed` without reloading.
  await Promise.all([a.waitForURL(page_url), a.locator("#rollout-actions button[value=approve]").click()]);
  await c.waitForFunction(() => {
    const s = document.querySelector("#rollout-status");
    return s && s.innerText.includes("completed");
  }, null, { timeout: STEP_MS });
  const marker = await c.evaluate(() => window.fleetweftMarker);
  report("live", marker === 42, { status: await statusText(c), marker_kept: marker === 42 });
  if (shots) await c.screenshot({ path: `${shots}/rollout-completed-live.png`, fullPage: true });
} catch (e) {
  report("error", false, String(e));
} finally {
  await browser.close();
}
process.exit(0);
