import type { ResolvedLimit } from '../domain/limits.js';
import type { LimitLiveView } from '../actors/limit-key.js';
import type { Explanation } from './explanation.js';

/**
 * What explain asks of flow control: the node's catalog (which of a task's keys are gated,
 * and their declared values) and each key's actor (its live figures).
 */
export interface ExplainLimits {
  /** The keys of a task that resolve to a declaration: its named limits and `type:<t>`. */
  gatedKeys(taskType: string, limits: readonly string[] | null | undefined): readonly string[];
  resolve(key: string): ResolvedLimit | null;
  /** The key's actor's `inspect` answer (it activates the key if it was idle). */
  inspect(key: string): Promise<LimitLiveView>;
}

export type LimitFact = NonNullable<Explanation['limits']>[number];

/**
 * The gated keys of a due task, each with its declared concurrency (the node's catalog) and
 * what its actor says now, and what it holds the task by: `paused` (concurrency 0), `full`
 * (as many running as its concurrency), `throttled` (its rate allows the next start later),
 * `open`, or `unknown` when its actor did not answer (one key's silence does not fail the
 * explanation). Null when no key of the task is gated: nothing but a worker holds it.
 */
export async function limitFacts(
  deps: ExplainLimits,
  task: { taskType: string; limits?: readonly string[] | null },
): Promise<LimitFact[] | null> {
  const keys = deps.gatedKeys(task.taskType, task.limits);
  if (keys.length === 0) return null;
  return Promise.all(
    keys.map(async (key): Promise<LimitFact> => {
      const declared = deps.resolve(key);
      const concurrency = declared?.concurrency ?? null;
      const live = await deps.inspect(key).catch(() => null);
      const fact: LimitFact = {
        name: key,
        declaredAs: live?.declaredAs ?? declared?.declaredAs ?? null,
        concurrency,
        running: live?.running ?? null,
        waiting: live?.waiting ?? null,
        throttledUntilMs: live?.throttledUntilMs ?? null,
        holds: 'unknown',
      };
      if (concurrency === 0) fact.holds = 'paused';
      else if (live === null) fact.holds = 'unknown';
      else if (concurrency !== null && live.running >= concurrency) fact.holds = 'full';
      else if (live.throttledUntilMs !== null) fact.holds = 'throttled';
      else fact.holds = 'open';
      return fact;
    }),
  );
}
