import { backoffMs, sleep } from './backoff.js';
import { NodeAnswerError, type NodeAnswer, type NodeClient } from './http.js';
import type { CompiledBatchOptions } from './options.js';
import type { ResultOutcome } from './types.js';
import { readBatchOutcome, type WireResult } from './wire.js';

/**
 * Reports task results. Batched (the default), results that finish within `lingerMs` of
 * each other share one `POST /api/workers/complete`; a full batch leaves at once; while
 * `maxRequestsInFlight` requests are out, new results wait and so batch up further (the
 * busier the worker, the larger its batches). Unbatched, each result is its own
 * `POST /api/tasks/{id}/complete`.
 *
 * A request that fails in a way worth retrying (network error, 429, 5xx) is retried with
 * backoff or after `Retry-After`, until each result's deadline: past its lease the node
 * would refuse it anyway, so it is dropped and counted as discarded.
 */

/** A result waiting to be reported. */
export interface PendingResult {
  readonly wire: WireResult;
  /** Give up delivering after this time (Unix ms). */
  readonly deadlineMs: number;
  /** Bytes of the result's JSON (0 without one), so that a batch stays well inside the node's body limit. */
  readonly resultBytes: number;
}

/**
 * Most bytes of results in one batch request: the node takes 16 MiB or more on that route, so
 * a thousand large results are split over several requests rather than refused together.
 */
const MAX_BATCH_RESULT_BYTES = 8 * 1024 * 1024;

/**
 * A worker's JSON value (a result, a progress value) as the node will take it: its JSON text
 * and size, or why it cannot be sent — it does not serialise (a BigInt, a cycle, a function),
 * it is over `maxBytes`, or it holds text Postgres cannot keep (U+0000, an unpaired surrogate).
 * The node would refuse the last two with a 400, and in a batch that refuses every result in it.
 */
