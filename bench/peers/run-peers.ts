import { createRequire } from 'node:module';
import type { BenchArgs } from '../args.js';
import { replaceSection } from '../chaos-report.js';
import { describeMachine, type Machine } from '../machine.js';
import type { BenchStores } from '../stores.js';
import type { RunFigures, WithRunContext } from '../workload.js';
import { oursRate } from '../rate-accuracy.js';
import { w6NoisyNeighbour } from '../w6-noisy-neighbour.js';
import { bullmqW1, bullmqW2, bullmqW3 } from './bullmq.js';
import { bullmqRate, bullmqW6 } from './bullmq-flow.js';
import { PEER_DEFINITIONS, type PeerContext } from './shapes.js';
import {
  peerConsoleTable,
  peerMarkdownTable,
  peerRows,
  DEFAULT_SHAPE_IDS,
  SHAPE_IDS,
  type PeerRound,
  type PeerRow,
  type ShapeId,
} from './table.js';
import { oursW1, oursW2, oursW3 } from './wheelhouse.js';

/**
 * `npm run bench -- --peers`: W1, W2 and W3 on Wheelhouse and on BullMQ, interleaved round by
 * round, then one table of medians and ratios, printed and written to its own section of
 * docs/benchmarks.md (kept when `npm run bench` rewrites the file).
 */
export const PEERS_BEGIN = '<!-- peers:begin (npm run bench -- --peers) -->';
export const PEERS_END = '<!-- peers:end -->';

type Side = 'ours' | 'bullmq';

export interface PeersDeps {
  args: BenchArgs;
  stores: BenchStores;
  log(line: string): void;
  withContext: WithRunContext;
  /** Date.now() when the bench started. */
  startedMs: number;
}

export async function runPeers({ args, stores, log, withContext, startedMs }: PeersDeps): Promise<number> {
  const shapes = SHAPE_IDS.filter((id) =>
    args.only === null ? DEFAULT_SHAPE_IDS.includes(id) : args.only.includes(id),
  );
  const unknown = (args.only ?? []).filter((id) => !(SHAPE_IDS as readonly string[]).includes(id));
  if (shapes.length === 0 || unknown.length > 0) {
    log(`--peers runs ${SHAPE_IDS.join(', ')} only; --only named ${(args.only ?? []).join(', ')}`);
    return 2;
  }
  const ctx: PeerContext = { quick: args.quick, workers: args.workers, redisDb: args.peersRedisDb, log };
  const sides: Record<ShapeId, Record<Side, () => Promise<RunFigures>>> = {
    W1: { ours: () => oursW1(withContext), bullmq: () => bullmqW1(ctx) },
    W2: { ours: () => oursW2(withContext), bullmq: () => bullmqW2(ctx) },
    W3: { ours: () => oursW3(withContext), bullmq: () => bullmqW3(ctx) },
    W6: { ours: () => withContext((c) => w6NoisyNeighbour.run(c)), bullmq: () => bullmqW6(ctx) },
    RATE: { ours: () => withContext(oursRate), bullmq: () => bullmqRate(ctx) },
  };
  const run = (side: Side, shape: ShapeId): Promise<RunFigures> => sides[shape][side]();

  const versions = await stores.versions();
  const bullmqVersion = (createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version;
  const machine = describeMachine();
  log(
    `peers: ${shapes.join(', ')} on Wheelhouse and BullMQ ${bullmqVersion} (Redis db ${args.peersRedisDb}), ` +
      `${args.rounds} interleaved round(s)${args.quick ? ', QUICK sizes' : ''}; load ${machine.loadAvg1m} on ${machine.cores} cores`,
  );

  const rounds: PeerRound[] = [];
  const notes: string[] = [];
  let failures = 0;
  for (let r = 1; r <= args.rounds; r++) {
    const round: PeerRound = { ours: {}, bullmq: {} };
    // Odd rounds run ours first, even rounds BullMQ first.
    const order: Side[] = r % 2 === 1 ? ['ours', 'bullmq'] : ['bullmq', 'ours'];
    for (const shape of shapes) {
      for (const side of order) {
        const name = `round ${r} ${shape} ${side === 'ours' ? 'Wheelhouse' : 'BullMQ'}`;
        log(`${name}: start`);
        try {
          const figures = await run(side, shape);
          for (const [key, value] of Object.entries(figures.values)) round[side][`${shape}.${key}`] = value;
          if (!figures.verified) failures++;
          log(
            `${name}: ${Object.entries(figures.values)
              .map(([k, v]) => `${k}=${v.toFixed(3)}`)
              .join(' ')}${figures.verified ? '' : '  !!! VERIFICATION FAILED'}`,
          );
          for (const note of figures.notes) notes.push(`${name}: ${note}`);
        } catch (error) {
          failures++;
          const message = error instanceof Error ? error.message : String(error);
          log(`${name} FAILED: ${message}`);
          notes.push(`${name}: FAILED: ${message}`);
        }
      }
    }
    rounds.push(round);
  }

  const rows = peerRows(rounds, shapes);
  const durationS = (Date.now() - startedMs) / 1000;
  process.stdout.write(`\n${peerConsoleTable(rows)}\n`);
  if (notes.length > 0) process.stdout.write(`\nNotes:\n${notes.map((n) => `  - ${n}`).join('\n')}\n`);
  if (args.write) {
    const command = `npm run bench -- ${process.argv.slice(2).join(' ')}`;
    replaceSection(
      PEERS_BEGIN,
      PEERS_END,
      peersSection(rows, notes, { machine, versions, bullmqVersion, command, durationS, args }),
    );
    log('wrote the peers section of docs/benchmarks.md');
  }
  if (failures > 0) log(`${failures} run(s) FAILED or did not verify: see above`);
  return failures > 0 ? 1 : 0;
}

interface SectionMeta {
  machine: Machine;
  versions: { postgres: string; redis: string };
  bullmqVersion: string;
  command: string;
  durationS: number;
  args: BenchArgs;
}

function peersSection(rows: PeerRow[], notes: string[], meta: SectionMeta): string {
  const m = meta.machine;
  const busy = m.loadAvg1m > m.cores * 0.5;
  return [
    PEERS_BEGIN,
    '## Peers: BullMQ in the same run',
    '',
    `Written by \`${meta.command}\` (bench/peers/) on ${m.date}, ${meta.durationS.toFixed(0)} s in all` +
      `${meta.args.quick ? ' — **quick mode: smoke-test counts, not the real figures**' : ''}. ` +
      `${m.cpuModel}, ${m.cores} cores, Node ${m.node}, PostgreSQL ${meta.versions.postgres}, Redis ${meta.versions.redis}, ` +
      `BullMQ ${meta.bullmqVersion}; load average (1 min) at the start ${m.loadAvg1m}` +
      `${busy ? ` — **the machine was busy with other work (${m.cores} cores)**` : ''}. ` +
      `${meta.args.rounds} round(s), ${meta.args.workers} worker process(es) on each side.`,
    '',
    ...peerMarkdownTable(rows),
    '',
    ...PEER_DEFINITIONS.map((d) => `- ${d}`),
    '',
    ...(notes.length > 0 ? ['Notes:', '', ...notes.map((n) => `- ${n}`), ''] : []),
    PEERS_END,
  ].join('\n');
}
