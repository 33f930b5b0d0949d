import type { Worker } from '../../src/worker/index.js';
import { startTestNode, type BackendName, type TestCluster } from './nodes.js';
import { setTracingEnv, startReceiver, traceTo, type Receiver } from './otlp-receiver.js';

/** A node that traces to a local OTLP receiver (docs/decisions/0038-tracing.md). */
export interface TracedNode {
  receiver: Receiver;
  node: TestCluster;
}

/** Starts a receiver, turns tracing on towards it, and starts a node on `backend`. */
export async function startTracedNode(backend: BackendName): Promise<TracedNode> {
  const receiver = await startReceiver();
  traceTo(receiver);
  const node = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  return { receiver, node };
}

/** Stops the test's workers and the node, turns tracing off again, and closes the receiver. */
export async function stopTracedNode(traced: Partial<TracedNode>, workers: readonly Worker[]): Promise<void> {
  await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
  await traced.node?.cleanup();
  setTracingEnv({});
  await traced.receiver?.close();
}
