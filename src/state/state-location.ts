/**
 * Where the state lives: a local SQLite file (the default, `.care-etl/state.db` beside the mapping) or a
 * PostgreSQL database (`postgres://` / `postgresql://` URL). Chosen by `--state`, then `CARE_STATE_URL`, then the
 * mapping's `state:` key. A URL's password never leaves this module except toward the database: it is registered
 * as a secret (every output is redacted) and the location as shown drops it.
 */
import { isAbsolute, join, resolve } from 'node:path';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { registerSecret } from '../core/secret.js';

export const DEFAULT_PG_SCHEMA = 'care_etl';

export function isPostgresLocation(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location.trim());
}

export interface StateLocationInput {
  /** `--state` */
  flag?: string;
  env?: NodeJS.ProcessEnv;
  /** The mapping's `state:` key (a path is relative to the mapping's folder). */
  mappingState?: string;
  /** The mapping's folder: its `.care-etl/state.db` is the default. */
  mappingDir: string;
}

/** flag > CARE_STATE_URL > the mapping's `state:` > `.care-etl/state.db` beside the mapping. Paths come back absolute. */
export function resolveStateLocation(input: StateLocationInput): string {
  const fromEnv = input.env?.CARE_STATE_URL?.trim() || undefined;
  const chosen = input.flag ?? fromEnv;
  if (chosen !== undefined) return isPostgresLocation(chosen) ? registered(chosen.trim()) : resolve(chosen);
  if (input.mappingState !== undefined) {
    const s = input.mappingState.trim();
    return isPostgresLocation(s) ? registered(s) : isAbsolute(s) ? s : resolve(input.mappingDir, s);
  }
  return resolve(join(input.mappingDir, '.care-etl', 'state.db'));
}

/** A URL's password is a secret from the moment the URL is known (`--state`'s parse, the environment, the mapping). */
export function registerStateSecret(location: string): void {
  if (!isPostgresLocation(location)) return;
  try {
    parsePostgresLocation(location);
  } catch {
    // registered before the parse failed
  }
}

/** `user:password@` in a URL that `new URL` may not accept: the password is group 2. */
const PASSWORD_IN_URL = /(\/\/[^:/@]*):([^@]*)@/;

const withoutPassword = (raw: string): string => raw.replace(PASSWORD_IN_URL, '$1@');

function registered(url: string): string {
  registerStateSecret(url);
  return url;
}

export interface PostgresLocation {
  /** What pg connects to (the `schema` parameter removed). */
  connectionString: string;
  schema: string;
  /** The URL without its password: the only form printed. */
  display: string;
}

/** Parses a postgres URL and registers its password as a secret (before anything could print it). */
export function parsePostgresLocation(location: string): PostgresLocation {
  const raw = location.trim();
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    const password = PASSWORD_IN_URL.exec(raw)?.[2];
    if (password) registerSecret(password);
    throw new CareEtlError(`State URL ${withoutPassword(raw)} is not a valid URL.`, {
      hint: 'write it as postgres://user@host:5432/database (the password in PGPASSWORD or ~/.pgpass)',
      exitCode: ExitCode.config,
    });
  }
  if (url.password) {
    registerSecret(url.password);
    try {
      registerSecret(decodeURIComponent(url.password));
    } catch {
      // not percent-encoded text: the raw form is registered
    }
  }
  const schema = url.searchParams.get('schema') ?? DEFAULT_PG_SCHEMA;
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new CareEtlError(`State URL: schema "${schema}" is not a plain PostgreSQL identifier.`, {
      hint: 'use letters, digits and _ (default care_etl), e.g. ?schema=care_etl_prod',
      exitCode: ExitCode.config,
    });
  }
  url.searchParams.delete('schema');
  const connectionString = url.toString();
  const shown = new URL(url.toString());
  shown.password = '';
  if (schema !== DEFAULT_PG_SCHEMA) shown.searchParams.set('schema', schema);
  return { connectionString, schema, display: shown.toString() };
}

/** The location as printed anywhere (report, `runs`, errors): a URL without its password, a file path as is. */
export function displayStateLocation(location: string): string {
  if (!isPostgresLocation(location)) return location;
  try {
    return parsePostgresLocation(location).display;
  } catch {
    return withoutPassword(location);
  }
}
