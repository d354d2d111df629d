// Cost of the linear-time regex engine (issue 22, item 7): a regex-heavy patient map — $match, $contains, $replace and
// $split with regular expressions, 9 regex evaluations per row — on JSONata's interpreter (regexes never compile to
// closures), with JavaScript's RegExp (`native`, the previous version) and with re2js through `LinearRegExp`
// (`linear`, as shipped). Same process, same rows, the two back to back in each round (order alternating);
// `linearVsNative` is linear / native throughput per round ([min, max]) and of the medians, wall-clock and per
// CPU-second (the steadier figure when other jobs share the machine). The outputs are checked
// identical. `redos`: one evaluation of `$match(NAME, /(a+)+$/)` on 40 × "a" + "!" on the linear engine (the native
// one is not run: 2^40 steps); `redosNative24`: the native one on 24 × "a" + "!" (2^24), for scale. `execNsPerCall`:
// the engines alone (construct + one exec of the date pattern with three groups, as JSONata calls them).
// Usage: npm run build && node bench/regex-engine.mjs [ROWS] [ROUNDS]
import os from 'node:os';
import jsonata from 'jsonata';
import { LINEAR_REGEX_ENGINE, LinearRegExp } from '../dist/core/linear-regex.js';

const ROWS = Number(process.argv[2] ?? process.env.ROWS ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? process.env.ROUNDS ?? 5);

const MAP = `{
  "identifier": [{ "system": "urn:bench:mrn", "value": $replace(MRN, /^0+/, "") }],
  "name": [{ "family": $replace(LAST, /\\s+/, " "), "given": $split(FIRST, /[\\s-]+/) }],
  "telecom": [
    $contains(PHONE, /\\d{3}\\D*\\d{4}$/) ? { "system": "phone", "value": $replace(PHONE, /\\D/, "") },
    $contains(EMAIL, /^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$/i) ? { "system": "email", "value": EMAIL }
  ],
  "birthDate": ($m := $match(DOB, /^(\\d{2})\\/(\\d{2})\\/(\\d{4})$/); $m ? $m.groups[2] & "-" & $m.groups[0] & "-" & $m.groups[1]),
  "address": [{ "line": [$replace(ADDRESS, /\\b(St|Rd|Ave)\\b\\.?/, "$1.")], "postalCode": $match(ZIP, /^\\d{5}/).match }]
}`;

const FIRST = ['Sofia', 'Liam', 'Anna-Maria', 'Jean Luc', 'Noor', 'Ravi'];
const LAST = ['Yilmaz', 'Van  der Berg', 'Moreau', "O'Brien", 'Lindqvist'];
const STREETS = ['Lakeview Dr', 'Elm St', 'Harbor Rd', 'Maple Ave'];
function rows(n) {
  const out = [];
  for (let i = 1; i <= n; i++) {
    out.push({
      MRN: String(i).padStart(8, '0'),
      FIRST: FIRST[i % FIRST.length],
      LAST: LAST[i % LAST.length],
      PHONE:
        i % 3
          ? `(555) ${String(100 + (i % 900))}-${String(1000 + (i % 9000))}`
          : `555.${String(i % 1000).padStart(3, '0')}.${String(i % 10000).padStart(4, '0')}`,
      EMAIL: i % 7 ? `person.${i}@example.org` : `not-an-email ${i}`,
      DOB: `${String(1 + (i % 12)).padStart(2, '0')}/${String(1 + (i % 28)).padStart(2, '0')}/${1940 + (i % 70)}`,
      ADDRESS: `${i % 999} ${STREETS[i % STREETS.length]}`,
      ZIP: String(10000 + (i % 89999)),
    });
  }
  return out;
}

