#!/usr/bin/env node
// Installs care-etl the way the README's "Install" section says, and uses it from a folder outside the checkout:
//   1. `npm pack` (the built dist/ as it is: run `npm run build` first) and check what the tarball holds — no
//      source map, no test/ bench/ src/, every relative link of its Markdown files shipped, no stale dist file;
//   2. `npm install -g --prefix <temp> <tarball>` (dependencies from the npm cache or the registry);
//   3. with <temp>/bin first on PATH, in a temp folder: `care-etl --version`, `care-etl init`, `care-etl validate`,
//      a dry run and a run into the embedded sandbox of the shipped example (copied from the installed package).
// The npm cache and registry settings are the user's; everything else lives in one temp folder, removed at the end.
//
// better-sqlite3 (native) would download its prebuilt binary from GitHub or build from source (~1–2 min of CPU).
// By default the binary this checkout already has is offered to its installer through prebuild-install's
// documented local-prebuilds setting (`npm_config_better_sqlite3_local_prebuilds`): the install takes seconds and
// talks to the npm registry only. package.json pins better-sqlite3 to the lockfile's exact version (npm ignores a
// shrinkwrap in a tarball installed globally: npm/cli#5325), so the version installed is always the one this offer
// matches; the summary's `betterSqlite3` says what happened. `--build-from-source` skips the offer.
//
// Usage: node scripts/pack-install-check.mjs [--json] [--keep] [--build-from-source]
// Exit 0 when every check passed; 1 with the failures listed otherwise. `--json`: one summary object on stdout.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, normalize, posix, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const asJson = args.has('--json');
const keep = args.has('--keep');
const fromSource = args.has('--build-from-source');
for (const a of args) {
  if (!['--json', '--keep', '--build-from-source'].includes(a)) {
    console.error(`Unknown option \`${a}\`: expected --json, --keep or --build-from-source`);
    process.exit(2);
  }
}

const failures = [];
const summary = { tarball: undefined, files: 0, bytes: 0, installSeconds: 0, betterSqlite3: undefined, commands: [], failures };
const log = (line) => {
  if (!asJson) console.log(line);
};
const fail = (message) => {
  failures.push(message);
  log(`FAIL ${message}`);
};
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'care-etl-pack-')));
if (!relative(ROOT, tmp).startsWith('..')) {
  console.error(`The temp folder ${tmp} is inside the checkout ${ROOT}: set TMPDIR to a folder outside it.`);
  process.exit(2);
}

try {
  main();
} catch (err) {
  fail(`unexpected error: ${err instanceof Error ? err.stack : String(err)}`);
} finally {
  if (keep) log(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
if (asJson) console.log(JSON.stringify(summary, null, 2));
else log(failures.length === 0 ? 'OK: packed, installed and ran from outside the checkout' : `${failures.length} check(s) failed`);
process.exit(failures.length === 0 ? 0 : 1);

function main() {
  if (!existsSync(join(ROOT, 'dist', 'commands'))) {
    fail('dist/ is missing: run `npm run build` first (npm ci does it through `prepare`)');
    return;
  }
  checkStaleDist();
  const tarball = pack();
  if (tarball === undefined) return;
  const prefix = join(tmp, 'prefix');
  if (!install(tarball, prefix)) return;
  runInstalled(prefix);
}

/**
 * dist/ files whose source is gone would ship too (tsc does not delete them). dist/studio/assets/ is the studio page's
 * bundle (scripts/build-studio.mjs rebuilds it whole from studio-page/), not tsc output.
 */
function checkStaleDist() {
  const stale = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory() && p === join(ROOT, 'dist', 'studio', 'assets')) continue;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) {
        const rel = relative(join(ROOT, 'dist'), p);
        if (!existsSync(join(ROOT, 'src', rel.replace(/\.js$/, '.ts')))) stale.push(`dist/${rel.split(sep).join('/')}`);
      }
    }
  };
  walk(join(ROOT, 'dist'));
  if (stale.length > 0)
    fail(
      `dist/ holds ${stale.length} file(s) with no source in src/ (${stale.slice(0, 5).join(', ')}${stale.length > 5 ? ', …' : ''}): they would ship; rebuild from clean: rm -rf dist && npm run build`,
    );
}

