import { Flags } from '@oclif/core';
import { CareCommand, writeUnredacted } from '../cli/base-command.js';
import { nonNegativeFlag, positiveIntFlag, rateFlag } from '../cli/number-flags.js';
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { FaultOptions } from '../sandbox/server.js';

export interface SandboxStarted {
  url: string;
  port: number;
  apiKey: string;
  emrId: string;
  tenantId: string;
  tenants: string[];
  dataFile: string | null;
}

export default class SandboxCommand extends CareCommand<void> {
  static override summary = 'Run a local Care Coordination API sandbox (SQLite storage, fault injection).';
  static override description = `Implements the whole service spec on 127.0.0.1 with demo credentials, for trying mappings and loads without touching the real service. Keeps running until Ctrl+C / SIGTERM. Prints the base URL and demo credentials as shell export lines (stdout), or one JSON line with --json. See docs/sandbox.md.`;
  static override examples = [
    '<%= config.bin %> sandbox',
    '<%= config.bin %> sandbox --port 0 --data sandbox.db --json',
    '<%= config.bin %> sandbox --latency 50 --jitter 50 --rate-limit 20 --error-503-rate 0.05 --drop-rate 0.01',
    '<%= config.bin %> sandbox --latency 50 --max-in-flight 24',
  ];
  static override flags = {
    port: Flags.integer({ description: 'TCP port (0 = any free port)', default: 8080, min: 0, max: 65535 }),
    host: Flags.string({ description: 'loopback address to listen on', default: '127.0.0.1' }),
    data: Flags.string({ description: 'SQLite file that keeps the data across restarts (default: in memory)' }),
    seed: Flags.integer({ description: 'seed of the generated Observations', default: 42 }),
    'observations-per-patient': Flags.integer({ description: 'Observations generated per created patient', default: 2, min: 0 }),
    'page-size': Flags.integer({ description: 'default page size of lists (_count overrides, max 1000)', default: 50, min: 1, max: 1000 }),
    // p-queue style validation (src/cli/number-flags.ts), so a typo never silently turns a fault off.
    latency: nonNegativeFlag('latency', 'milliseconds added before each answer'),
    'max-in-flight': positiveIntFlag('max-in-flight', 'requests served at once; the others wait in a first-come queue, so past it the latency grows (a server to saturate; default unlimited)'),
    jitter: nonNegativeFlag('jitter', 'random extra milliseconds (0..jitter) added before each answer'),
    'rate-limit': nonNegativeFlag('rate-limit', 'requests per second per tenant before 429 + Retry-After'),
    'error-503-rate': rateFlag('error-503-rate', 'share of requests answered 503 + Retry-After: 1 (not processed)'),
    'drop-rate': rateFlag('drop-rate', 'share of requests whose connection is dropped before processing'),
    'ambiguous-create-rate': rateFlag('ambiguous-create-rate', 'share of creates stored but answered by a dropped connection'),
    'fault-seed': Flags.integer({ description: 'seed of the fault PRNG (replays the same faults)' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(SandboxCommand);
    const { startSandbox } = await import('../sandbox/server.js');
    const faults: FaultOptions = {
      latencyMs: flags.latency,
      jitterMs: flags.jitter,
      maxInFlight: flags['max-in-flight'],
      rateLimitPerSecond: flags['rate-limit'],
      error503Rate: flags['error-503-rate'],
      dropRate: flags['drop-rate'],
      ambiguousCreateRate: flags['ambiguous-create-rate'],
      seed: flags['fault-seed'],
    };
    const anyFault = Object.entries(faults).some(([k, v]) => k !== 'seed' && v !== undefined && v > 0);

    let sb;
    try {
      sb = await startSandbox({
        host: flags.host,
        port: flags.port,
        dataFile: flags.data,
        seed: flags.seed,
        observationsPerPatient: flags['observations-per-patient'],
        pageSize: flags['page-size'],
        faults: anyFault ? faults : undefined,
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new CareEtlError(`Cannot start the sandbox: ${(err as Error).message}`, {
        exitCode: ExitCode.config,
        hint: code === 'EADDRINUSE' ? `Port ${flags.port} is taken: choose another with --port, or --port 0 for any free one.` : undefined,
        cause: err,
      });
    }

    const { apiKey, emrId, tenants } = sb.credentials;
    const started: SandboxStarted = { url: sb.url, port: sb.port, apiKey, emrId, tenantId: tenants[0]!, tenants, dataFile: flags.data ?? null };
    if (this.jsonEnabled()) {
      // One line, printed now (not on exit): scripts and the bench read the URL from it.
      writeUnredacted(process.stdout, `${JSON.stringify(started)}\n`);
    } else {
      // A local demo key: printing it is the point. Exports on stdout, chatter on stderr.
      process.stderr.write(
        `Care Coordination sandbox on ${sb.url} (${flags.data ? `data in ${flags.data}` : 'in-memory data'})\n` +
          `Tenants: ${tenants.join(', ')}${anyFault ? `\nFaults: ${JSON.stringify(faults)}` : ''}\n`,
      );
      writeUnredacted(
        process.stdout,
        `${[`export CARE_BASE_URL=${sb.url}`, `export CARE_API_KEY=${apiKey}`, `export CARE_EMR_ID=${emrId}`, `export CARE_TENANT_ID=${tenants[0]}`].join('\n')}\n`,
      );
      process.stderr.write('Press Ctrl+C to stop.\n');
    }

    // The shell turns SIGINT/SIGTERM into this.signal.
    await new Promise<void>((resolve) => (this.signal.aborted ? resolve() : this.signal.addEventListener('abort', () => resolve(), { once: true })));
    await sb.close();
    if (!this.jsonEnabled()) process.stderr.write('Sandbox stopped.\n');
  }
}
