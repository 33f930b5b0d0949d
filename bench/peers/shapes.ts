import { RATE_DEFINITION } from '../rate-accuracy.js';

/** What the peer runs are given. */
export interface PeerContext {
  quick: boolean;
  /** Worker processes per run, on both sides. */
  workers: number;
  /** Redis database index BullMQ runs on (emptied before and after each run). */
  redisDb: number;
  log(line: string): void;
}

/** How each figure is measured on each side, for the report. */
export const PEER_DEFINITIONS: readonly string[] = [
  'Rounds are interleaved: in each round, each workload runs on Wheelhouse and then on BullMQ, the order swapped every other round ' +
    '(ours first in odd rounds), so slow spells of a shared machine fall on both sides.',
  "Wheelhouse: exactly `npm run bench`'s W1 (one node), W2 and W3 (fresh node, schema and Redis prefix per run; the SDK worker in " +
    'its own process over HTTP), plus W1 once all are enqueued: the N tasks submitted with no worker running (they wait in the ready ' +
    'queue), then the worker process started; the rate is N ÷ (first handler start → last result accepted).',
  'BullMQ: the same N, due times and slots per worker process (W1 and W2 1 000, W3 100: BullMQ `concurrency`), jobs added with ' +
    '`Queue.addBulk` (1 000 a call, 4 calls in flight, as our harness posts 1 000-task batches 4 at a time), due times as delayed ' +
    "jobs (`timestamp` + `delay` = the due time), run by BullMQ's own `Worker` in a separate process with its defaults otherwise " +
    '(completed jobs kept, as Wheelhouse keeps its tasks). Each run starts on an emptied Redis database of its own (`--peers-redis-db`, ' +
    'default 9) that is emptied again after; every job is then checked completed. W2 calibrates the add rate on a second queue no ' +
    'worker takes from, and chooses T the way W2 does.',
  'W1 processed: N ÷ (first submit → the worker process saw the last completion), worker already waiting; completions are ' +
    'sampled every 5 ms in both worker processes (results the node accepted; jobs BullMQ moved to completed). "Once all are ' +
    'enqueued" is BullMQ\'s usual figure: the worker starts after submission, from first start to last completion.',
  'Start lag: handler (processor) start, Date.now() in the worker process, − the due time carried in the payload, same clock.',
  'Ratio: Wheelhouse ÷ BullMQ, of the medians; per round, within the round. Above 1 is faster for a rate, slower for a lag.',
  "W6 and RATE run only when `--only` names them. W6 on Wheelhouse is `npm run bench`'s W6 (family `customer:*` of concurrency " +
    '50; its figures here are those of the limited run with quiet keys). W6 on BullMQ: BullMQ OSS has no per-key (group) limits ' +
    '(groups are BullMQ Pro), so the family becomes the queue-wide `setGlobalConcurrency(50)`: the flood as delayed jobs due at T ' +
    "(T calibrated as in W2), the quiet keys' jobs added with `queue.add` one at a time from T on, carrying their send time; the " +
    'processor sleeps 5 ms, 1 000 slots. Start lag of a quiet job: processor start − its send time.',
  RATE_DEFINITION,
];
