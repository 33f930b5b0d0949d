/**
 * Runs `work` with the event loop held open by a timer. While a node starts, nothing else may
 * hold it — the embedded backend has no socket and the server does not listen yet — and
 * whenever Node finds its loop empty, it first waits for every background task V8 has queued
 * before it looks again. On the embedded backend those are the compiles of PGlite's
 * WebAssembly at V8's upper tier: the start stood still for 0.3–0.5 s of a 3 s start, waiting
 * for code it did not need yet (decision 0047).
 */
export async function holdingTheLoop<T>(work: () => Promise<T>): Promise<T> {
  const hold = setInterval(() => undefined, 60_000);
  try {
    return await work();
  } finally {
    clearInterval(hold);
  }
}