function pack() {
  const dest = join(tmp, 'pack');
  mkdirSync(dest);
  // --ignore-scripts: dist/ is packed as built; `prepare` would rebuild it under the feet of anything using it.
  const r = run(npm, ['pack', '--ignore-scripts', '--json', '--pack-destination', dest], { cwd: ROOT, env: npmEnv() });
  if (r.status !== 0) {
    fail(`npm pack exited ${r.status}: ${r.stderr.trim().split('\n').slice(-5).join(' | ')}`);
    return undefined;
  }
  const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf('[')));
  const files = info.files.map((f) => f.path);
  summary.tarball = info.filename;
  summary.files = files.length;
  summary.bytes = info.size;
  summary.shipped = files;
  log(`packed ${info.filename}: ${files.length} files, ${(info.size / 1024).toFixed(0)} KiB`);

  const maps = files.filter((f) => f.endsWith('.map'));
  if (maps.length > 0) fail(`${maps.length} source map(s) in the package (e.g. ${maps[0]}): src/ is not shipped`);
  const dev = files.filter((f) => /^(test|bench|src|\.ci|coverage|node_modules)\//.test(f) || /(^|\/)\.care-etl\//.test(f));
  if (dev.length > 0) fail(`development files in the package: ${dev.slice(0, 5).join(', ')}`);
  const studioPage = ['dist/studio/index.html', 'dist/studio/assets/studio.js', 'dist/studio/assets/studio.css'];
  for (const must of [
    'bin/run.js',
    'package.json',
    'README.md',
    'dist/commands/run.js',
    'schemas/mapping.schema.json',
    'examples/clinic/mapping.yaml',
    ...studioPage,
  ]) {
    if (!files.includes(must)) fail(`the package lacks ${must}`);
  }
  // Every relative link of a shipped Markdown file points at a shipped file (or a folder holding some).
  const shipped = new Set(files);
  const isShipped = (p) => shipped.has(p) || files.some((f) => f.startsWith(`${p.replace(/\/$/, '')}/`));
  for (const md of files.filter((f) => f.endsWith('.md'))) {
    const text = readFileSync(join(ROOT, md), 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1].split('#')[0];
      if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const p = posix.normalize(posix.join(posix.dirname(md), decodeURI(target)));
      if (!isShipped(p)) fail(`${md} links to ${target}, which the package does not ship`);
    }
  }
  return join(dest, info.filename);
}

/** The environment for npm: without the npm_* variables of an npm that started this script (`npm test`). */
function npmEnv(extra = {}) {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_'))), ...extra };
}

/** A gzipped tar holding one file (ustar), for prebuild-install's local prebuilds. */
function tarGzOne(name, content) {
  const header = Buffer.alloc(512);
  const field = (value, offset, length) => header.write(value, offset, length, 'utf8');
  const octal = (n, length) => n.toString(8).padStart(length - 1, '0');
  field(name, 0, 100);
  field(octal(0o755, 8), 100, 8);
  field(octal(0, 8), 108, 8);
  field(octal(0, 8), 116, 8);
  field(octal(content.length, 12), 124, 12);
  field(octal(Math.floor(Date.now() / 1000), 12), 136, 12);
  field('        ', 148, 8);
  field('0', 156, 1);
  field('ustar', 257, 6);
  field('00', 263, 2);
  let sum = 0;
  for (const b of header) sum += b;
  field(`${octal(sum, 7)}\0`, 148, 8);
  const pad = Buffer.alloc((512 - (content.length % 512)) % 512);
  return gzipSync(Buffer.concat([header, content, pad, Buffer.alloc(1024)]));
}

/** The checkout's better-sqlite3 binary offered as a local prebuild of the same version; env for npm, or {}. */
function localPrebuild() {
  if (fromSource) return {};
  const pkgDir = join(ROOT, 'node_modules', 'better-sqlite3');
  const binary = join(pkgDir, 'build', 'Release', 'better_sqlite3.node');
  if (!existsSync(binary)) return {};
  const { version } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  const musl = process.platform === 'linux' && !process.report?.getReport().header.glibcVersionRuntime;
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}${musl ? 'musl' : ''}-${process.arch}.tar.gz`;
  const dir = join(tmp, 'prebuilds');
  mkdirSync(dir);
  writeFileSync(join(dir, name), tarGzOne('build/Release/better_sqlite3.node', readFileSync(binary)));
  return { npm_config_better_sqlite3_local_prebuilds: dir };
}

function install(tarball, prefix) {
  const started = Date.now();
  const r = run(
    npm,
    // --allow-scripts: npm ≥ 11.16 asks to approve install scripts (npm 12 blocks them); older npm ignores it.
    ['install', '--global', '--prefix', prefix, tarball, '--prefer-offline', '--no-audit', '--no-fund', '--allow-scripts=better-sqlite3'],
    { cwd: tmp, env: npmEnv({ ...localPrebuild(), npm_config_update_notifier: 'false' }), timeout: 600_000 },
  );
  summary.installSeconds = Math.round((Date.now() - started) / 100) / 10;
  if (r.status !== 0) {
    fail(`npm install -g exited ${r.status}: ${r.stderr.trim().split('\n').slice(-8).join(' | ')}`);
    return false;
  }
  const pkgDir = globalPackageDir(prefix);
  const sqliteBuild = join(pkgDir, 'node_modules', 'better-sqlite3', 'build');
  const installed = JSON.parse(readFileSync(join(sqliteBuild, '..', 'package.json'), 'utf8')).version;
  const binary = (build) =>
    existsSync(join(build, 'Release', 'better_sqlite3.node')) ? readFileSync(join(build, 'Release', 'better_sqlite3.node')) : undefined;
  const mine = binary(join(ROOT, 'node_modules', 'better-sqlite3', 'build'));
  summary.betterSqlite3 =
    existsSync(join(sqliteBuild, 'Release', 'obj.target')) || existsSync(join(sqliteBuild, 'Release', 'obj'))
      ? `${installed} built from source`
      : mine !== undefined && binary(sqliteBuild)?.equals(mine)
        ? `${installed} from this checkout's binary`
        : `${installed} prebuilt binary downloaded`;
  log(`installed into ${prefix} in ${summary.installSeconds} s (better-sqlite3: ${summary.betterSqlite3})`);
  return true;
}

