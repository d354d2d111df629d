import { Args } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import { ExitCode } from '../core/issues.js';
import type { ErrorJson } from '../cli/render.js';
import type { ValidateReport } from '../pipeline/validate-mapping.js';

export default class Validate extends CareCommand<ValidateReport | ErrorJson> {
  static override summary = 'Check a mapping file: every problem with its file:line:column.';
  static override description = `Validates the mapping against schemas/mapping.schema.json, compiles every JSONata expression, checks that the sources exist and that $ref names resolve without a cycle. Every \`$TODO("…")\` marker left by \`care-etl init\` is reported with its text and position (code \`todo\`), together with the other problems. With --sample N, also runs the first N rows of each source through transform, validation and the loader's offline checks (match values; offline: references resolve to placeholders — except a key the sample read the target's whole source without meeting, rejected as a run rejects it unless an earlier run loaded it) and prints the rejections and how many rows a run would skip (where:, or a map producing nothing) — every reason a run would reject a row without asking the server.

Exit codes: 0 valid (and no sampled row rejected); 1 valid, but sampled rows were rejected (0 with --allow-rejects); 2 the mapping has problems (or a usage error).`;
  static override examples = [
    '<%= config.bin %> validate examples/clinic/mapping.yaml',
    '<%= config.bin %> validate mapping.yaml --sample 100 --json',
    '<%= config.bin %> validate mapping.yaml --sample 100 --allow-rejects',
  ];
  static override args = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
  static override flags = {
    sample: flag.sample(),
    'allow-rejects': flag['allow-rejects'](),
  };

  async run(): Promise<ValidateReport | ErrorJson> {
    const { args, flags } = await this.parse(Validate);
    const [{ validateMapping }, { table }, { describeReject }, { formatIssue }] = await Promise.all([
      import('../pipeline/validate-mapping.js'),
      import('../cli/render.js'),
      import('../pipeline/rejects.js'),
      import('../core/issues.js'),
    ]);
    try {
      const report = await validateMapping(args.mapping, { sample: flags.sample });
      // A gate: a sampled row the run would reject fails the check (README "Exit codes": 1, rows rejected).
      const rejected = Object.values(report.samples ?? {}).reduce((n, s) => n + s.rejects.length, 0);
      process.exitCode = rejected && !flags['allow-rejects'] ? ExitCode.rejected : ExitCode.ok;
      if (!this.jsonEnabled()) {
        for (const w of report.warnings) this.log(formatIssue(w));
        this.log(`${args.mapping}: valid (load order: ${report.order.join(' → ')})`);
        if (report.samples) {
          // A `skipped` column only when rows were skipped (where:, a map producing nothing), as in the run's summary.
          const skips = Object.values(report.samples).some((s) => s.skipped > 0);
          const head = ['mapping', 'rows', ...(skips ? ['skipped'] : []), 'valid', 'rejected'];
          this.log(
            table(
              head,
              Object.entries(report.samples).map(([n, s]) => [n, s.rows, ...(skips ? [s.skipped] : []), s.valid, s.rejects.length]),
            ),
          );
          for (const s of Object.values(report.samples)) for (const r of s.rejects) this.log(`  rejected ${describeReject(r)}`);
          // Every sampled row skipped is a `where:` that never holds (`SEX = "M"` on `m`) far more often than intended.
          for (const [n, s] of Object.entries(report.samples))
            if (s.rows > 0 && s.skipped === s.rows)
              this.log(
                `warning: every sampled row of \`${n}\` (${s.rows}) was skipped — by its \`where:\` or a map producing nothing: a run would load none of them; check the condition (values compare exactly, case included)`,
              );
          if (rejected)
            this.log(
              `${rejected} sampled row(s) rejected: a run would reject them too${flags['allow-rejects'] ? ' (--allow-rejects: exit 0)' : ' (exit 1; --allow-rejects to accept)'}`,
            );
        }
      }
      return report;
    } catch (err) {
      return this.fail(err);
    }
  }
}
