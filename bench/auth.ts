/**
 * Auth on for a run: with `BENCH_ADMIN_TOKEN` set, every node the harness starts gets it as its
 * admin key (through the environment the node inherits), and every request the harness and its
 * workers send carries it. For figures of auth on against auth off in one sitting.
 */
export const BENCH_ADMIN_TOKEN = process.env.BENCH_ADMIN_TOKEN || undefined;

if (BENCH_ADMIN_TOKEN !== undefined) process.env.WHEELHOUSE_ADMIN_TOKEN = BENCH_ADMIN_TOKEN;

/** The Authorization header of the run, or none. */
export function authHeaders(): Record<string, string> {
  return BENCH_ADMIN_TOKEN === undefined ? {} : { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` };
}
