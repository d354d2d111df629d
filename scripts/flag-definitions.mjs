#!/usr/bin/env node
// Definitions per flag name under a source folder: how many places define a flag of that name. A definition is a
// property `name: <call>` whose call is oclif's `Flags.x(…)` or a flag factory (`positiveIntFlag(…)`, any `…Flag(…)`),
// or an entry of the catalogue in src/cli/flags.ts; a command's `name: flag.x(…)` derives from it and is a use.
// Usage: node scripts/flag-definitions.mjs [--root src] [--json] [--check]   (--check: exit 1 when a name has two)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const i = args.indexOf('--root');
const root = i >= 0 && args[i + 1] ? args[i + 1] : 'src';

function* tsFiles(dir) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* tsFiles(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield path;
  }
}

const isFlagCall = (callee) => /^Flags\.\w+$/.test(callee) || /^\w+Flag$/.test(callee);
/** `export const flag = { … }` in src/cli/flags.ts: each property is the one definition of its name. */
const isCatalogue = (node) => ts.isVariableDeclaration(node.parent) && node.parent.name.getText() === 'flag';

const definitions = new Map();
for (const file of tsFiles(root)) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isPropertyAssignment(node) && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)) && ts.isCallExpression(node.initializer)) {
      const callee = node.initializer.expression.getText(source).replace(/<.*>$/s, '');
      if (isFlagCall(callee) || isCatalogue(node.parent)) {
        const name = node.name.text;
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        definitions.set(name, [...(definitions.get(name) ?? []), `${relative(process.cwd(), file)}:${line + 1}`]);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

const rows = [...definitions]
  .map(([name, at]) => ({ name, definitions: at.length, at }))
  .sort((a, b) => b.definitions - a.definitions || a.name.localeCompare(b.name));
if (args.includes('--json')) console.log(JSON.stringify(rows, null, 2));
else {
  console.log(`${rows.length} flag names under ${root}/; definitions per name (most first):`);
  for (const r of rows) console.log(`${String(r.definitions).padStart(3)}  ${r.name}${r.definitions > 1 ? `  (${r.at.join(', ')})` : ''}`);
}
if (args.includes('--check') && rows.some((r) => r.definitions > 1)) process.exit(1);
