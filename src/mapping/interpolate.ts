/**
 * `${VAR}` interpolation for `target:` values and file paths of the mapping file.
 *
 * - `${VAR}`            the value of VAR; unset **or empty** is a problem (an empty base URL or API key is
 *                       never what the user wants; write `${VAR:-}` to allow empty)
 * - `${VAR:-default}`   default when VAR is unset or empty (shell semantics); no nesting inside the default
 * - `$${`               a literal `${`
 * A `$` not followed by `{` is kept as it is. Messages name variables, never values.
 */

export interface InterpolationProblem {
  /** Offset of the `${` in the input string. */
  offset: number;
  code: 'env-missing' | 'interpolation-invalid';
  message: string;
}

export interface InterpolationResult {
  value: string;
  problems: InterpolationProblem[];
  /** True when the string contained at least one `${…}`. */
  interpolated: boolean;
}

const VAR_RE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([\s\S]*))?$/;

export function interpolate(input: string, env: Record<string, string | undefined>): InterpolationResult {
  const problems: InterpolationProblem[] = [];
  let out = '';
  let interpolated = false;
  let i = 0;
  while (i < input.length) {
    if (input.startsWith('$${', i)) {
      out += '${';
      i += 3;
      continue;
    }
    if (input.startsWith('${', i)) {
      interpolated = true;
      const close = input.indexOf('}', i + 2);
      if (close < 0) {
        problems.push({
          offset: i,
          code: 'interpolation-invalid',
          message: '`${` without a closing `}` (write `$${` for a literal `${`)',
        });
        break;
      }
      const body = input.slice(i + 2, close);
      const m = VAR_RE.exec(body);
      if (!m) {
        problems.push({
          offset: i,
          code: 'interpolation-invalid',
          message: `\`\${${body}}\` is not a valid reference: use \${NAME} or \${NAME:-default} (NAME: letters, digits, _)`,
        });
      } else {
        const name = m[1]!;
        const fallback = m[2];
        const v = env[name];
        if (v !== undefined && v !== '') out += v;
        else if (fallback !== undefined) out += fallback;
        else
          problems.push({
            offset: i,
            code: 'env-missing',
            message: `environment variable ${name} is ${v === '' ? 'empty' : 'not set'} (referenced as \${${name}}; set it, or write \${${name}:-default})`,
          });
      }
      i = close + 1;
      continue;
    }
    out += input[i];
    i++;
  }
  return { value: out, problems, interpolated };
}
