import { WheelhouseError } from '../lib/errors.js';
import { systemClock, type Cancel, type Clock } from './clock.js';
import {
  ACTORS_PATH,
  errorOf,
  exchange,
  messageOf,
  remoteError,
  resultsOf,
  secretHeaders,
  wireEnvelope,
  type BatchOrder,
  type PeerAnswer,
} from './cluster-wire.js';
import { cutBatches } from './batch-cuts.js';
import type { HttpTransportOptions, HttpTransportStats } from './http-transport-types.js';
import { PeerPools, type Destination } from './peer-pools.js';
import type { Transport } from './placement.js';
import type { TransportEnvelope } from './router.js';

/**
 * The sending side of the cluster transport: actor messages for other nodes travel as batches
 * of JSON envelopes over keep-alive HTTP (`POST /internal/actors`, answered by
 * `src/http/cluster-routes.ts`). The wire itself — routes, envelope batches, answers — is in
 * `cluster-wire.ts`, which both sides share.
 */

export type { HttpTransportOptions, HttpTransportStats } from './http-transport-types.js';

const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_BATCH = 1_000;
const DEFAULT_MAX_BATCH_BYTES = 16 * 1024 * 1024;
/** Backoff before the first retry of an envelope, ms; it doubles up to the maximum. */
const FIRST_BACKOFF_MS = 25;
/**
 * The longest backoff, ms. Long enough that a dead peer's thousands of waiting envelopes do
 * not hammer its closed port while the ring still names it; a ring change sends them on at
 * once anyway (`ringChanged`).
 */
const MAX_BACKOFF_MS = 1_000;

/** One envelope on its way: its caller's promise and how its attempts went. */
interface Outgoing {
  readonly envelope: TransportEnvelope;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** Failed attempts so far; sets the next backoff. */
  attempts: number;
  lastError: unknown;
  cancelBackoff: Cancel | null;
}

/**
 * Carries actor messages to the nodes that own them over HTTP, in batches.
 *
 * Envelopes for one node collected in one event-loop turn go in one request (at most
 * `maxBatch` and `maxBatchBytes`, in the order sent), on a pool of keep-alive connections per node. The receiver
 * hands them to mailboxes in the order sent, across batches too (see {@link BatchOrder}).
 *
 * A connection failure, a request timeout, a 503, or an envelope refused with `not_ready` (its
 * receiver is shutting down) is retried against the ring's owner of that moment — this node's
 * own `deliverLocal` if the ring now names it — after a backoff (25 ms doubling to 500 ms),
 * until the envelope's deadline; then it fails with `ask_timeout`. So a retried message may be
 * delivered twice (the first attempt may have landed before its answer was lost), and a retried
 * tell may arrive after later ones sent to a different owner: actors treat messages as
 * idempotent hints. A 401/403 (the cluster secrets differ) and any other answer fail at once.
 */
export class HttpTransport implements Transport {
  private readonly nodeId: string;
  private readonly options: HttpTransportOptions;
  private readonly clock: Clock;
  private readonly requestTimeoutMs: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly headers: Record<string, string>;
  /** Envelopes waiting for this turn's flush, by destination node. */
  private readonly outbox = new Map<string, Outgoing[]>();
  private flushHandle: NodeJS.Immediate | null = null;
  private readonly pools: PeerPools;
  private readonly backingOff = new Set<Outgoing>();
  private readonly counters: HttpTransportStats = { requests: 0, envelopes: 0, retries: 0, failed: 0 };
  private closeDone: Promise<void> | null = null;

  constructor(options: HttpTransportOptions) {
    if (typeof options.nodeId !== 'string' || options.nodeId === '') {
      throw new WheelhouseError('internal', 'HttpTransport option nodeId must be a non-empty string.');
    }
    const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (!(Number.isFinite(requestTimeoutMs) && requestTimeoutMs > 0)) {
      throw new WheelhouseError(
        'internal',
        `HttpTransport option requestTimeoutMs must be a positive number of ms, got ${requestTimeoutMs}.`,
      );
    }
    const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    if (!(Number.isInteger(maxBatch) && maxBatch > 0)) {
      throw new WheelhouseError(
        'internal',
        `HttpTransport option maxBatch must be a positive integer, got ${maxBatch}.`,
      );
    }
    const maxBatchBytes = options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES;
    if (!(Number.isInteger(maxBatchBytes) && maxBatchBytes > 0)) {
      throw new WheelhouseError(
        'internal',
        `HttpTransport option maxBatchBytes must be a positive integer, got ${maxBatchBytes}.`,
      );
    }
    this.nodeId = options.nodeId;
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.requestTimeoutMs = requestTimeoutMs;
    this.maxBatch = maxBatch;
    this.maxBatchBytes = maxBatchBytes;
    this.headers = secretHeaders(options.secret, { 'content-type': 'application/json' });
    this.pools = new PeerPools(this.clock, options.addressOf);
  }

