/**
 * docs/issue-codes.md is generated from src/core/issues.ts: this fails while the page on disk differs from what
 * the script would write now (a code added, renamed or described anew without refreshing the page).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ISSUE_CODE_MEANINGS, ISSUE_CODES } from '../../src/core/issues.js';
import { issueCodesPage, PAGE, REFRESH_COMMAND } from '../../scripts/issue-codes-doc.mjs';

const ROOT = join(import.meta.dirname, '../..');

test('docs/issue-codes.md is the page generated from ISSUE_CODES', () => {
  let onDisk = '';
  try {
    onDisk = readFileSync(join(ROOT, PAGE), 'utf8');
  } catch {
    // missing: compared as empty, so the message below says how to write it
  }
  expect(onDisk, `${PAGE} is stale: run \`${REFRESH_COMMAND}\` and commit the page`).toBe(issueCodesPage());
});

test('the page names every code with its meaning', () => {
  const page = issueCodesPage();
  for (const code of ISSUE_CODES) expect(page).toContain(`| \`${code}\` | ${ISSUE_CODE_MEANINGS[code].replace(/\|/g, '\\|')} |`);
});
