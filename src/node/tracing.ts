import { startTracing, stopTracing } from '../lib/otel.js';

/**
 * Starts a node with tracing on when the environment names an OTLP endpoint
 * (docs/decisions/0038-tracing.md): tracing starts before the node, and its last node's close
 * exports the spans left and turns it off. Without an endpoint nothing of the SDK is loaded.
 */
export async function withTracing<N extends { close(): Promise<void> }>(start: () => Promise<N>): Promise<N> {
  if (!(await startTracing())) return start();
  try {
    const node = await start();
    const close = node.close.bind(node);
    let closing: Promise<void> | undefined;
    node.close = () => (closing ??= close().finally(stopTracing));
    return node;
  } catch (error) {
    await stopTracing();
    throw error;
  }
}
