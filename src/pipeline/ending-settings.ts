/**
 * The ending guard as `run` and `plan` apply it: which allowance holds for a mapping (`--allow-ending`, else its
 * `allowEnding:`, else the schema's default) and the report entry and warning of each decision. The decision
 * itself is `decideEnding` (src/load/ending-guard.ts), shared by both.
 */
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import { defaultAllowEnding } from '../mapping/mapping-defaults.js';
import type { ResourceMapping } from '../mapping/types.js';
import {
  allowanceError,
  decideEnding,
  describeEnding,
  formatAllowance,
  parseAllowance,
  type AllowanceSource,
  type EndingAllowance,
} from '../load/ending-guard.js';
import type { RunReport } from './run-report.js';

export interface EndingSetting {
  allow: EndingAllowance;
  from: AllowanceSource;
  /** The mapping's loaded, not ended resources when its phase starts (before this run's own writes). */
  loaded: number;
}

/**
 * Without a mapping: checks `--allow-ending` alone (a usage error, exit 2, before anything is read). With one: the
 * allowance that holds for it — the flag wins over the mapping's `allowEnding:`, which wins over the default.
 */
export function resolveAllowEnding(flag: string | number | undefined): undefined;
export function resolveAllowEnding(flag: string | number | undefined, res: ResourceMapping, loaded: number): EndingSetting;
export function resolveAllowEnding(flag: string | number | undefined, res?: ResourceMapping, loaded = 0): EndingSetting | undefined {
  const parsedFlag = flag === undefined ? undefined : parseAllowance(flag);
  if (flag !== undefined && !parsedFlag) throw new CareEtlError(allowanceError('--allow-ending', flag), { exitCode: ExitCode.config });
  if (!res) return undefined;
  if (parsedFlag) return { allow: parsedFlag, from: 'flag', loaded };
  const own = res.allowEnding ?? defaultAllowEnding();
  const allow = parseAllowance(own);
  if (!allow) throw new CareEtlError(allowanceError(`resources[${res.index}].allowEnding`, own), { exitCode: ExitCode.config });
  return { allow, from: res.allowEnding === undefined ? 'default' : 'mapping', loaded };
}

/**
 * Decides one mapping's ending, records it in `report.endingGuard` (and, when refused, a warning naming the
 * counts, the limit and the flag that lifts it). True: the run may end them.
 */
export function guardEnding(
  report: RunReport,
  res: CompiledResource,
  setting: EndingSetting,
  tally: { wouldEnd: number; rowsRead: number; membersEnded: number },
): boolean {
  const input = { wouldEnd: tally.wouldEnd, loaded: setting.loaded, rowsRead: tally.rowsRead, allow: setting.allow, from: setting.from };
  const d = decideEnding(input);
  const message = describeEnding(res.def.name, res.def.type, input, d);
  report.endingGuard ??= {};
  report.endingGuard[res.def.name] = {
    wouldEnd: tally.wouldEnd,
    loaded: setting.loaded,
    rowsRead: tally.rowsRead,
    allowance: formatAllowance(setting.allow),
    from: setting.from,
    limit: d.limit,
    allowed: d.allowed,
    ...(d.reason ? { reason: d.reason } : {}),
    ...(tally.membersEnded ? { membersEnded: tally.membersEnded } : {}),
    message,
  };
  if (!d.allowed) {
    const members = tally.membersEnded
      ? ` (${tally.membersEnded} participant(s) dropped from care teams still in the export were ended inside their updates)`
      : '';
    report.warnings.push(`${message}${members}`);
  }
  return d.allowed;
}
