/** Resolves after `ms`. The harness only sleeps between samples, never to wait for an outcome. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Samples `done` every `everyMs` until it holds or `limitMs` passed; says which. */
export async function waitFor(done: () => Promise<boolean>, limitMs: number, everyMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
}
