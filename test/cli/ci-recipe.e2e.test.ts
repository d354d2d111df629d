import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { BIN, cleanEnv, ROOT } from '../helpers/cli.js';

const DOC = readFileSync(join(ROOT, 'docs/ci.md'), 'utf8');

/** The YAML block after `<!-- ci-recipe: NAME …-->` in docs/ci.md. */
function recipe(name: string): Record<string, unknown> {
  const m = new RegExp(`<!-- ci-recipe: ${name}\\b[^\\n]*-->\\n\`\`\`yaml\\n([\\s\\S]*?)\\n\`\`\``).exec(DOC);
  if (!m) throw new Error(`docs/ci.md has no block marked ci-recipe: ${name}`);
  return parse(m[1]!) as Record<string, unknown>;
}

/**
 * A runner's workspace: the example clinic as `clinic/`, `care-etl` on PATH (the built CLI: the recipes' install
 * step is not run), the job's literal variables; `${{ … }}` ones (secrets, vars) stay unset, and so does CI, so the
 * run goes to the embedded sandbox.
 */
function workspace(vars: Record<string, unknown>): { dir: string; env: Record<string, string | undefined> } {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-ci-'));
  cpSync(join(ROOT, 'examples/clinic'), join(dir, 'clinic'), { recursive: true, filter: (src) => !src.includes('.care-etl') });
  const bin = join(dir, '.bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'care-etl'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(join(bin, 'care-etl'), 0o755);
  const literal = Object.entries(vars).filter(([, v]) => typeof v === 'string' && !v.includes('${{') && !v.includes('$CARE_'));
  const base = cleanEnv();
  return { dir, env: { ...base, ...Object.fromEntries(literal), PATH: `${bin}:${base.PATH}` } as Record<string, string | undefined> };
}

/** One shell step as the runner runs it: the script in a file, `bash -e` (plus `-o pipefail` where the runner adds it). */
function bash(script: string, dir: string, env: Record<string, string | undefined>, pipefail: boolean): number {
  const file = join(dir, `.step-${Math.random().toString(36).slice(2)}.sh`);
  writeFileSync(file, script);
  const r = spawnSync('bash', ['--noprofile', '--norc', '-e', ...(pipefail ? ['-o', 'pipefail'] : []), file], {
    cwd: dir,
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return r.status ?? -1;
}

describe('docs/ci.md recipes, their shell steps under bash -e on the example clinic (9 of 90 rows rejected)', () => {
  it('GitHub Actions: the load step exits 1, the step summary and the artifacts are written all the same', () => {
    expect(DOC).toContain('the load step exits **1**');
    const job = (recipe('github-actions').jobs as Record<string, { env: Record<string, unknown>; steps: Record<string, unknown>[] }>).load!;
    const { dir, env } = workspace(job.env);
    env.GITHUB_STEP_SUMMARY = join(dir, 'step-summary.md');
    const status: Record<string, number> = {};
    let failed = false;
    for (const step of job.steps) {
      if (typeof step.run !== 'string' || step.id === 'install') continue;
      // No `if:` means success(): skipped once a step failed; `always()` runs regardless.
      if (failed && step.if !== 'always()') continue;
      // GitHub's default shell is `bash -e {0}`; `shell: bash` adds pipefail.
      const code = bash(step.run, dir, env, step.shell === 'bash');
      status[String(step.name ?? step.run)] = code;
      if (code !== 0) failed = true;
    }
    expect(status).toEqual({ 'Mapping tests': 0, Load: 1, 'Job summary': 0 });
    expect(readFileSync(env.GITHUB_STEP_SUMMARY, 'utf8')).toContain('## care-etl run report');
    const upload = job.steps.find((s) => String(s.uses).startsWith('actions/upload-artifact'))!;
    const paths = String((upload.with as { path: string }).path)
      .trim()
      .split('\n');
    for (const p of paths) expect(existsSync(join(dir, p)), p).toBe(true);
    expect(readFileSync(join(dir, 'clinic/.care-etl/rejects.summary.csv'), 'utf8').trim().split('\n')).toHaveLength(10); // header + 9
  });

  it('GitLab CI: the script exits 1, after_script runs, the artifacts and the JUnit report exist', () => {
    const job = recipe('gitlab')['care-etl-load'] as {
      variables: Record<string, unknown>;
      script: string[];
      after_script: string[];
      artifacts: { paths: string[]; reports: { junit: string } };
    };
    const { dir, env } = workspace(job.variables);
    // GitLab's bash runs the script lines as one script under `set -eo pipefail`, after_script in a shell of its own.
    expect(bash(job.script.join('\n'), dir, env, true)).toBe(1);
    expect(bash(job.after_script.join('\n'), dir, env, true)).toBe(0);
    for (const p of [...job.artifacts.paths, job.artifacts.reports.junit]) expect(existsSync(join(dir, p)), p).toBe(true);
    expect(readFileSync(join(dir, 'report.md'), 'utf8')).toContain('## care-etl run report');
  });
});
