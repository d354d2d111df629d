// Loading a mapping whose inline lookup has hundreds of thousands of keys (issue 25, item 5): the YAML parser's own
// unique-keys check was quadratic (a 200k-key mapping still parsing after 120 s); duplicate keys are now found with a
// Set. `loadMapping` (read, parse, duplicate check, schema, lookups, compile) of an inline lookup of SMALL and LARGE
// keys, best of ROUNDS each, wall and CPU (the steadier figure when other jobs share the machine); `ratio` = large /
// small wall time (linear: the keys ratio, 10). Also a lookup FILE (CSV) of LARGE rows.
// Usage: npm run build && node bench/large-mapping.mjs [LARGE] [SMALL] [ROUNDS]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { loadMapping } from '../dist/mapping/load-mapping.js';

const LARGE = Number(process.argv[2] ?? 200_000);
const SMALL = Number(process.argv[3] ?? 20_000);
const ROUNDS = Number(process.argv[4] ?? 3);
const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-mapping-'));

function mapping(keys, lookupFile) {
  let text = 'version: 1\nsources:\n  patients: { path: patients.csv }\nlookups:\n';
  if (lookupFile) text += `  codes: { path: ${lookupFile}, key: CODE, value: LABEL }\n`;
  else {
    text += '  codes:\n';
    for (let i = 0; i < keys; i++) text += `    C${i}: label-${i}\n`;
  }
  text += 'resources:\n  - name: patient\n    type: Patient\n    from: patients\n    key: MRN\n';
  text += '    map: |\n      { "identifier": [{ "system": "urn:mrn", "value": MRN }], "gender": $lookup("codes", SEX) }\n';
  return text;
}

const cpu = {};
async function best(file, name) {
  let min = Infinity;
  cpu[name] = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const t = performance.now();
    const c = process.cpuUsage();
    await loadMapping(file, { env: {} });
    const used = process.cpuUsage(c);
    min = Math.min(min, performance.now() - t);
    cpu[name] = Math.min(cpu[name], Math.round((used.user + used.system) / 1000));
  }
  return Math.round(min);
}

try {
  writeFileSync(join(dir, 'patients.csv'), 'MRN,SEX\n1,C1\n');
  const files = {};
  for (const n of [SMALL, LARGE]) writeFileSync((files[n] = join(dir, `inline-${n}.yaml`)), mapping(n));
  let csv = 'CODE,LABEL\n';
  for (let i = 0; i < LARGE; i++) csv += `C${i},label-${i}\n`;
  writeFileSync(join(dir, 'codes.csv'), csv);
  writeFileSync(join(dir, 'file.yaml'), mapping(0, 'codes.csv'));
  const small = await best(files[SMALL], 'inlineSmall');
  const large = await best(files[LARGE], 'inlineLarge');
  const lookupFile = await best(join(dir, 'file.yaml'), 'lookupFileLarge');
  const line = {
    bench: 'large-mapping',
    keys: { small: SMALL, large: LARGE },
    ms: { inlineSmall: small, inlineLarge: large, lookupFileLarge: lookupFile },
    cpuMs: cpu,
    ratio: Number((large / small).toFixed(2)),
    cpuRatio: Number((cpu.inlineLarge / cpu.inlineSmall).toFixed(2)),
    loadAvg: os.loadavg().map((l) => Number(l.toFixed(2))),
    node: process.version,
  };
  console.log(JSON.stringify(line));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
