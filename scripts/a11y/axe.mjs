// Accessibility check of console pages (issue #28 item 6): loads each
// page in headless Debian chromium (playwright-core, the machine's
// browser, never a downloaded one), runs axe-core's WCAG 2.x A and AA
// rules on it, and prints one JSON line per page:
//   {"path", "violations": [{"id", "impact", "help", "nodes": [target...]}]}
// Usage: node axe.mjs BASE_URL PATH...   (exit 0 once every page was
// checked; 2 when a page could not be loaded or checked).
import { launch } from "./browser.mjs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axePath = require.resolve("axe-core/axe.min.js");
const [base, ...paths] = process.argv.slice(2);
if (!base || paths.length === 0) {
  console.error("usage: node axe.mjs BASE_URL PATH...");
  process.exit(2);
}
const browser = await launch();
let failed = false;
try {
  const page = await browser.newPage();
  for (const path of paths) {
    try {
      const started = Date.now();
      await page.goto(base + path, { waitUntil: "load", timeout: 30000 });
      const loadMs = Date.now() - started;
      await page.addScriptTag({ path: axePath });
      const result = await page.evaluate(() =>
        // eslint-disable-next-line no-undef
        axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } }));
      const violations = result.violations.map((v) => ({
        id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
      }));
      console.log(JSON.stringify({ path, load_ms: loadMs, violations }));
    } catch (e) {
      failed = true;
      console.log(JSON.stringify({ path, error: String(e) }));
    }
  }
} finally {
  await browser.close();
}
process.exit(failed ? 2 : 0);
