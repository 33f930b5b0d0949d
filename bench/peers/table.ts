import { median } from '../stats.js';

/**
 * The peer comparison's figures and how a set of interleaved rounds becomes a table: each
 * figure's median on each side, the ratio of the medians (Wheelhouse ÷ BullMQ), the ratio
 * in every round, and whether the bar is met. Pure: no I/O, no clock.
 */

/** The workloads both systems run under `--peers`: W1–W3 by default, flow control only when `--only` names it. */
export type ShapeId = 'W1' | 'W2' | 'W3' | 'W6' | 'RATE';
export const SHAPE_IDS: readonly ShapeId[] = ['W1', 'W2', 'W3', 'W6', 'RATE'];
export const DEFAULT_SHAPE_IDS: readonly ShapeId[] = ['W1', 'W2', 'W3'];

/** A bar on Wheelhouse's figure: against BullMQ's (`ratio`, Wheelhouse ÷ BullMQ) or a plain value (`absolute`). */
export interface PeerBar {
  kind: 'ratio' | 'absolute';
  op: '>=' | '<=';
  value: number;
}

export interface PeerFigure {
  shape: ShapeId;
  /** Key in both systems' run figures. */
  key: string;
  label: string;
  unit: string;
  digits: number;
  bar?: PeerBar;
}

export const PEER_FIGURES: readonly PeerFigure[] = [
  {
    shape: 'W1',
    key: 'rate',
    label: 'processed, submit → last completion',
    unit: '/s',
    digits: 0,
    bar: { kind: 'ratio', op: '>=', value: 1.5 },
  },
  {
    shape: 'W1',
    key: 'processRate',
    label: 'processed once all are enqueued, first start → last completion',
    unit: '/s',
    digits: 0,
    bar: { kind: 'ratio', op: '>=', value: 1.5 },
  },
  { shape: 'W1', key: 'submitRate', label: 'submitted, worker running', unit: '/s', digits: 0 },
  { shape: 'W2', key: 'p50S', label: 'start lag p50', unit: 's', digits: 3 },
  {
    shape: 'W2',
    key: 'p99S',
    label: 'start lag p99',
    unit: 's',
    digits: 3,
    bar: { kind: 'ratio', op: '<=', value: 0.5 },
  },
  { shape: 'W2', key: 'maxS', label: 'start lag max', unit: 's', digits: 3 },
  { shape: 'W2', key: 'marginS', label: 'last submit → T', unit: 's', digits: 1 },
  { shape: 'W3', key: 'p50Ms', label: 'start − due p50', unit: 'ms', digits: 1 },
  {
    shape: 'W3',
    key: 'p99Ms',
    label: 'start − due p99',
    unit: 'ms',
    digits: 1,
    bar: { kind: 'absolute', op: '<=', value: 10 },
  },
  {
    shape: 'W3',
    key: 'maxMs',
    label: 'start − due max',
    unit: 'ms',
    digits: 1,
    bar: { kind: 'absolute', op: '<=', value: 25 },
  },
  { shape: 'W6', key: 'quietP50Ms', label: 'quiet keys: start lag p50', unit: 'ms', digits: 1 },
  {
    shape: 'W6',
    key: 'quietP99Ms',
    label: 'quiet keys: start lag p99',
    unit: 'ms',
    digits: 1,
    bar: { kind: 'absolute', op: '<=', value: 50 },
  },
  { shape: 'W6', key: 'quietMaxMs', label: 'quiet keys: start lag max', unit: 'ms', digits: 1 },
  { shape: 'W6', key: 'drainS', label: 'flood drain, with quiet keys', unit: 's', digits: 2 },
  { shape: 'W6', key: 'drainRate', label: 'flood drain rate, with quiet keys', unit: '/s', digits: 0 },
  {
    shape: 'RATE',
    key: 'maxInWindow',
    label: 'most starts in any 1 s window (limit 100)',
    unit: 'starts',
    digits: 0,
    bar: { kind: 'absolute', op: '<=', value: 100 },
  },
  {
    shape: 'RATE',
    key: 'usedPct',
    label: 'allowed starts used',
    unit: '%',
    digits: 1,
    bar: { kind: 'absolute', op: '>=', value: 95 },
  },
];

