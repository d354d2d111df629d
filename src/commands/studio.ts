import { Args } from '@oclif/core';
import { spawn } from 'node:child_process';
import { CareCommand } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import { CareEtlError, ExitCode } from '../core/issues.js';

export interface StudioStarted {
  url: string;
  port: number;
}

/** Loopback: 127.0.0.0/8, ::1, localhost. */
const isLoopback = (host: string) => /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === '::1' || host === 'localhost';

export default class Studio extends CareCommand<void> {
  static override summary = 'Edit a mapping in a local page and see every sampled row mapped, rejected or skipped as you type.';
  static override description = `Serves the mapping studio on 127.0.0.1 (a free port; the URL carries a one-time token): the mapping in an editor, mapping errors at their line and column, and for a chosen resource mapping the first --sample rows of its source — each row's resource, validation issues, reject or skip reason and the $refs it resolves (stubbed as \`care-etl test\` stubs them) — refreshed on every edit. Saves the file on request (atomically), and adds a row as a case of the mapping's *.test.yaml. Offline: no API setting is read, no request is sent. Stays up until Ctrl+C / SIGTERM (exit 0). See docs/studio.md.`;
  static override examples = [
    '<%= config.bin %> studio examples/clinic/mapping.yaml',
    '<%= config.bin %> studio mapping.yaml --no-open --port 8300 --sample 5000',
  ];
  static override args = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
  static override flags = {
    port: flag.port({ description: 'TCP port (0 = any free port)', default: 0 }),
    host: flag.host({
      description: 'address to listen on; other than loopback only when asked (a warning: anyone who can reach it and has the URL can read the data)',
    }),
    open: flag.open(),
    sample: flag.sample({ description: 'rows of each source shown and counted (the first N)', default: 1000 }),
  };

  protected override cancelNotice(sig: NodeJS.Signals): string {
    return `${sig}: stopping the studio (unsaved edits in the page are not saved)`;
  }

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Studio);
    const [{ startStudio }, { readTextFile }] = await Promise.all([import('../studio/server.js'), import('../core/read-text-file.js')]);
    await readTextFile(args.mapping, args.mapping, 'mapping file'); // a missing file: exit 2 now, not a page of errors
    if (!isLoopback(flags.host))
      process.stderr.write(`Warning: listening on ${flags.host}, not loopback — anyone who can reach it and has the URL can read the export's rows.\n`);
    let studio;
    try {
      studio = await startStudio({ mappingFile: args.mapping, host: flags.host, port: flags.port, sampleSize: flags.sample });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new CareEtlError(`Cannot start the studio: ${(err as Error).message}`, {
        exitCode: ExitCode.config,
        hint: code === 'EADDRINUSE' ? `Port ${flags.port} is taken: choose another with --port, or --port 0 for any free one.` : undefined,
        cause: err,
      });
    }
    if (this.jsonEnabled()) process.stdout.write(`${JSON.stringify({ url: studio.url, port: studio.port } satisfies StudioStarted)}\n`);
    else {
      process.stdout.write(`Studio: ${studio.url}\n`);
      process.stderr.write('Press Ctrl+C to stop.\n');
    }
    if (flags.open) openBrowser(studio.url);
    // The shell turns SIGINT/SIGTERM into this.signal.
    await new Promise<void>((resolve) => (this.signal.aborted ? resolve() : this.signal.addEventListener('abort', () => resolve(), { once: true })));
    await studio.close();
  }
}

/** The platform's opener, detached; a missing one (a server without a desktop) is no error. */
function openBrowser(url: string): void {
  const [cmd, argv] =
    process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '""', url]] : ['xdg-open', [url]];
  try {
    const child = spawn(cmd, argv as string[], { detached: true, stdio: 'ignore' });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // best effort
  }
}
