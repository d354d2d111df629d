#!/usr/bin/env node
/**
 * Screenshot of a care-etl HTML run report in headless Chromium — to check what the report looks like, or to attach
 * a picture of it to a ticket:
 *
 *   care-etl run mapping.yaml --report report.html
 *   node scripts/report-screenshot.mjs report.html report.png [--dom report.dom.html]
 *
 * Writes a 1200×2000 PNG of the page (the top of it: a longer report is cut); `--dom FILE` also writes the DOM as
 * the browser parsed it (`--dump-dom`). The browser is `CHROME_PATH`, else `chromium` or `chromium-browser` on the
 * PATH (Debian/Ubuntu: `apt-get install chromium`); exit 2 when there is none.
 *
 * The invocation is the one test/report/run-report-browser.test.ts uses:
 *   chromium --headless=new --no-sandbox --disable-gpu --screenshot=out.png --window-size=1200,2000 file:///…/report.html
 * plus a throw-away profile (`--user-data-dir`) and no network at all: every connection Chromium would make (its own
 * background services included) goes to a proxy on a closed port of 127.0.0.1 and no name is resolved — the report
 * needs none (it is self-contained, and its CSP forbids fetching anything).
 *
 * Node 20+, no dependencies. Exit 0 with the PNG written, 1 when Chromium failed, 2 on usage errors.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const USAGE = 'usage: node scripts/report-screenshot.mjs report.html out.png [--dom out.dom.html]';

/** CHROME_PATH, else `chromium` / `chromium-browser` on the PATH; undefined when none is executable. */
export function findChromium(env = process.env) {
  const executable = (p) => {
    try {
      accessSync(p, constants.X_OK);
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (env.CHROME_PATH) return executable(env.CHROME_PATH) ? env.CHROME_PATH : undefined;
  for (const name of ['chromium', 'chromium-browser']) {
    for (const dir of (env.PATH ?? '').split(delimiter)) {
      if (dir && executable(join(dir, name))) return join(dir, name);
    }
  }
  return undefined;
}

/** A port of 127.0.0.1 nothing listens on (bound, then released): connections to it are refused. */
async function closedLocalPort() {
  const srv = createServer();
  await new Promise((r, j) => srv.once('error', j).listen(0, '127.0.0.1', () => r(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (srv.address());
  await new Promise((r) => srv.close(() => r(undefined)));
  return port;
}

/**
 * Runs Chromium headless on `file` with `extra` arguments (`--dump-dom`, `--screenshot=…`); resolves with its stdout.
 * `proxyPort`: where every connection goes (127.0.0.1); default a closed port.
 */
export async function runChromium(chromium, file, extra, { proxyPort, timeoutMs = 60_000 } = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'care-etl-chromium-'));
  const port = proxyPort ?? (await closedLocalPort());
  const args = [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    `--user-data-dir=${profile}`,
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-default-apps',
    '--disable-extensions',
    '--disable-dev-shm-usage',
    `--proxy-server=http://127.0.0.1:${port}`,
    '--proxy-bypass-list=<-loopback>',
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ...extra,
    pathToFileURL(resolve(file)).href,
  ];
  try {
    return await new Promise((res, rej) => {
      const child = spawn(chromium, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('error', (err) => {
        clearTimeout(timer);
        rej(err);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) res(stdout);
        else
          rej(
            new Error(
              `${chromium} exited with ${signal ?? code}: ${stderr
                .split('\n')
                .filter((l) => l && !/dbus|Fontconfig/i.test(l))
                .slice(-5)
                .join('\n')}`,
            ),
          );
      });
    });
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

async function main(argv) {
  const args = [...argv];
  let domOut;
  const i = args.indexOf('--dom');
  if (i >= 0) {
    domOut = args[i + 1];
    args.splice(i, 2);
  }
  if (args.includes('-h') || args.includes('--help')) {
    console.log(USAGE);
    return 0;
  }
  const [html, png] = args;
  if (!html || !png || args.length !== 2 || (i >= 0 && !domOut)) {
    console.error(USAGE);
    return 2;
  }
  try {
    if (!statSync(html).isFile()) throw new Error('not a file');
  } catch {
    console.error(`no such report: ${html}`);
    return 2;
  }
  const chromium = findChromium();
  if (!chromium) {
    console.error('Chromium not found (CHROME_PATH, chromium or chromium-browser): install it with apt-get install chromium');
    return 2;
  }
  const out = resolve(png);
  rmSync(out, { force: true });
  try {
    await runChromium(chromium, html, [`--screenshot=${out}`, '--window-size=1200,2000', '--hide-scrollbars']);
    if (domOut) writeFileSync(domOut, await runChromium(chromium, html, ['--dump-dom']));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
  let size = 0;
  try {
    size = statSync(out).size;
  } catch {
    /* not written */
  }
  if (size === 0) {
    console.error(`${chromium} wrote no screenshot to ${out}`);
    return 1;
  }
  console.log(`wrote ${png} (${size} bytes)${domOut ? ` and ${domOut}` : ''}`);
  return 0;
}

// Run as a script (not when imported for findChromium / runChromium).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2));
}
