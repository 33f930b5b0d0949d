import type { BenchStores } from '../stores.js';
import type { TableSize } from '../pg-sizes.js';

/** What a part of `npm run bench -- --scale` is given. */
export interface ScaleContext {
  stores: BenchStores;
  nodeFlags: string[];
  log(line: string): void;
  /** Records a node's schema and prefix for cleanup if the run is aborted; `untrack` once removed. */
  track(names: { schema: string; redisPrefix: string }): void;
  untrack(names: { schema: string; redisPrefix: string }): void;
}

/** One part's figures (keys as in `SCALE_METRICS`), notes and whether its bars held. */
export interface ScalePart {
  title: string;
  values: Record<string, number>;
  notes: string[];
  verified: boolean;
  sizes?: TableSize[];
}
