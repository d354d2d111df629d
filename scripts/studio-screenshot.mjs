#!/usr/bin/env node
/**
 * Screenshot of the mapping studio on the example clinic, for the README (docs/images/studio.png):
 *
 *   npm run build && node scripts/studio-screenshot.mjs [out.png]
 *
 * Copies examples/clinic to a temporary folder, starts `care-etl studio examples/clinic/mapping.yaml --no-open` there
 * (the built CLI), opens the printed URL in headless Chromium (playwright-core; the browser is CHROME_PATH, else
 * `chromium` / `chromium-browser` on the PATH: `apt-get install chromium`), selects a rejected row and writes a 1400×900 PNG.
 * Chromium reaches nothing but the studio: every other connection goes to a closed port of 127.0.0.1.
 * Exit 0 with the PNG written, 1 when something failed, 2 without Chromium.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { findChromium } from './report-screenshot.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.argv[2] ?? join(root, 'docs/images/studio.png'));

/** Starts the studio in `cwd`; resolves with the child and the URL it printed. */
function startStudio(cwd) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_')));
  const child = spawn(process.execPath, [join(root, 'bin/run.js'), 'studio', 'examples/clinic/mapping.yaml', '--no-open'], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((res, rej) => {
    const onData = (d) => {
      output += d;
      const url = /^Studio: (http:\/\/\S+)$/m.exec(output)?.[1];
      if (url) res({ child, url });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', (d) => (output += d));
    child.on('exit', (code) => rej(new Error(`care-etl studio exited (${code}):\n${output}`)));
  });
}

async function main() {
  const executablePath = findChromium();
  if (!executablePath) {
    console.error('Chromium not found (CHROME_PATH, chromium or chromium-browser): install it with apt-get install chromium');
    return 2;
  }
  const work = mkdtempSync(join(tmpdir(), 'care-etl-studio-shot-'));
  let studio;
  let browser;
  try {
    cpSync(join(root, 'examples/clinic'), join(work, 'examples/clinic'), { recursive: true, filter: (src) => !src.includes('.care-etl') });
    studio = await startStudio(work);
    browser = await chromium.launch({
      executablePath,
      args: ['--no-sandbox', '--proxy-server=http://127.0.0.1:9', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(studio.url);
    await page.locator('[data-testid=results][data-state=idle]').waitFor();
    await page.locator('[data-testid=row].rejected').filter({ hasText: /\d{6}/ }).first().click(); // a reject shows its reason beside the resource
    await page.locator('[data-testid=row][aria-selected=true]').waitFor();
    mkdirSync(dirname(out), { recursive: true });
    await page.screenshot({ path: out });
  } finally {
    await browser?.close();
    studio?.child.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`wrote ${out} (${statSync(out).size} bytes)`);
  return 0;
}

process.exitCode = await main().catch((err) => {
  console.error(err instanceof Error ? err.message : String(err));
  return 1;
});
