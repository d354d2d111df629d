import { Args, Flags } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import type { ErrorJson } from '../cli/render.js';
import type { ValidateReport } from '../pipeline/validate-mapping.js';

export default class Validate extends CareCommand<ValidateReport | ErrorJson> {
  static override summary = 'Check a mapping file: schema, expressions, sources, references — every problem with file:line:column.';
  static override description = `Validates the mapping against schemas/mapping.schema.json, compiles every JSONata expression, checks that the sources exist and that $ref names resolve without a cycle. Every \`$TODO("…")\` marker left by \`care-etl init\` is reported with its text and position (code \`todo\`), together with the other problems. With --sample N, also runs the first N rows of each source through transform and validation (offline: references resolve to placeholders) and prints the rejections and how many rows a run would skip (where:, or a map producing nothing).

Exit codes: 0 valid (sample rejections are reported, not fatal); 2 the mapping has problems (or a usage error).`;
  static override examples = ['<%= config.bin %> validate examples/clinic/mapping.yaml', '<%= config.bin %> validate mapping.yaml --sample 100 --json'];
  static override args = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
  static override flags = {
    sample: Flags.integer({ description: 'run the first N rows of each source through transform and validation', min: 1 }),
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
      if (!this.jsonEnabled()) {
        for (const w of report.warnings) this.log(formatIssue(w));
        this.log(`${args.mapping}: valid (load order: ${report.order.join(' → ')})`);
        if (report.samples) {
          this.log(table(['mapping', 'rows', 'skipped', 'valid', 'rejected'], Object.entries(report.samples).map(([n, s]) => [n, s.rows, s.skipped, s.valid, s.rejects.length])));
          for (const s of Object.values(report.samples)) for (const r of s.rejects) this.log(`  rejected ${describeReject(r)}`);
        }
      }
      return report;
    } catch (err) {
      return this.fail(err);
    }
  }
}
