/**
 * Match values of the built-in match rules (`identifier`, `references`); the rules themselves are described in
 * src/load/identity.ts.
 */

/** `Patient/123`, `https://host/base/Patient/123`, `Patient/123/_history/2` → `Patient/123`. */
export function referenceKey(ref: unknown): string | undefined {
  if (typeof ref !== 'string' || ref === '') return undefined;
  const parts = ref.split(/[?#]/)[0]!.split('/').filter(Boolean);
  const h = parts.indexOf('_history');
  const p = h >= 2 ? parts.slice(0, h) : parts;
  return p.length >= 2 ? `${p[p.length - 2]}/${p[p.length - 1]}` : ref;
}

/** Every `system|value` a resource carries (server side of `identifier`). */
export function allIdentifierValues(resource: unknown): string[] {
  const ids = (resource as { identifier?: unknown } | null)?.identifier;
  if (!Array.isArray(ids)) return [];
  const out: string[] = [];
  for (const id of ids) {
    const { system, value } = (id ?? {}) as { system?: unknown; value?: unknown };
    if (typeof system === 'string' && system !== '' && (typeof value === 'string' || typeof value === 'number') && String(value) !== '') {
      out.push(`${system}|${String(value)}`);
    }
  }
  return out;
}

/** `references` identity of a CareTeam: subject + sorted distinct members; undefined without a subject. */
export function careTeamIdentity(resource: unknown): string | undefined {
  const r = resource as { subject?: { reference?: unknown }; participant?: unknown } | null;
  const subject = referenceKey(r?.subject?.reference);
  if (!subject) return undefined;
  const members = new Set<string>();
  if (Array.isArray(r?.participant)) {
    for (const p of r.participant as { member?: { reference?: unknown } }[]) {
      const m = referenceKey(p?.member?.reference);
      if (m) members.add(m);
    }
  }
  return `subject=${subject};members=${[...members].sort().join(',')}`;
}
