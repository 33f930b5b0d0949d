import type { Assignment, PollRequest } from './types.js';

/** One claim for one worker: up to `maxTasks` ready tasks of its types. */
export type ClaimRequest = Pick<PollRequest, 'workerId' | 'taskTypes' | 'maxTasks'>;

/** One worker's part of a claim for several workers of the same task types. */
export type ClaimShare = Pick<PollRequest, 'workerId' | 'maxTasks'>;

/**
 * Claims one statement's worth of ready tasks for several workers of the same task types
 * (`Dispatcher.claimReadyFor`): one take, one claim, the tasks dealt out by share.
 */
export type ClaimForShares = (
  taskTypes: string[],
  shares: readonly ClaimShare[],
  signal?: AbortSignal,
) => Promise<Assignment[][]>;

interface Asking {
  readonly request: ClaimRequest;
  readonly signal: AbortSignal | undefined;
  resolve(tasks: Assignment[]): void;
  reject(error: unknown): void;
}

/**
 * Most rows of one claim statement for several workers (long-polls here, the worker channel's
 * sessions in worker-channel.ts): workers of a task type that want more together are claimed
 * for in several statements of the same turn.
 */
export const MAX_CLAIM_ROWS = 2_000;

/**
 * The key under which workers of the same task types share a claim: the same types, in any
 * order and however often named, give the same key. A task type is letters, digits and `._:-`
 * (TASK_TYPE_PATTERN), so the separator cannot be part of one.
 */
export function taskTypesKey(taskTypes: Iterable<string>): string {
  return [...new Set(taskTypes)].sort().join('\n');
}

/**
 * The long-polls' claims, shared: polls of the same task types that look for tasks in the same
 * event-loop turn go into one claim (one take from the ready queues, one claim statement whose
 * rows each name their worker), as the worker channel's sockets do. An HTTP worker pool sends
 * its polls together (each as soon as a burst of results freed its slots), so without this
 * every poll paid a take and a claim statement of its own: 540 claims for 20 000 tasks in
 * `npm run bench:http-workers`, against 28 for the SDK's socket.
 *
 * A poll alone in its turn is claimed for with its own abort signal, as before. In a group no
 * signal stops the claim: a poll whose worker went away meanwhile gets its share, and its
 * route hands the tasks back (it does the same for a worker that leaves during the claim). A
 * failed claim fails every poll of the group.
 */
export class PollClaims {
  private readonly groups = new Map<string, Asking[]>();
  private scheduled = false;

  constructor(private readonly claimFor: ClaimForShares) {}

  /** Up to `request.maxTasks` ready tasks for this poll, claimed with the others of its turn. */
  claim(request: ClaimRequest, signal?: AbortSignal): Promise<Assignment[]> {
    if (signal?.aborted === true || request.maxTasks <= 0) return Promise.resolve([]);
    return new Promise<Assignment[]>((resolve, reject) => {
      const key = taskTypesKey(request.taskTypes);
      let group = this.groups.get(key);
      if (group === undefined) this.groups.set(key, (group = []));
      group.push({ request, signal, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a microtask: the polls parsed in this poll phase of the event loop all
    // arrive before the group is cut.
    setImmediate(() => {
      this.scheduled = false;
      const groups = [...this.groups.values()];
      this.groups.clear();
      for (const group of groups) for (const chunk of chunks(group)) void this.run(chunk);
    });
  }

  private async run(group: readonly Asking[]): Promise<void> {
    const live = group.filter((a) => a.signal?.aborted !== true);
    for (const gone of group) if (gone.signal?.aborted === true) gone.resolve([]);
    const first = live[0];
    if (first === undefined) return;
    try {
      const claimed = await this.claimFor(
        first.request.taskTypes,
        live.map((a) => a.request),
        live.length === 1 ? first.signal : undefined,
      );
      live.forEach((a, i) => a.resolve(claimed[i] ?? []));
    } catch (error) {
      for (const a of live) a.reject(error);
    }
  }
}

/** `group` cut so that no chunk asks for more than {@link MAX_CLAIM_ROWS} rows (a poll alone may). */
function chunks(group: readonly Asking[]): Asking[][] {
  const out: Asking[][] = [];
  let chunk: Asking[] = [];
  let rows = 0;
  for (const asking of group) {
    if (chunk.length > 0 && rows + asking.request.maxTasks > MAX_CLAIM_ROWS) {
      out.push(chunk);
      chunk = [];
      rows = 0;
    }
    chunk.push(asking);
    rows += asking.request.maxTasks;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}
