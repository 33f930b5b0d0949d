import { setFlagsFromString } from 'node:v8';

/**
 * Which of V8's WebAssembly compilers runs PGlite in a `wheelhouse dev` process. By default V8
 * compiles every function with its baseline compiler (Liftoff) and recompiles the busy ones
 * with its optimizing one (TurboFan) on background threads. For PGlite, that second tier cost
 * a start more than it gave back: ~1.6 s of CPU and ~70 MiB of idle RSS, and the start waited
 * on it (decision 0047) — against statements ~12 % slower without it. `wheelhouse dev` is a
 * person's node beside their editor, so it keeps the baseline alone; a long, loaded embedded
 * run can ask for both tiers with `WHEELHOUSE_PGLITE_OPTIMIZE=1`.
 *
 * The flag is process-wide, so only the CLI sets it (a process it owns), before PGlite
 * compiles; a node started from code keeps V8's defaults.
 */
export function pgliteTierFromEnv(env: NodeJS.ProcessEnv = process.env): 'baseline' | 'optimizing' {
  const optimize = env.WHEELHOUSE_PGLITE_OPTIMIZE;
  return optimize === '1' || optimize === 'true' ? 'optimizing' : 'baseline';
}

/** Applies `pgliteTierFromEnv`'s answer to this process's V8: call before PGlite opens. */
export function choosePgliteTier(env: NodeJS.ProcessEnv = process.env): 'baseline' | 'optimizing' {
  const tier = pgliteTierFromEnv(env);
  if (tier === 'baseline') setFlagsFromString('--liftoff-only');
  return tier;
}
