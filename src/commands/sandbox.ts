import { CareCommand, writeUnredacted } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { FaultOptions } from '../sandbox/server.js';
import type { CountParam } from '../sandbox/context.js';
import type { ObservationCodeMode } from '../sandbox/observations.js';

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
    '<%= config.bin %> sandbox --latency 50 --rate-limit 20 --error-503-rate 0.05',
    '<%= config.bin %> sandbox --latency 50 --max-in-flight 24',
  ];
  static override flags = {
    port: flag.port(),
    host: flag.host(),
    data: flag.data(),
    seed: flag.seed(),
    'observations-per-patient': flag['observations-per-patient'](),
    'observation-code': flag['observation-code'](),
    'page-size': flag['page-size']({
      description: 'default page size of lists (_count overrides it unless --count-param says otherwise; max 1000)',
      default: 50,
      max: 1000,
    }),
    'count-param': flag['count-param'](),
    latency: flag.latency(),
    'max-in-flight': flag['max-in-flight'](),
    jitter: flag.jitter(),
    'rate-limit': flag['rate-limit'](),
    'error-503-rate': flag['error-503-rate'](),
    'drop-rate': flag['drop-rate'](),
    'ambiguous-create-rate': flag['ambiguous-create-rate'](),
    'gateway-error-rate': flag['gateway-error-rate'](),
    'fault-seed': flag['fault-seed'](),
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
      gatewayErrorRate: flags['gateway-error-rate'],
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
        observationCode: flags['observation-code'] as ObservationCodeMode,
        pageSize: flags['page-size'],
        countParam: flags['count-param'] as CountParam,
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
