/**
 * `npm run chaos`'s report: one row per run, printed as a table and (with --write) put between
 * the chaos markers of docs/benchmarks.md.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { spaced } from './stats.js';

/** The bar: the dead node's partitions fire again within this long of the kill (failure timeout 5 s + 1 s). */
export const BAR_FIRING_MS = 6_000;
export const DOC_PATH = resolve(import.meta.dirname, '../../docs/benchmarks.md');
export const DOC_BEGIN = '<!-- chaos:begin (npm run chaos -- --write) -->';
export const DOC_END = '<!-- chaos:end -->';

/** One run's figures. */
export interface ChaosRun {
  label: string;
  herd: number;
  probes: number;
  /** Herd tasks not `succeeded` in Postgres in the end; probes likewise. */
  lostHerd: number;
  lostProbes: number;
  /** Tasks (herd and probes) whose handler ran more than once, and of those the ones in flight on the dead node. */
  duplicated: number;
  duplicatedInFlight: number;
  /** Kill → first start of a probe due after the kill, max and median over the dead node's partitions, ms (no kill: the same instant and partitions). */
  firingMaxMs: number;
  firingMedianMs: number;
  /** Kill → every partition the dead node owned held by a survivor (fencing row), ms; NaN without a kill. */
  heldMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  allReadyMs: number;
  notes: string[];
  /** Printed on the console only, never written to the docs: per-partition detail, node output. */
  details: string[];
}

export type Outcome = ChaosRun | { label: string; error: string };

export function fmtS(ms: number): string {
  return Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '—';
}

export const HEADERS = [
  'run',
  'tasks',
  'lost',
  'duplicated',
  'partitions firing again after',
  'herd p50/p99 start lag',
  'all ready in',
];

export function rows(outcomes: Outcome[]): string[][] {
  return outcomes.map((o) => {
    if ('error' in o) return [o.label, 'FAILED', '', '', '', '', o.error.slice(0, 80)];
    const killed = o.label.startsWith('kill');
    const firing = killed
      ? `${fmtS(o.firingMaxMs)} (median ${fmtS(o.firingMedianMs)}; fence rows ${fmtS(o.heldMs)}) ${o.firingMaxMs <= BAR_FIRING_MS ? 'meets' : 'MISSES'} ≤ ${BAR_FIRING_MS / 1000} s`
      : `${fmtS(o.firingMaxMs)} (no kill: same partitions, same instant)`;
    return [
      o.label,
      `${spaced(o.herd)} + ${spaced(o.probes)} probes`,
      o.lostProbes > 0 ? `${o.lostHerd} (+ ${o.lostProbes} probes)` : String(o.lostHerd),
      `${o.duplicated}${o.duplicated > 0 ? ` (${o.duplicatedInFlight} in flight on the dead node)` : ''}`,
      firing,
      `${fmtS(o.p50Ms)} / ${fmtS(o.p99Ms)}`,
      fmtS(o.allReadyMs),
    ];
  });
}

export function consoleTable(outcomes: Outcome[]): string {
  const body = rows(outcomes);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** Replaces the section between the chaos markers in docs/benchmarks.md, or appends one. */
export function writeDoc(
  outcomes: Outcome[],
  notes: string[],
  meta: { command: string; machine: string; date: string; durationS: number },
): void {
  const section = [
    DOC_BEGIN,
    '## Chaos: a node SIGKILLed during the herd',
    '',
    `Written by \`${meta.command}\` (bench/chaos.ts) on ${meta.date}, ${meta.durationS.toFixed(0)} s in all. ${meta.machine}.`,
    '',
    `| ${HEADERS.join(' | ')} |`,
    `|${HEADERS.map(() => '---').join('|')}|`,
    ...rows(outcomes).map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
    '',
    ...notes.map((n) => `- ${n}`),
    DOC_END,
  ].join('\n');
  replaceSection(DOC_BEGIN, DOC_END, section);
}

/** Replaces what lies between `begin` and `end` (the markers included) in docs/benchmarks.md, or appends `section`. */
export function replaceSection(begin: string, end: string, section: string): void {
  const doc = readFileSync(DOC_PATH, 'utf8');
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  const next =
    from >= 0 && to > from
      ? doc.slice(0, from) + section + doc.slice(to + end.length)
      : `${doc.trimEnd()}\n\n${section}\n`;
  writeFileSync(DOC_PATH, next);
}
