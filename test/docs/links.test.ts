/**
 * The README stays a newcomer's page (≤ 16 KB, issue 26) and every relative Markdown link in it and in docs/ leads
 * somewhere: text moved between pages must not leave a link to a file (or a heading) that is not there.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '../..');
const README_LIMIT_BYTES = 16 * 1024;

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdownFiles(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

/** Link targets outside fenced code blocks and inline code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '``');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const headings = markdown.replace(/^```[\s\S]*?^```/gm, '').match(/^#{1,6} .*$/gm) ?? [];
  return new Set(
    headings.map((h) =>
      h
        .replace(/^#+ /, '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(readFileSync(file, 'utf8'))) {
    if (/^([a-z]+:|#)/i.test(target)) continue;
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const dest = resolve(dirname(file), decodeURIComponent(path));
    const where = `${relative(ROOT, file)} → ${target}`;
    if (!existsSync(dest)) broken.push(`${where}: no such file`);
    else if (anchor && dest.endsWith('.md') && statSync(dest).isFile() && !anchorsOf(readFileSync(dest, 'utf8')).has(anchor)) {
      broken.push(`${where}: no heading with that anchor`);
    }
  }
  return broken;
}

describe('README and docs/', () => {
  it('README.md stays under 16 KB', () => {
    expect(statSync(join(ROOT, 'README.md')).size).toBeLessThanOrEqual(README_LIMIT_BYTES);
  });

  it('every relative link in README.md and docs/ leads to an existing file (and heading)', () => {
    const files = [join(ROOT, 'README.md'), ...markdownFiles(join(ROOT, 'docs'))];
    expect(files.flatMap(brokenLinks)).toEqual([]);
  });
});
