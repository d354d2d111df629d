import { Args } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import type { ErrorJson } from '../cli/render.js';
import type { TestReport } from '../mapping-tests/types.js';

export default class Test extends CareCommand<TestReport | ErrorJson> {
  static override summary = 'Run the test cases of mapping files (*.test.yaml), offline.';
  static override description = `Finds every *.test.yaml under the given files and folders (default: the current folder) and runs its cases: input rows (inline or from a fixture file) go through one resource mapping exactly as in \`care-etl run\` — key, groupBy, map, schema validation — with $ref targets stubbed from the case's refs:, and the result is compared with the expected resource (expect), part of it (expectSubset) or rejection (reject). No server is contacted.

Failures show a structural diff (path, expected, got) and, for rejections, the file:line:column of the failing expression in the mapping. Test files are described in schemas/mapping-test.schema.json.

Exit codes: 0 every case passed; 1 some case failed; 2 a test file or its mapping is broken (or no test file was found).`;
  static override examples = [
    '<%= config.bin %> test',
    '<%= config.bin %> test mappings/synthea',
    '<%= config.bin %> test mappings/synthea/mapping.yaml',
    '<%= config.bin %> test mappings examples --json',
    '<%= config.bin %> test mapping.test.yaml --grep careteam',
    '<%= config.bin %> test --reporter junit --out junit.xml',
  ];
  static override strict = false;
  static override args = {
    paths: Args.string({
      description: 'test files (*.test.yaml), folders to search recursively, or mapping files (their tests beside them); default: the current folder',
      required: false,
    }),
  };
  static override flags = {
    grep: flag.grep(),
    reporter: flag.reporter(),
    out: flag.out({ description: '--reporter junit: write the XML to this file (mode 0600); the case list stays on stdout' }),
  };

  async run(): Promise<TestReport | ErrorJson> {
    const { argv, flags } = await this.parse(Test);
    const [{ runMappingTests }, { formatFile, formatSummary }, { colourOn }, { testVerdict, writeVerdict }] = await Promise.all([
      import('../mapping-tests/run-mapping-tests.js'),
      import('../mapping-tests/format-report.js'),
      import('../cli/terminal.js'),
      import('../cli/terminal-verdict.js'),
    ]);
    const json = this.jsonEnabled();
    // JUnit XML on stdout: the case list is left out, the summary goes to stderr.
    const junitOnStdout = flags.reporter === 'junit' && flags.out === undefined;
    const color = !json && !junitOnStdout && colourOn(process.stdout);
    let report: TestReport;
    try {
      report = await runMappingTests(argv as string[], {
        grep: flags.grep,
        onFile: json || junitOnStdout ? undefined : (r) => this.log(formatFile(r, { color }).join('\n')),
      });
    } catch (err) {
      return this.fail(err);
    }
    if (flags.reporter === 'junit') await writeJunit(report, flags.out);
    if (junitOnStdout) this.info(formatSummary(report));
    else if (!json) {
      this.log('');
      this.log(formatSummary(report, { color }));
      if (this.logLevel !== 'quiet') writeVerdict(testVerdict(report));
    }
    process.exitCode = report.exitCode;
    return report;
  }
}

/** JUnit XML to `out` (mode 0600, replaced whole), or stdout. */
async function writeJunit(report: TestReport, out: string | undefined): Promise<void> {
  const [{ renderJunit }, { writeOutputFile }] = await Promise.all([import('../mapping-tests/junit-report.js'), import('../core/secure-fs.js')]);
  const xml = renderJunit(report);
  if (out) await writeOutputFile(out, xml);
  else process.stdout.write(xml);
}
