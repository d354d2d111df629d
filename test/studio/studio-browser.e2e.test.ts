import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findChromium } from '../../scripts/report-screenshot.mjs';
import { BIN, cleanEnv, ROOT, runCli } from '../helpers/cli.js';

/*
 * Issue 29, "Done when": the mapping studio on a copy of the example clinic, in Debian's Chromium driven by
 * playwright-core. A column typo typed into the editor shows as an error at its line (the problems list, the gutter
 * marker and the underline, in the DOM Chromium built); fixing it changes the mapped resource; the row added as a
 * test case is in the mapping's test file and `care-etl test` passes on it. Nothing leaves 127.0.0.1: every request
 * the page makes is recorded, and the page's browser context sends everything but loopback to a proxy on 127.0.0.1
 * that records and refuses it (expected: nothing; no host name is resolved either); the studio process is given a
 * CARE_BASE_URL that records what reaches it (expected: nothing). Chromium's own background services (sign-in,
 * component updates, push messaging — browser-wide, not the page's) go to a second refusing proxy, not asserted on.
 * Chromium is CHROME_PATH, else `chromium` / `chromium-browser` on the PATH; without one the test FAILS (.ci/run
 * installs Debian's).
 */

const CHROMIUM = findChromium();
const INSTALL_HINT = 'Chromium not found (CHROME_PATH, chromium or chromium-browser): install it with apt-get install chromium (.ci/run does)';
const API_KEY = 'studio-test-api-key-never-shown-7f3c9a';

/** The line of the example mapping the test edits, and what it becomes. */
const IDENTIFIER_LINE = '"identifier": [{ "system": "urn:lakeside:mrn", "value": MRN }],';

let work: string;
let clinic: string;
let studio: ChildProcess | undefined;
let studioStderr = '';
/** Request lines that reached the page context's refusing proxy: anything the studio page tried to send off the machine. */
const proxied: string[] = [];
let proxy: Server;
/** Chromium's own traffic (browser-wide services), refused. */
let servicesProxy: Server;
/** A stand-in for the API the environment points at: the studio must never call it. */
let api: HttpServer;
const apiRequests: string[] = [];
let browser: Browser | undefined;
let page: Page;
/** Every request the page made (URL), from playwright's request events. */
const pageRequests: string[] = [];
let origin: string;

/** A proxy on 127.0.0.1 that records each request line and answers 403. */
function refusingProxy(record: string[]): Server {
  return createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', (d) => {
      record.push(d.toString('latin1').split('\r\n')[0]!);
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    });
  });
}

/**
 * playwright-core's own `--disable-features` list (1.65; a later switch replaces it, so it is repeated) plus
 * AutofillServerCommunication: the page's form fields would otherwise make Chromium ask Google for field predictions
 * through the page's own network context.
 */
const DISABLED_FEATURES = [
  'AvoidUnnecessaryBeforeUnloadCheckSync',
  'DestroyProfileOnBrowserClose',
  'HttpsUpgrades',
  'HttpsFirstBalancedModeAutoEnable',
  'LensOverlay',
  'MediaRouter',
  'PaintHolding',
  'ThirdPartyStoragePartitioning',
  'AvoidCorsURLLoaderRestartOnRedirect',
  'TcpPortRandomizationWin',
  'OptimizationHints',
  'NetworkTimeServiceQuerying',
  'AimEnabled',
  'PreconnectToSearch',
  'CDPScreenshotNewSurface',
  'SkipListAccountsWithoutGaiaCookies',
  'AutofillServerCommunication',
];

const listen = (srv: Server | HttpServer) => new Promise<number>((resolve) => srv.listen(0, '127.0.0.1', () => resolve((srv.address() as AddressInfo).port)));
const close = (srv: Server | HttpServer | undefined) => new Promise<void>((resolve) => (srv?.listening ? srv.close(() => resolve()) : resolve()));

/** Starts `care-etl studio mapping.yaml --no-open` in the clinic copy; resolves with the URL line it prints. */
function startStudio(apiPort: number): Promise<string> {
  const env = { ...cleanEnv(), CARE_BASE_URL: `http://127.0.0.1:${apiPort}/api`, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't1' };
  const child = spawn(process.execPath, [BIN, 'studio', 'mapping.yaml', '--no-open'], { cwd: clinic, env, stdio: ['ignore', 'pipe', 'pipe'] });
  studio = child;
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (studioStderr += d));
  return new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const url = /^Studio: (http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43})$/m.exec(stdout)?.[1];
      if (url) resolve(url);
    });
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`care-etl studio exited (${code}) before printing its URL:\n${stdout}\n${studioStderr}`)));
  });
}

/** Waits until the evaluation of the current text (and page) has come back. */
async function settled(): Promise<void> {
  await page.locator('[data-testid=results][data-state=idle]').waitFor();
}