export function encodeWorkerJson(
  value: unknown,
  maxBytes: number,
): { json: string; bytes: number } | { problem: string } {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    return { problem: `is not JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  if (json === undefined) return { problem: `is not JSON (${typeof value})` };
  const bytes = Buffer.byteLength(json);
  if (bytes > maxBytes) return { problem: `is ${bytes} bytes of JSON; the limit is ${maxBytes} (maxResultBytes)` };
  if (json.includes('\\u') && UNSTORABLE_ESCAPE.test(json)) {
    return { problem: 'holds U+0000 or an unpaired surrogate, which the node cannot store' };
  }
  return { json, bytes };
}

/** What `JSON.stringify` writes as an escape and Postgres jsonb refuses: U+0000 and a lone surrogate. */
const UNSTORABLE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})/;

export interface ReporterDeps {
  client: NodeClient;
  options: CompiledBatchOptions;
  onError(error: unknown, context: string): void;
  /**
   * Called as results settle: how many the node accepted, how many were discarded, and
   * whether this settlement is a request the node answered (false: dropped undelivered).
   */
  onSettled(accepted: number, discarded: number, answered: boolean): void;
  /** Called for each result once its fate is known (`WorkerOptions.onResult`). */
  onResult(taskId: string, outcome: ResultOutcome): void;
}

export class CompletionReporter {
  private buffer: PendingResult[] = [];
  private inFlight = 0;
  /** Results handed to requests that have not settled yet. */
  private sending = 0;
  private lingerTimer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly deps: ReporterDeps) {}

  /** Results waiting or in flight. */
  get unreported(): number {
    return this.buffer.length + this.sending;
  }

  add(result: PendingResult): void {
    this.buffer.push(result);
    const { maxBatchSize, lingerMs } = this.deps.options;
    if (this.buffer.length >= maxBatchSize || lingerMs === 0) this.flush();
    else this.lingerTimer ??= setTimeout(() => this.flush(), lingerMs);
  }

  /** Sends everything now and resolves when nothing is waiting or in flight. */
  drain(): Promise<void> {
    this.flush();
    if (this.unreported === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private flush(): void {
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
    const { maxBatchSize, maxRequestsInFlight } = this.deps.options;
    while (this.buffer.length > 0 && this.inFlight < maxRequestsInFlight) {
      const batch = this.buffer.splice(0, batchLength(this.buffer, maxBatchSize));
      this.inFlight++;
      this.sending += batch.length;
      void this.deliver(batch).then((settled) => {
        this.inFlight--;
        this.sending -= batch.length;
        // Told once the batch no longer counts as unreported: a worker waiting for room to poll
        // (results hold credit back) rechecks on this call, and told before, it found none and
        // waited for a call that never came (an HTTP worker of one slot stopped polling).
        if (settled !== null) this.deps.onSettled(settled.accepted, settled.discarded, settled.answered);
        // Results that queued behind the limit have waited long enough: send them now.
        if (this.buffer.length > 0) this.flush();
        else if (this.unreported === 0) this.wakeIdle();
      });
    }
  }

  /**
   * Delivers one batch, retrying what is worth retrying; never rejects. Answers how the rest of
   * the batch settled (those dropped late are told as they drop), for the caller to tell once
   * the batch is no longer in flight; null when none was left.
   */
  private async deliver(
    batch: PendingResult[],
  ): Promise<{ accepted: number; discarded: number; answered: boolean } | null> {
    let pending = batch;
    for (let attempt = 0; ; attempt++) {
      let waitMs: number;
      try {
        const outcome = await this.send(pending);
        let accepted = 0;
        for (const r of pending) {
          const taken = outcome.get(r.wire.task_id) === true;
          if (taken) accepted++;
          this.deps.onResult(r.wire.task_id, taken ? 'accepted' : 'refused');
        }
        return { accepted, discarded: pending.length - accepted, answered: true };
      } catch (error) {
        const transient = !(error instanceof NodeAnswerError) || error.transient;
        this.deps.onError(error, `reporting ${pending.length} result(s)${transient ? ', will retry' : ''}`);
        if (!transient) {
          for (const r of pending) this.deps.onResult(r.wire.task_id, 'refused');
          return { accepted: 0, discarded: pending.length, answered: true };
        }
        waitMs =
          error instanceof NodeAnswerError && error.retryAfterMs !== null ? error.retryAfterMs : backoffMs(attempt);
      }
      const retryAtMs = Date.now() + waitMs;
      const late = pending.filter((r) => r.deadlineMs < retryAtMs);
      if (late.length > 0) {
        this.deps.onError(
          new Error(`${late.length} result(s) dropped: their leases ran out before the node could be reached`),
          'reporting results',
        );
        this.deps.onSettled(0, late.length, false);
        for (const r of late) this.deps.onResult(r.wire.task_id, 'dropped');
        pending = pending.filter((r) => r.deadlineMs >= retryAtMs);
        if (pending.length === 0) return null;
      }
      await sleep(waitMs);
    }
  }

  /** One request. Resolves with task id → accepted; throws `NodeAnswerError` or a network error. */
  private async send(results: PendingResult[]): Promise<Map<string, boolean>> {
    const { client, options } = this.deps;
    if (options.batched) {
      const path = '/api/workers/complete';
      const answer = await client.post(path, { results: results.map((r) => r.wire) });
      if (!ok(answer)) throw NodeAnswerError.from(path, answer);
      return readBatchOutcome(answer.body);
    }
    const out = new Map<string, boolean>();
    for (const { wire } of results) {
      const { task_id: taskId, ...body } = wire;
      const path = `/api/tasks/${encodeURIComponent(taskId)}/complete`;
      const answer = await client.post(path, body);
      // 409: the lease is no longer held; 404: the task is gone. Either way the result is discarded.
      if (answer.status === 409 || answer.status === 404) out.set(taskId, false);
      else if (ok(answer)) out.set(taskId, true);
      else throw NodeAnswerError.from(path, answer);
    }
    return out;
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** How many of the first results make one batch: at most `maxBatchSize`, and their results within the bytes (at least one). */
function batchLength(buffer: readonly PendingResult[], maxBatchSize: number): number {
  let bytes = 0;
  const n = Math.min(buffer.length, maxBatchSize);
  for (let i = 0; i < n; i++) {
    bytes += (buffer[i] as PendingResult).resultBytes;
    if (bytes > MAX_BATCH_RESULT_BYTES && i > 0) return i;
  }
  return n;
}

function ok(answer: NodeAnswer): boolean {
  return answer.status >= 200 && answer.status < 300;
}
