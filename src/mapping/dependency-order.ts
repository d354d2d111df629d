/**
 * Load order of the resource mappings from their `$ref` targets: a mapping comes after every mapping it
 * refers to. Pure: no I/O, no locations (compile-mapping adds them).
 */
import { issue, type Issue } from '../core/issues.js';

export interface DependencyNode {
  name: string;
  refs: string[];
}

export interface DependencyOrderResult {
  /** Topological order; ties keep the input (file) order. Nodes in or behind a cycle are left out. */
  order: string[];
  issues: Issue[];
  /** Each cycle as a closed path (`['patient', 'careteam', 'patient']`). */
  cycles: string[][];
}

export function dependencyOrder(nodes: readonly DependencyNode[]): DependencyOrderResult {
  const issues: Issue[] = [];
  const index = new Map<string, number>();
  nodes.forEach((n, i) => {
    if (index.has(n.name)) {
      issues.push(issue.error('duplicate-name', `two mappings are named \`${n.name}\``));
    } else {
      index.set(n.name, i);
    }
  });
  const known = [...index.keys()];

  // edges: dependency → dependents; deps: node → its (known, distinct) dependencies
  const deps: number[][] = nodes.map(() => []);
  nodes.forEach((n, i) => {
    if (index.get(n.name) !== i) return;
    for (const ref of new Set(n.refs)) {
      const j = index.get(ref);
      if (j === undefined) {
        issues.push(
          issue.error('ref-unknown', `mapping \`${n.name}\` refers to \`${ref}\`, which is not a mapping in this file (mappings: ${known.join(', ')})`),
        );
      } else {
        deps[i]!.push(j);
      }
    }
  });

  // Kahn's algorithm, always taking the ready node that comes first in the file.
  const live = nodes.map((n, i) => index.get(n.name) === i);
  const remaining = deps.map((d) => d.length);
  const dependents: number[][] = nodes.map(() => []);
  deps.forEach((d, i) => d.forEach((j) => dependents[j]!.push(i)));
  const done = new Array<boolean>(nodes.length).fill(false);
  const order: string[] = [];
  for (;;) {
    let next = -1;
    for (let i = 0; i < nodes.length; i++) {
      if (live[i] && !done[i] && remaining[i] === 0) {
        next = i;
        break;
      }
    }
    if (next < 0) break;
    done[next] = true;
    order.push(nodes[next]!.name);
    for (const d of dependents[next]!) remaining[d]!--;
  }

  // What is left is in a cycle or depends on one: report each strongly connected component that is a cycle.
  const left = nodes.map((_, i) => i).filter((i) => live[i] && !done[i]);
  const cycles: string[][] = [];
  for (const scc of stronglyConnected(left, deps)) {
    const selfLoop = scc.length === 1 && deps[scc[0]!]!.includes(scc[0]!);
    if (scc.length < 2 && !selfLoop) continue;
    const path = cyclePath(scc, deps).map((i) => nodes[i]!.name);
    cycles.push(path);
    const members = new Set(path);
    const extra = scc.filter((i) => !members.has(nodes[i]!.name)).map((i) => nodes[i]!.name);
    issues.push(
      issue.error(
        'ref-cycle',
        `circular $ref: ${path.join(' → ')}${extra.length ? ` (also in the cycle: ${extra.join(', ')})` : ''}; a mapping cannot (indirectly) refer to itself`,
      ),
    );
  }
  return { order, issues, cycles };
}

/** Tarjan's algorithm restricted to `subset`; components in file order of their first member. */
function stronglyConnected(subset: number[], deps: number[][]): number[][] {
  const inSubset = new Set(subset);
  const idx = new Map<number, number>();
  const low = new Map<number, number>();
  const stack: number[] = [];
  const onStack = new Set<number>();
  const out: number[][] = [];
  let counter = 0;
  const visit = (v: number) => {
    idx.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of deps[v]!) {
      if (!inSubset.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const comp: number[] = [];
      let w: number;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      out.push(comp.sort((a, b) => a - b));
    }
  };
  for (const v of subset) if (!idx.has(v)) visit(v);
  return out.sort((a, b) => a[0]! - b[0]!);
}

/**
 * A closed path through the component starting at its first member (file order), following
 * dependencies. Tries to visit every member (components are tiny); otherwise the first cycle found.
 */
function cyclePath(scc: number[], deps: number[][]): number[] {
  const members = new Set(scc);
  const start = scc[0]!;
  let best: number[] | undefined;
  let budget = 10_000;
  const path = [start];
  const onPath = new Set([start]);
  const dfs = (v: number): boolean => {
    if (--budget < 0) return false;
    for (const w of deps[v]!) {
      if (!members.has(w)) continue;
      if (w === start) {
        const candidate = [...path, start];
        if (!best || candidate.length > best.length) best = candidate;
        if (path.length === scc.length) return true;
        continue;
      }
      if (onPath.has(w)) continue;
      path.push(w);
      onPath.add(w);
      if (dfs(w)) return true;
      path.pop();
      onPath.delete(w);
    }
    return false;
  };
  dfs(start);
  return best ?? [start, start];
}
