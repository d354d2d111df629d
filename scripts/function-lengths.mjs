#!/usr/bin/env node
// Lists every function, method, accessor, constructor and arrow function under a source folder with its line
// count (first line to last line, inclusive), then prints the longest N and, per file, how many exceed a limit.
// Usage: node scripts/function-lengths.mjs [--root src] [--top 15] [--limit 150] [--json]
// Exits 1 when a function is longer than --limit lines (npm test runs it with --limit 100).
// A nested function is counted on its own and also inside its parent's `lines` (what a reader has to hold in
// their head when reading the outer one); `own` leaves nested functions out.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const root = option('root', 'src');
const top = Number(option('top', '15'));
const limit = Number(option('limit', '150'));
for (const [flag, value] of [
  ['--top', top],
  ['--limit', limit],
]) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`Expected \`${flag}\` to be an integer ≥ 1, got \`${option(flag.slice(2), '')}\``);
    process.exit(2);
  }
}

function* tsFiles(dir) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* tsFiles(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield path;
  }
}

/** The name a reader would use: `Class.method`, `const name = () => …`, `{ key: function … }`, else `<anonymous>`. */
function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) {
    const cls = ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
    return cls + node.name.text;
  }
  if (node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return `${node.parent.name?.text ?? '<class>'}.constructor`;
  const p = node.parent;
  if (p && (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) && p.name) {
    return p.name.getText();
  }
  return '<anonymous>';
}

const isFunctionLike = (node) =>
  ts.isFunctionDeclaration(node) ||
  ts.isFunctionExpression(node) ||
  ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node);

const functions = [];
for (const file of tsFiles(root)) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const stack = [];
  const visit = (node) => {
    if (isFunctionLike(node) && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
      const entry = { file: relative(process.cwd(), file), name: nameOf(node), line: start, lines: end - start + 1, own: end - start + 1 };
      functions.push(entry);
      // `own` = lines not inside a nested function (what remains once inner callbacks are read separately).
      const parent = stack.at(-1);
      if (parent) parent.own -= entry.lines;
      stack.push(entry);
      ts.forEachChild(node, visit);
      stack.pop();
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

functions.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
const perFile = new Map();
for (const f of functions) if (f.lines > limit) perFile.set(f.file, (perFile.get(f.file) ?? 0) + 1);

const overLimit = [...perFile.values()].reduce((a, b) => a + b, 0);
if (overLimit) process.exitCode = 1;
if (args.includes('--json')) {
  console.log(JSON.stringify({ root, limit, functions: functions.length, longest: functions.slice(0, top), overLimit: Object.fromEntries(perFile) }, null, 2));
} else {
  console.log(
    `${functions.length} functions under ${root}/; longest ${Math.min(top, functions.length)} (lines = first to last line; own = without nested functions):`,
  );
  console.log('lines   own  function');
  for (const f of functions.slice(0, top)) {
    console.log(`${String(f.lines).padStart(5)} ${String(f.own).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
  }
  console.log(`\nfunctions > ${limit} lines: ${overLimit}${overLimit ? ' — split them (a phase, a helper per step) or npm test fails' : ' (none)'}`);
  for (const [file, count] of [...perFile].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) {
    console.log(`${String(count).padStart(5)}  ${file}`);
  }
}