  /**
   * Sends one envelope to `nodeId`. Resolves with the reply of an ask, with undefined for a
   * tell once the receiving node has put it in the mailbox.
   */
  deliver(nodeId: string, envelope: TransportEnvelope): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.send({ envelope, resolve, reject, attempts: 0, lastError: undefined, cancelBackoff: null }, nodeId);
    });
  }

  stats(): HttpTransportStats {
    return { ...this.counters };
  }

  /**
   * Refuses new envelopes, rejects the queued and backing-off ones with `not_ready`, and closes
   * every pool once the requests in flight are answered.
   */
  close(): Promise<void> {
    if (this.closeDone !== null) return this.closeDone;
    if (this.flushHandle !== null) clearImmediate(this.flushHandle);
    this.flushHandle = null;
    const queued = [...this.outbox.values()].flat();
    this.outbox.clear();
    const backingOff = [...this.backingOff];
    this.backingOff.clear();
    this.closeDone = this.pools.closeAll();
    for (const item of backingOff) item.cancelBackoff?.();
    for (const item of [...queued, ...backingOff]) this.fail(item, closedError());
    return this.closeDone;
  }

  /** Routes `item` to `nodeId`: this node's own actors, or that node's outbox. */
  private send(item: Outgoing, nodeId: string): void {
    if (this.closeDone !== null) {
      this.fail(item, closedError());
      return;
    }
    if (nodeId === this.nodeId) {
      let local: Promise<unknown>;
      try {
        local = this.options.deliverLocal(item.envelope);
      } catch (error) {
        local = Promise.reject(error);
      }
      local.then(item.resolve, (error: unknown) => this.fail(item, error));
      return;
    }
    const queue = this.outbox.get(nodeId);
    if (queue === undefined) this.outbox.set(nodeId, [item]);
    else queue.push(item);
    this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Posts every node's outbox, in batches of at most `maxBatch` envelopes and `maxBatchBytes`. */
  private flush(): void {
    this.flushHandle = null;
    const now = this.clock.now();
    this.pools.closeIdle(now);
    const outbox = [...this.outbox];
    this.outbox.clear();
    for (const [nodeId, queued] of outbox) {
      const items: Outgoing[] = [];
      const parts: string[] = [];
      for (const item of queued) {
        const part = now < item.envelope.deadlineMs ? wireEnvelope(item.envelope) : deadlineError(item);
        if (part instanceof WheelhouseError) this.fail(item, part);
        else {
          items.push(item);
          parts.push(part);
        }
      }
      if (items.length === 0) continue;
      let destination: Destination;
      try {
        destination = this.pools.destination(nodeId);
      } catch (error) {
        for (const item of items) this.retry(item, error);
        continue;
      }
      const sizes = parts.map((part) => Buffer.byteLength(part));
      const long = items.map((item) => this.outlastsRequest(item, now));
      for (const cut of cutBatches(sizes, long, this.maxBatch, this.maxBatchBytes)) {
        const slice = items.slice(cut.start, cut.end);
        void this.post(nodeId, destination, slice, parts.slice(cut.start, cut.end), cut.long);
      }
    }
  }

  /**
   * Whether an envelope may take longer to answer than a request is given (`requestTimeoutMs`):
   * an ask (an activation too) given more than that. A tell is settled as it is delivered.
   */
  private outlastsRequest(item: Outgoing, now: number): boolean {
    return item.envelope.ask && item.envelope.deadlineMs - now > this.requestTimeoutMs;
  }

  /**
   * Posts one batch (`parts` are the envelopes' JSON texts) and settles its envelopes. Never
   * rejects: every outcome lands on an item.
   *
   * A request waits `requestTimeoutMs` at most, or until the batch's latest deadline if that
   * is sooner — except a batch of envelopes that outlast that bound (an ask given 30 s, say),
   * which waits until their latest deadline: the receiver answers a batch once every envelope
   * in it has settled, so such an ask in a bounded request would fail the request, and every
   * answer beside it, at the bound while its actor was still within its time.
   */
  private async post(
    nodeId: string,
    destination: Destination,
    sent: Outgoing[],
    parts: string[],
    long: boolean,
  ): Promise<void> {
    const seq = destination.nextSeq++;
    destination.awaiting.add(seq);
    let since = seq;
    for (const waiting of destination.awaiting) since = Math.min(since, waiting);
    const order: BatchOrder = { stream: destination.stream, seq, since };
    const body = `{"from":${JSON.stringify(this.nodeId)},"order":${JSON.stringify(order)},"envelopes":[${parts.join(',')}]}`;
    let latestDeadlineMs = 0;
    for (const item of sent) latestDeadlineMs = Math.max(latestDeadlineMs, item.envelope.deadlineMs);
    const leftMs = latestDeadlineMs - this.clock.now();
    const timeoutMs = Math.max(1, long ? leftMs : Math.min(this.requestTimeoutMs, leftMs));
    this.counters.requests += 1;
    this.counters.envelopes += sent.length;
    const where = `${nodeId} at ${destination.address}`;
    let answer: PeerAnswer;
    try {
      answer = await exchange(destination.pool, this.clock, {
        method: 'POST',
        path: destination.basePath + ACTORS_PATH,
        headers: this.headers,
        body,
        timeoutMs,
      });
    } catch (error) {
      const failure = new Error(`POST ${ACTORS_PATH} to node ${where} failed: ${messageOf(error)}`, { cause: error });
      for (const item of sent) this.retry(item, failure);
      return;
    } finally {
      destination.awaiting.delete(seq);
      destination.lastUsedMs = this.clock.now();
    }
    this.settle(where, sent, answer);
  }

  /** Settles the envelopes of one answered batch. */
  private settle(where: string, items: Outgoing[], answer: PeerAnswer): void {
    const { status } = answer;
    if (status === 200) {
      const results = resultsOf(answer.body, items.length);
      if (results === null) {
        const error = new WheelhouseError('internal', `Node ${where} answered 200 without one result per envelope.`);
        for (const item of items) this.fail(item, error);
        return;
      }
      results.forEach((result, i) => {
        const item = items[i] as Outgoing;
        if (result.ok) item.resolve(result.value);
        else if (result.error.code === 'not_ready') {
          this.retry(item, new WheelhouseError('not_ready', `Node ${where} refused it: ${result.error.message}`));
        } else this.fail(item, remoteError(result.error));
      });
      return;
    }
    const remote = errorOf(answer.body);
    const said = `${status}${remote.code ? ` ${remote.code}` : ''}${remote.message ? `: ${remote.message}` : ''}`;
    if (status === 503) {
      const error = new WheelhouseError('not_ready', `Node ${where} answered ${said}`);
      for (const item of items) this.retry(item, error);
      return;
    }
    const message =
      status === 401 || status === 403
        ? `Node ${where} refused the message (${said}): the cluster secrets of the two nodes differ; give every node the same clusterSecret.`
        : `Node ${where} answered ${said}`;
    const error = new WheelhouseError('internal', message, { details: { status, code: remote.code } });
    for (const item of items) this.fail(item, error);
  }

  /**
   * The ring changed: every envelope waiting out a backoff is routed again now, to its new
   * owner, instead of at the end of its backoff.
   */
  ringChanged(): void {
    const waiting = [...this.backingOff];
    this.backingOff.clear();
    for (const item of waiting) {
      item.cancelBackoff?.();
      item.cancelBackoff = null;
      this.resend(item);
    }
  }

  /** After a retryable failure: backs off, then routes `item` to the ring's owner again. */
  private retry(item: Outgoing, error: unknown): void {
    item.lastError = error;
    item.attempts += 1;
    if (this.closeDone !== null) {
      this.fail(item, closedError(error));
      return;
    }
    const remainingMs = item.envelope.deadlineMs - this.clock.now();
    if (remainingMs <= 0) {
      this.fail(item, deadlineError(item));
      return;
    }
    const backoffMs = Math.min(FIRST_BACKOFF_MS * 2 ** (item.attempts - 1), MAX_BACKOFF_MS);
    this.backingOff.add(item);
    item.cancelBackoff = this.clock.setTimer(Math.min(backoffMs, remainingMs), () => {
      item.cancelBackoff = null;
      this.backingOff.delete(item);
      this.resend(item);
    });
  }

  /** Sends a retried envelope to the ring's current owner, unless its deadline has passed. */
  private resend(item: Outgoing): void {
    if (this.clock.now() >= item.envelope.deadlineMs) {
      this.fail(item, deadlineError(item));
      return;
    }
    let owner: string;
    try {
      owner = this.options.ownerOf(item.envelope.kind, item.envelope.key);
    } catch (ownerError) {
      this.retry(item, ownerError);
      return;
    }
    this.counters.retries += 1;
    this.send(item, owner);
  }

  private fail(item: Outgoing, error: unknown): void {
    this.counters.failed += 1;
    item.reject(error);
  }
}

function deadlineError(item: Outgoing): WheelhouseError {
  const { kind, key } = item.envelope;
  const last = item.lastError === undefined ? 'none' : messageOf(item.lastError);
  return new WheelhouseError(
    'ask_timeout',
    `${kind}/${key}: no node accepted the message before its deadline (last error: ${last})`,
    {
      details: { kind, key, attempts: item.attempts },
      cause: item.lastError,
    },
  );
}

function closedError(cause?: unknown): WheelhouseError {
  return new WheelhouseError('not_ready', 'The cluster transport is closed: this node is shutting down.', { cause });
}