async function measure(expr, data) {
  const t = process.hrtime.bigint();
  const c = process.cpuUsage();
  for (const row of data) await expr.evaluate(row);
  const s = Number(process.hrtime.bigint() - t) / 1e9;
  const cpu = process.cpuUsage(c);
  return { rowsPerSec: data.length / s, rowsPerCpuSec: data.length / ((cpu.user + cpu.system) / 1e6) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round2 = (x) => Math.round(x * 100) / 100;

const data = rows(ROWS);
const engines = { native: jsonata(MAP), linear: jsonata(MAP, { RegexEngine: LINEAR_REGEX_ENGINE }) };
// identical outputs on every row, before timing
for (const row of data.slice(0, 2000)) {
  const [a, b] = [JSON.stringify(await engines.native.evaluate(row)), JSON.stringify(await engines.linear.evaluate(row))];
  if (a !== b) throw new Error(`outputs differ on ${row.MRN}: ${a} vs ${b}`);
}
await measure(engines.native, data.slice(0, 2000)); // warm-up
await measure(engines.linear, data.slice(0, 2000));

const speed = { native: [], linear: [] };
const cpuSpeed = { native: [], linear: [] };
const perRound = [];
const perRoundCpu = [];
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? ['native', 'linear'] : ['linear', 'native'];
  const got = {};
  for (const m of order) got[m] = await measure(engines[m], data);
  for (const m of order) {
    speed[m].push(got[m].rowsPerSec);
    cpuSpeed[m].push(got[m].rowsPerCpuSec);
  }
  perRound.push(round2(got.linear.rowsPerSec / got.native.rowsPerSec));
  perRoundCpu.push(round2(got.linear.rowsPerCpuSec / got.native.rowsPerCpuSec));
}

// The engines alone, without JSONata: one exec of the DOB pattern (with groups) per call, as JSONata makes it.
function execNs(make) {
  const n = 200_000;
  const dobs = data.slice(0, 1000).map((r) => r.DOB);
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const re = make();
    re.lastIndex = 0;
    re.exec(dobs[i % dobs.length]);
  }
  return Math.round(Number(process.hrtime.bigint() - t) / n);
}
const DOB_RE = /^(\d{2})\/(\d{2})\/(\d{4})$/g;
execNs(() => new RegExp(DOB_RE));
execNs(() => new LinearRegExp(DOB_RE));
const execNsPerCall = { native: execNs(() => new RegExp(DOB_RE)), linear: execNs(() => new LinearRegExp(DOB_RE)) };

const redosLinear = (() => {
  const e = jsonata('$match(NAME, /(a+)+$/)', { RegexEngine: LINEAR_REGEX_ENGINE });
  return async () => {
    const t = process.hrtime.bigint();
    await e.evaluate({ NAME: `${'a'.repeat(40)}!` });
    return Number(process.hrtime.bigint() - t) / 1e6;
  };
})();
await redosLinear();
const redosMs = await redosLinear();
const t24 = process.hrtime.bigint();
await jsonata('$match(NAME, /(a+)+$/)').evaluate({ NAME: `${'a'.repeat(24)}!` });
const redosNative24Ms = Number(process.hrtime.bigint() - t24) / 1e6;

console.log(
  JSON.stringify({
    bench: 'regex-engine',
    rows: ROWS,
    rounds: ROUNDS,
    regexEvaluationsPerRow: 9,
    rowsPerSec: { native: Math.round(median(speed.native)), linear: Math.round(median(speed.linear)) },
    rowsPerCpuSec: { native: Math.round(median(cpuSpeed.native)), linear: Math.round(median(cpuSpeed.linear)) },
    linearVsNative: {
      wall: { median: round2(median(speed.linear) / median(speed.native)), perRound: [Math.min(...perRound), Math.max(...perRound)] },
      cpu: { median: round2(median(cpuSpeed.linear) / median(cpuSpeed.native)), perRound: [Math.min(...perRoundCpu), Math.max(...perRoundCpu)] },
    },
    execNsPerCall,
    redosLinearMs: round2(redosMs),
    redosNative24Ms: Math.round(redosNative24Ms),
    loadAvg: os.loadavg().map((x) => round2(x)),
    node: process.version,
  }),
);
