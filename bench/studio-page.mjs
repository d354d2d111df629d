#!/usr/bin/env node
// Issue 29: the studio as a person sees it — a keystroke in the editor → the page shows the refreshed resource — on
// the example clinic with a 1,000-row patient source (generated: bench/_patients-fixture.mjs), in Debian's Chromium
// (playwright-core; CHROME_PATH, else chromium on the PATH). Each edit types one digit into the `country` of the
// patient map, so the page waits its 150 ms debounce, the server compiles the text again and maps, validates and tells
// every sampled row again, and the page renders the totals, a page of 50 rows and the selected row. Measured in the
// page (keydown → the selected row's resource shows the new value), median and worst; the server's own `elapsedMs`
// is bench/studio-refresh.mjs's. Needs the build (`npm run build`: dist/studio/ holds the server and the page).
// Usage: node bench/studio-page.mjs [rows=1000] [edits=30]
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { findChromium } from '../scripts/report-screenshot.mjs';
import { HEADER, loadAvg, median, patientRow } from './_patients-fixture.mjs';

const rows = Number(process.argv[2] ?? 1000);
const edits = Number(process.argv[3] ?? 30);
const root = fileURLToPath(new URL('..', import.meta.url));
const { startStudio } = await import(join(root, 'dist/studio/server.js'));
const executablePath = findChromium();
if (!executablePath) throw new Error('Chromium not found: install it with apt-get install chromium (or set CHROME_PATH)');

const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-studio-page-'));
cpSync(join(root, 'examples/clinic'), dir, { recursive: true, filter: (src) => !src.includes('.care-etl') });
writeFileSync(join(dir, 'data/patients.csv'), `${[HEADER, ...Array.from({ length: rows }, (_, i) => patientRow(i + 1))].map((r) => r.join(',')).join('\n')}\n`);

const studio = await startStudio({ mappingFile: join(dir, 'mapping.yaml'), sampleSize: rows });
const browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--proxy-server=http://127.0.0.1:9'] });
const round = (x) => Math.round(x * 10) / 10;

/** In the page: a promise (window.benchWatch) of the ms from the next keydown to the moment the selected row's resource contains `want`. */
const WATCH = `(want) => void (window.benchWatch = new Promise((resolve) => {
  let t0;
  addEventListener('keydown', () => (t0 ??= performance.now()), { capture: true, once: true });
  const pre = () => document.querySelector('[data-testid=row-resource] pre');
  const check = () => {
    if (t0 !== undefined && pre()?.textContent.includes(want)) (observer.disconnect(), resolve(performance.now() - t0));
  };
  const observer = new MutationObserver(check);
  observer.observe(document.getElementById('results'), { subtree: true, childList: true, characterData: true });
}))`;

try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(studio.url);
  await page.locator('[data-testid=results][data-state=idle]').waitFor({ timeout: 60_000 });
  const line = page.locator('.cm-line').filter({ hasText: '"country": "US"' });
  await line.click();
  await page.keyboard.press('End');
  for (let i = 0; i < '" }]'.length; i++) await page.keyboard.press('ArrowLeft'); // after `US`
  const ms = [];
  let country = 'US';
  for (let i = 1; i <= edits; i++) {
    const digit = String(i % 10);
    country += digit;
    await page.evaluate(`(${WATCH})(${JSON.stringify(`"country": "${country}"`)})`);
    await page.keyboard.type(digit);
    ms.push(await page.evaluate('window.benchWatch'));
    await page.locator('[data-testid=results][data-state=idle]').waitFor();
  }
  const totals = await page.locator('[data-testid=totals]').textContent();
  console.log(
    JSON.stringify({
      bench: 'studio-page',
      rows,
      edits,
      totals,
      keystrokeToResultsMs: { median: round(median(ms)), worst: round(Math.max(...ms)) },
      debounceMs: 150,
      target: '≤ ~300 ms for 1,000 rows after the debounce',
      loadAvg: loadAvg(),
    }),
  );
} finally {
  await browser.close();
  await studio.close();
  rmSync(dir, { recursive: true, force: true });
}