/**
 * Selects `word` in the editor line holding `lineText` with the keyboard (a click on the line, Home or End, arrows), deletes
 * it and types `replacement` key by key, as a person would (closeBrackets and the completion popup take part).
 */
async function retype(lineText: string, word: string, replacement: string): Promise<void> {
  const line = page.locator('.cm-line').filter({ hasText: lineText });
  await line.click();
  await page.keyboard.press('Home'); // CodeMirror: the start of the line's text, after the indentation
  const text = (await line.textContent())!.trimStart();
  const at = text.indexOf(word);
  expect(at, `${word} in ${text}`).toBeGreaterThanOrEqual(0);
  if (text.length - at < at) {
    await page.keyboard.press('End');
    for (let i = at; i < text.length; i++) await page.keyboard.press('ArrowLeft');
  } else for (let i = 0; i < at; i++) await page.keyboard.press('ArrowRight');
  for (let i = 0; i < word.length; i++) await page.keyboard.press('Shift+ArrowRight');
  await page.keyboard.press('Backspace');
  await page.keyboard.type(replacement);
}

const problems = () => page.locator('[data-testid=problem]');
const resourceText = () => page.locator('[data-testid=row-resource] pre').textContent();

describe('the mapping studio in Chromium (issue 29)', () => {
  beforeAll(async () => {
    if (!CHROMIUM) throw new Error(INSTALL_HINT);
    work = mkdtempSync(join(tmpdir(), 'care-etl-studio-browser-'));
    clinic = join(work, 'clinic');
    cpSync(join(ROOT, 'examples/clinic'), clinic, { recursive: true, filter: (src) => !src.includes('.care-etl') });
    proxy = refusingProxy(proxied);
    const proxyPort = await listen(proxy);
    servicesProxy = refusingProxy([]);
    const servicesPort = await listen(servicesProxy);
    api = createHttpServer((req, res) => {
      apiRequests.push(`${req.method} ${req.url}`);
      res.writeHead(500).end();
    });
    const apiPort = await listen(api);
    const url = await startStudio(apiPort);
    origin = new URL(url).origin;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        `--proxy-server=http://127.0.0.1:${servicesPort}`,
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
        `--disable-features=${DISABLED_FEATURES.join(',')}`,
      ],
    });
    // The page's context: 127.0.0.1 direct, everything else to the recording proxy.
    const context = await browser.newContext({
      viewport: { width: 1400, height: 900 },
      proxy: { server: `http://127.0.0.1:${proxyPort}`, bypass: '127.0.0.1' },
    });
    context.on('request', (r) => pageRequests.push(r.url()));
    page = await context.newPage();
    await page.goto(url);
    await settled();
  });

  afterAll(async () => {
    await browser?.close();
    if (studio && studio.exitCode === null) {
      const exited = new Promise((resolve) => studio!.once('exit', resolve));
      studio.kill('SIGTERM');
      await exited;
    }
    await close(proxy);
    await close(servicesProxy);
    await close(api);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('shows a typo at its line, the fixed mapping’s new resource, adds the row as a test case that `care-etl test` passes, searches, jumps, meets a save conflict; nothing leaves 127.0.0.1', async () => {
    const mapping = readFileSync(join(clinic, 'mapping.yaml'), 'utf8');
    const lineNo = mapping.split('\n').findIndex((l) => l.includes(IDENTIFIER_LINE)) + 1;
    expect(lineNo, 'the example mapping still has the identifier line').toBeGreaterThan(0);

    // The example as it is: no problems, the first patient row selected, its resource shown.
    await expect.poll(() => page.locator('[data-testid=problems] li').textContent()).toBe('No problems.');
    await expect.poll(() => page.locator('[data-testid=total-loaded]').textContent()).toMatch(/^\d+ loaded$/);
    expect(await page.locator('[data-testid=row][aria-selected=true] td').first().textContent()).toBe('2');
    const before = JSON.parse((await resourceText())!);
    expect(before.identifier).toEqual([{ system: 'urn:lakeside:mrn', value: '000001' }]);

    // A column typo typed into the editor: `"MRN-" & MNR` (closeBrackets closes the quote as a person types it).
    await retype(IDENTIFIER_LINE, 'MRN }', '"MRN-" & MNR }');
    await expect.poll(() => problems().count()).toBeGreaterThan(0);
    await settled();
    const problem = problems().filter({ hasText: 'MNR' });
    await expect.poll(() => problem.count()).toBe(1);
    expect(await problem.getAttribute('data-line')).toBe(String(lineNo));
    expect(await problem.getAttribute('data-severity')).toBe('error');
    // in the editor: the underline covers the typo, and the gutter marker sits on that line
    const typoLine = page.locator('.cm-line').filter({ hasText: '"MRN-" & MNR' });
    expect(await typoLine.locator('.cm-lintRange-error').textContent()).toBe('MNR');
    const marker = await page.locator('.cm-lint-marker-error').boundingBox();
    const lineBox = await typoLine.boundingBox();
    expect(Math.abs(marker!.y + marker!.height / 2 - (lineBox!.y + lineBox!.height / 2)), 'gutter marker beside the line').toBeLessThan(lineBox!.height / 2);

    // Fixed: the mapped resource of the same row changes.
    await retype('"MRN-" & MNR', 'MNR', 'MRN');
    await expect.poll(() => page.locator('[data-testid=problems] li').textContent()).toBe('No problems.');
    await settled();
    await expect.poll(async () => JSON.parse((await resourceText()) ?? '{}').identifier).toEqual([{ system: 'urn:lakeside:mrn', value: 'MRN-000001' }]);
    expect(await page.locator('[data-testid=row][aria-selected=true] td').first().textContent()).toBe('2');

    // Saved with Ctrl+S: the file holds the edit byte for byte, comments and layout kept.
    await page.keyboard.press('Control+s');
    await expect.poll(() => page.locator('[data-testid=save-state]').textContent()).toBe('saved');
    expect(readFileSync(join(clinic, 'mapping.yaml'), 'utf8')).toBe(mapping.replace(IDENTIFIER_LINE, IDENTIFIER_LINE.replace('MRN }', '"MRN-" & MRN }')));

    // Added as a test case: named after the row, in the mapping's test file, and `care-etl test` passes on it.
    await page.locator('[data-testid=add-test-case]').click();
    await expect.poll(() => page.locator('[data-testid=test-case-result]').textContent()).toMatch(/^added “patient line 2” to .*mapping\.test\.yaml$/);
    const testFile = readFileSync(join(clinic, 'mapping.test.yaml'), 'utf8');
    expect(testFile).toContain('name: patient line 2');
    expect(testFile).toContain('MRN-000001');
    expect(testFile.startsWith('# yaml-language-server: $schema=../../schemas/mapping-test.schema.json\n#\n# Tests of examples/clinic/mapping.yaml')).toBe(
      true,
    );
    const run = await runCli(['test', 'mapping.test.yaml', '--grep', 'patient line 2'], { cwd: clinic });
    expect(run.stdout).toContain('✓ patient › patient line 2');
    expect(run.stdout).toContain('cases: 1 passed, 0 failed');
    expect(run.code, run.stderr).toBe(0);

    // Search by key, jump to a line: the rows shown follow.
    await page.locator('[data-testid=search]').fill('000031');
    await expect.poll(() => page.locator('[data-testid=page-info]').textContent()).toBe('1–1 of 1');
    expect(await page.locator('[data-testid=row]').getAttribute('class')).toBe('rejected');
    await page.locator('[data-testid=search]').fill('');
    await page.locator('[data-testid=jump-line]').fill('30');
    await page.locator('[data-testid=jump-line]').press('Enter');
    await expect.poll(() => page.locator('[data-testid=row] td').first().textContent()).toBe('30');

    // The file changed on disk since it was read: a save is a conflict, and "Reload" brings the disk's text in.
    const onDisk = `${readFileSync(join(clinic, 'mapping.yaml'), 'utf8')}# edited elsewhere\n`;
    writeFileSync(join(clinic, 'mapping.yaml'), onDisk);
    await page.locator('.cm-line').filter({ hasText: 'version: 1' }).click();
    await page.keyboard.press('End');
    await page.keyboard.type(' ');
    await page.keyboard.press('Control+s');
    await page.locator('[data-testid=conflict]').waitFor({ state: 'visible' });
    expect(readFileSync(join(clinic, 'mapping.yaml'), 'utf8')).toBe(onDisk);
    await page.locator('[data-testid=reload]').click();
    await expect.poll(() => page.locator('[data-testid=save-state]').textContent()).toBe('reloaded from disk');
    expect(await page.locator('.cm-line').filter({ hasText: '# edited elsewhere' }).count()).toBe(1);

    // Nothing left the machine: the page asked only its own server, its context sent nothing to the proxy, the studio
    // never called the configured API, and the API key is nowhere on the page.
    expect(pageRequests.length).toBeGreaterThan(3);
    expect(pageRequests.filter((u) => !u.startsWith(`${origin}/`))).toEqual([]);
    expect(proxied).toEqual([]);
    expect(apiRequests).toEqual([]);
    expect(await page.content()).not.toContain(API_KEY);
    expect(studioStderr).not.toContain(API_KEY);
    // control: a page that does go off the machine is seen by the proxy (so the empty list above means something)
    const control = await page.context().newPage();
    await control.goto('http://control-asset.invalid/').catch(() => {});
    expect(proxied.some((r) => r.includes('control-asset.invalid'))).toBe(true);
  });
});
