/** Resolves after `ms`. The harness only sleeps between samples, never to wait for an outcome. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
