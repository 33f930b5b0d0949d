import { createWriteStream, type WriteStream } from 'node:fs';

/**
 * Latency tracing for benchmarks, off unless `WHEELHOUSE_TRACE_FILE` names a file: each call
 * appends one JSON line `{ t, ev, ...fields }` (t: Date.now()). Costs one property read when off.
 */
const file = process.env.WHEELHOUSE_TRACE_FILE;
let out: WriteStream | null = null;

export const tracing = file !== undefined && file !== '';

export function trace(ev: string, fields: Record<string, unknown>): void {
  if (!tracing) return;
  out ??= createWriteStream(`${file}.${process.pid}`, { flags: 'a' });
  out.write(`${JSON.stringify({ t: Date.now(), ev, ...fields })}\n`);
}

/**
 * While tracing, a `loop` line for each stall of this process's event loop over 30 ms: a 10 ms
 * timer that fired late, with how late (the time the loop spent elsewhere).
 */
if (tracing) {
  let last = Date.now();
  setInterval(() => {
    const now = Date.now();
    if (now - last > 40) trace('loop', { gapMs: now - last - 10 });
    last = now;
  }, 10).unref();
}
