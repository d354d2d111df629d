#!/usr/bin/env node
// Exported names of src/ that no other file of src/, test/, bench/ or scripts/ mentions (a word match: a name
// also used as a property elsewhere is kept — this lists candidates, it never misses a real import).
// `dead` = not used in its own file either; `local` = used only where it is defined (the `export` is unneeded).
// Default exports and src/commands, src/hooks (loaded by oclif by path) are left out.
// A re-export (`export { x } from './y.js'`, `export { x }`) is `dead` when no other file names x and imports this file.
// Usage: node scripts/unused-exports.mjs — exits 1 when something is `dead` (`local` is informational).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

function* files(dir, exts) {
  for (const name of readdirSync(dir).sort()) {
    if (name === 'node_modules' || name === 'fixtures') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path, exts);
    else if (exts.some((e) => name.endsWith(e))) yield path;
  }
}

const texts = new Map();
for (const dir of ['src', 'test', 'bench', 'scripts']) {
  for (const f of files(dir, ['.ts', '.mts', '.mjs', '.js'])) texts.set(f, readFileSync(f, 'utf8'));
}

const isExported = (node) => ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export;
function exportedNames(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out = [];
  for (const st of source.statements) {
    if (ts.isExportDeclaration(st)) continue; // re-exports: the name is defined elsewhere
    if (!(ts.canHaveModifiers(st) && isExported(st))) continue;
    if (st.modifiers?.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword)) continue;
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name)) out.push(d.name.text);
    } else if (st.name && ts.isIdentifier(st.name)) out.push(st.name.text);
  }
  return out;
}

/** Names a file re-exports: `export { a, type B } from '…'` and `export { a }` of an imported name. */
function reExportedNames(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out = [];
  for (const st of source.statements) {
    if (!ts.isExportDeclaration(st) || !st.exportClause || !ts.isNamedExports(st.exportClause)) continue;
    for (const el of st.exportClause.elements) out.push(el.name.text);
  }
  return out;
}

/** The files of `texts` a file's relative module specifiers ('./x.js', '../y/index.js') point at. */
function importedFiles(file, text) {
  const out = new Set();
  for (const m of text.matchAll(/['"](\.{1,2}\/[^'"]+?)\.(?:js|ts)['"]/g)) out.add(join(dirname(file), `${m[1]}.ts`));
  return out;
}

const escape = (s) => s.replace(/[$]/g, '\\$');
const rows = [];
for (const [file, text] of texts) {
  if (!file.startsWith('src/') || !file.endsWith('.ts') || /^src\/(commands|hooks)\//.test(file)) continue;
  for (const name of exportedNames(file, text)) {
    const word = new RegExp(`(?<![\\w$])${escape(name)}(?![\\w$])`, 'g');
    const elsewhere = [...texts].some(([f, t]) => f !== file && word.test(t));
    if (elsewhere) continue;
    const own = text.match(word)?.length ?? 0;
    rows.push({ file: relative(process.cwd(), file), name, kind: own > 1 ? 'local' : 'dead' });
  }
}
const importers = new Map([...texts].map(([f, t]) => [f, importedFiles(f, t)]));
for (const [file, text] of texts) {
  if (!file.startsWith('src/') || !file.endsWith('.ts')) continue;
  for (const name of reExportedNames(file, text)) {
    const word = new RegExp(`(?<![\\w$])${escape(name)}(?![\\w$])`);
    const used = [...texts].some(([f, t]) => f !== file && importers.get(f).has(file) && word.test(t));
    if (!used) rows.push({ file: relative(process.cwd(), file), name: `${name} (re-export)`, kind: 'dead' });
  }
}
for (const r of rows.sort((a, b) => a.kind.localeCompare(b.kind) || a.file.localeCompare(b.file))) {
  console.log(`${r.kind.padEnd(5)}  ${r.file}  ${r.name}`);
}
const dead = rows.filter((r) => r.kind === 'dead').length;
console.log(`\n${dead} dead, ${rows.filter((r) => r.kind === 'local').length} exported but used only in their own file`);
if (dead) {
  console.error(`${dead} dead export(s): delete the export (or the code) — nothing outside the file uses it.`);
  process.exitCode = 1;
}