function globalPackageDir(prefix) {
  return process.platform === 'win32' ? join(prefix, 'node_modules', 'care-etl') : join(prefix, 'lib', 'node_modules', 'care-etl');
}

function runInstalled(prefix) {
  const bin = process.platform === 'win32' ? prefix : join(prefix, 'bin');
  const work = join(tmp, 'work');
  mkdirSync(work);
  // The shipped example, as a user would copy it next to their own exports.
  cpSync(join(globalPackageDir(prefix), 'examples', 'clinic'), work, { recursive: true });
  // Without CI too: under CI the CLI refuses the embedded sandbox unless --sandbox, and this is a user's first run.
  const env = Object.fromEntries(Object.entries(npmEnv()).filter(([k]) => !k.startsWith('CARE_') && k !== 'CI'));
  env.PATH = `${bin}${delimiter}${process.env.PATH ?? ''}`;
  env.NO_COLOR = '1';
  const careEtl = (argv) => {
    const r = run(process.platform === 'win32' ? 'care-etl.cmd' : 'care-etl', argv, { cwd: work, env, timeout: 120_000 });
    summary.commands.push({ argv: ['care-etl', ...argv], status: r.status, stdout: r.stdout.slice(0, 2000), stderr: r.stderr.slice(0, 2000) });
    log(`care-etl ${argv.join(' ')} → exit ${r.status}`);
    return r;
  };
  const expect = (ok, what, r) => {
    if (!ok) fail(`${what} (exit ${r.status}; stderr: ${r.stderr.trim().split('\n').slice(-3).join(' | ')})`);
  };

  // The first `care-etl` on PATH is the one just installed (not a checkout's, not another global one).
  const exe = process.platform === 'win32' ? 'care-etl.cmd' : 'care-etl';
  const found = env.PATH.split(delimiter)
    .map((d) => join(d, exe))
    .find((p) => existsSync(p));
  if (found === undefined || normalize(found) !== normalize(join(bin, exe)))
    fail(`care-etl on PATH is ${found ?? 'nothing'}, not the installed ${join(bin, exe)}`);
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const v = careEtl(['--version']);
  expect(v.status === 0 && v.stdout.startsWith(`care-etl/${version} `), `\`care-etl --version\` does not print care-etl/${version}`, v);
  const init = careEtl(['init', '--from', 'data/patients.csv', '--out', 'starter.yaml']);
  expect(init.status === 0 && existsSync(join(work, 'starter.yaml')), '`care-etl init` wrote no starter.yaml', init);
  const validate = careEtl(['validate', 'mapping.yaml']);
  expect(validate.status === 0, '`care-etl validate mapping.yaml` failed on the shipped example', validate);
  // The example holds deliberately bad rows: exit 1, 30 of 35 patients written.
  const dry = careEtl(['run', 'mapping.yaml', '--dry-run', '--out', 'out', '--progress', 'none']);
  const patients = existsSync(join(work, 'out', 'Patient.ndjson'))
    ? readFileSync(join(work, 'out', 'Patient.ndjson'), 'utf8')
        .split('\n')
        .filter(Boolean).length
    : 0;
  summary.dryRunPatients = patients;
  expect(dry.status === 1 && patients === 30, `the dry run of the shipped example wrote ${patients} patients (expected 30, exit 1)`, dry);
  // A real run into the embedded sandbox (better-sqlite3 loaded: ledger and sandbox), its state beside the mapping.
  const load = careEtl(['run', 'mapping.yaml', '--progress', 'none']);
  expect(
    load.status === 1 && /patient\s+35\s+30\s/.test(load.stdout) && existsSync(join(work, '.care-etl', 'state.db')),
    'the run of the shipped example into the embedded sandbox did not create 30 patients',
    load,
  );
}

function run(cmd, argv, opts) {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, shell: process.platform === 'win32', ...opts });
  if (r.error) return { status: null, stdout: '', stderr: String(r.error) };
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}