/** One round's figures of one system, keyed `<shape>.<key>` (e.g. `W1.rate`); a shape that failed has none. */
export type RoundFigures = Record<string, number>;

export interface PeerRound {
  ours: RoundFigures;
  bullmq: RoundFigures;
}

export interface PeerRow {
  figure: PeerFigure;
  /** Each round's figure, NaN where the run failed. */
  ours: number[];
  bullmq: number[];
  oursMedian: number;
  bullmqMedian: number;
  /** oursMedian ÷ bullmqMedian. */
  ratio: number;
  /** ours ÷ bullmq within each round. */
  roundRatios: number[];
  /** Whether Wheelhouse's median meets the bar; null for a figure without one. */
  meets: boolean | null;
}

/** The rows of the figures whose shape ran, in `figures` order. */
export function peerRows(
  rounds: readonly PeerRound[],
  shapes: readonly ShapeId[],
  figures: readonly PeerFigure[] = PEER_FIGURES,
): PeerRow[] {
  return figures
    .filter((f) => shapes.includes(f.shape))
    .map((figure) => {
      const name = `${figure.shape}.${figure.key}`;
      const ours = rounds.map((r) => r.ours[name] ?? Number.NaN);
      const bullmq = rounds.map((r) => r.bullmq[name] ?? Number.NaN);
      const oursMedian = median(ours);
      const bullmqMedian = median(bullmq);
      const ratio = oursMedian / bullmqMedian;
      return {
        figure,
        ours,
        bullmq,
        oursMedian,
        bullmqMedian,
        ratio,
        roundRatios: ours.map((o, i) => o / (bullmq[i] as number)),
        meets: figure.bar ? meets(figure.bar.kind === 'ratio' ? ratio : oursMedian, figure.bar) : null,
      };
    });
}

export const PEER_HEADERS = [
  'workload',
  'figure',
  'Wheelhouse',
  'BullMQ',
  'ratio',
  'bar',
  'meets bar',
  'Wheelhouse rounds',
  'BullMQ rounds',
  'ratio per round',
];

/** The table's cells, one array per row, in PEER_HEADERS order. */
export function peerCells(rows: readonly PeerRow[]): string[][] {
  return rows.map((r) => {
    const f = r.figure;
    return [
      f.shape,
      `${f.label} (${f.unit})`,
      fmt(r.oursMedian, f.digits),
      fmt(r.bullmqMedian, f.digits),
      ratioText(r.ratio),
      f.bar ? barText(f.bar, f.unit) : '',
      r.meets === null ? '' : r.meets ? 'yes' : 'NO',
      r.ours.map((v) => fmt(v, f.digits)).join(' / '),
      r.bullmq.map((v) => fmt(v, f.digits)).join(' / '),
      r.roundRatios.map(ratioText).join(' / '),
    ];
  });
}

/** Columns padded to their widest cell, for the terminal. */
export function peerConsoleTable(rows: readonly PeerRow[]): string {
  const body = peerCells(rows);
  const widths = PEER_HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(PEER_HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** A Markdown table (pipes in cells escaped). */
export function peerMarkdownTable(rows: readonly PeerRow[]): string[] {
  return [
    `| ${PEER_HEADERS.join(' | ')} |`,
    `|${PEER_HEADERS.map(() => '---').join('|')}|`,
    ...peerCells(rows).map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
  ];
}

function meets(value: number, bar: PeerBar): boolean {
  if (!Number.isFinite(value)) return false;
  return bar.op === '>=' ? value >= bar.value : value <= bar.value;
}

function barText(bar: PeerBar, unit: string): string {
  const op = bar.op === '>=' ? '≥' : '≤';
  if (bar.kind === 'ratio') return `${op} ${bar.value}× BullMQ`;
  return `${op} ${bar.value}${unit === '/s' ? '/s' : ` ${unit}`}`;
}

function ratioText(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : '—';
}

function fmt(value: number, digits: number): string {
  if (!Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
