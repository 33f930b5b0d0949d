import type { Clock } from './clock.js';
import type { TransportEnvelope } from './router.js';

/** The options and counters of the cluster transport (src/runtime/http-transport.ts). */

/** How an `HttpTransport` is built. */
export interface HttpTransportOptions {
  /** This node's id; sent as the batch's `from`. */
  nodeId: string;
  /** Sent as `x-wheelhouse-cluster-secret`; null sends none (peers then accept loopback only). */
  secret: string | null;
  /** Base URL of a node (`http://10.0.0.7:7071`) as membership knows it; undefined if it is not live. */
  addressOf(nodeId: string): string | undefined;
  /** The ring's owner of `(kind, key)` now; asked again before every retry. */
  ownerOf(kind: string, key: string): string;
  /** Delivers to this node's own actors, when a retry finds the ring now names this node. */
  deliverLocal(envelope: TransportEnvelope): Promise<unknown>;
  /** Backoff timers, request timeouts and deadlines run on it. @default systemClock */
  clock?: Clock;
  /** Upper bound of one HTTP request, ms; the batch's latest deadline bounds it too. @default 10000 */
  requestTimeoutMs?: number;
  /** Most envelopes in one request. @default 1000 */
  maxBatch?: number;
  /**
   * Most bytes of envelopes in one request, so a batch stays under the receiver's body limit
   * (64 MiB by default); a single larger envelope still goes, alone. @default 16 MiB
   */
  maxBatchBytes?: number;
}

/** Counters since the transport was built, for metrics. */
export interface HttpTransportStats {
  /** HTTP requests sent (batches). */
  requests: number;
  /** Envelopes sent, counting each attempt. */
  envelopes: number;
  /** Envelopes routed again after a failed attempt. */
  retries: number;
  /** Envelopes whose promise was rejected. */
  failed: number;
}
