/**
 * JSONata's own synchronous built-ins (`$fromMillis`, `$formatNumber`, `$distinct` …), called directly by compiled
 * code: the very implementation and signature check the interpreter uses, so no port to keep in step. They live
 * in the interpreter's environment, reached once through JSONata's evaluate-entry hook (the one its timeout
 * guard uses), which runs synchronously at the start of an evaluation.
 */
import { jsonataExpression } from '../../core/jsonata-package.js';
import { fastFromMillis, fastToMillis } from './date-time.js';
import { bail, seq } from './runtime.js';
import { parseSignature, type Signature } from './signature.js';
import type { CallableFunction } from './types.js';

interface Native {
  implementation: (...args: unknown[]) => unknown;
  signature?: { validate(args: unknown[], context: unknown): unknown[]; definition: string };
}

interface NativeEnvironment {
  lookup(name: string): unknown;
}

/**
 * Pure, synchronous and independent of the time of evaluation (`$toMillis` with a picture reads the evaluation's
 * timestamp, `$random` / `$shuffle` are random: not here). `this` of these is the focus below.
 */
const DIRECT = [
  'fromMillis',
  'formatNumber',
  'formatBase',
  'formatInteger',
  'parseInteger',
  'distinct',
  'round',
  'power',
  'sqrt',
  'pad',
  'reverse',
  'merge',
  'spread',
  'type',
  'zip',
  'base64encode',
  'base64decode',
  'encodeUrlComponent',
  'encodeUrl',
  'decodeUrlComponent',
  'decodeUrl',
] as const;

let environment: NativeEnvironment | null | undefined;

/** JSONata's environment, or null if a future JSONata no longer calls the hook synchronously (then no natives here). */
function nativeEnvironment(): NativeEnvironment | null {
  if (environment !== undefined) return environment;
  const probe = jsonataExpression('0');
  probe.assign(Symbol.for('jsonata.__evaluate_entry') as unknown as string, (_expr: unknown, _input: unknown, env: NativeEnvironment) => {
    environment ??= env;
  });
  probe.evaluate({}).catch(() => undefined);
  environment ??= null;
  return environment;
}

function native(name: string): Native | undefined {
  const n = nativeEnvironment()?.lookup(name) as Native | undefined;
  return n && typeof n.implementation === 'function' ? n : undefined;
}

/** The number of arguments JSONata hands a built-in given to `$map` & co. (its implementation's `length`). */
export function nativeArity(name: string): number | undefined {
  return native(name)?.implementation.length;
}

function ourSignature(definition: string): Signature {
  try {
    return parseSignature(definition);
  } catch {
    return { definition, validate: () => bail(), readsContext: () => true }; // a form ours does not read: assume it may
  }
}

/** JSONata's built-ins compiled calls run as they are, by name without `$`. `$toMillis` only without a picture. */
export function nativeCallables(): Map<string, CallableFunction> {
  const out = new Map<string, CallableFunction>();
  const add = (name: string, maxArgs?: number) => {
    const n = native(name);
    if (!n) return; // stays on the interpreter
    const focus = { environment: nativeEnvironment(), input: undefined as unknown, options: {}, createSequence: seq };
    out.set(name, {
      arity: n.implementation.length,
      contextSignature: n.signature ? ourSignature(n.signature.definition) : undefined,
      maxArgs,
      call(args, input) {
        focus.input = input;
        const validated = n.signature ? n.signature.validate(args, input) : args;
        const result = n.implementation.apply(focus, validated);
        if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') bail();
        return result;
      },
    });
  };
  for (const name of DIRECT) add(name);
  add('toMillis', 1);
  // their common forms answered without JSONata's per-call work (date-time.ts)
  const fromMillis = out.get('fromMillis');
  const toMillis = out.get('toMillis');
  if (fromMillis) out.set('fromMillis', fastFromMillis(fromMillis));
  if (toMillis) out.set('toMillis', fastToMillis(toMillis));
  return out;
}
