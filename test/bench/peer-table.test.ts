import { describe, expect, it } from 'vitest';
import { peerCells, peerMarkdownTable, peerRows, type PeerFigure, type PeerRound } from '../../bench/peers/table.js';

const RATE: PeerFigure = {
  shape: 'W1',
  key: 'rate',
  label: 'processed',
  unit: '/s',
  digits: 0,
  bar: { kind: 'ratio', op: '>=', value: 1.5 },
};
const LAG: PeerFigure = {
  shape: 'W2',
  key: 'p99S',
  label: 'start lag p99',
  unit: 's',
  digits: 3,
  bar: { kind: 'ratio', op: '<=', value: 0.5 },
};
const PRECISION: PeerFigure = {
  shape: 'W3',
  key: 'p99Ms',
  label: 'p99',
  unit: 'ms',
  digits: 1,
  bar: { kind: 'absolute', op: '<=', value: 10 },
};
const PLAIN: PeerFigure = { shape: 'W1', key: 'submitRate', label: 'submitted', unit: '/s', digits: 0 };
const FIGURES = [RATE, LAG, PRECISION, PLAIN];

const round = (ours: Record<string, number>, bullmq: Record<string, number>): PeerRound => ({ ours, bullmq });

describe('peerRows', () => {
  it('takes each side’s median, the ratio of the medians and the ratio within each round', () => {
    const rounds = [
      round({ 'W1.rate': 30_000 }, { 'W1.rate': 20_000 }),
      round({ 'W1.rate': 36_000 }, { 'W1.rate': 18_000 }),
      round({ 'W1.rate': 27_000 }, { 'W1.rate': 19_000 }),
    ];
    const [row] = peerRows(rounds, ['W1'], [RATE]);
    expect(row?.ours).toEqual([30_000, 36_000, 27_000]);
    expect(row?.oursMedian).toBe(30_000);
    expect(row?.bullmqMedian).toBe(19_000);
    expect(row?.ratio).toBeCloseTo(30_000 / 19_000, 10);
    expect(row?.roundRatios).toEqual([1.5, 2, 27_000 / 19_000]);
    expect(row?.meets).toBe(true);
  });

  it('holds a ratio bar to the ratio and an absolute bar to Wheelhouse’s own median', () => {
    const rounds = [
      round({ 'W1.rate': 14_000, 'W2.p99S': 5, 'W3.p99Ms': 9 }, { 'W1.rate': 10_000, 'W2.p99S': 11, 'W3.p99Ms': 5 }),
    ];
    const rows = peerRows(rounds, ['W1', 'W2', 'W3'], FIGURES);
    const meets = Object.fromEntries(rows.map((r) => [r.figure.key, r.meets]));
    // 1.4× is short of ≥ 1.5×; 5/11 = 0.45 meets ≤ 0.5×; 9 ms meets ≤ 10 ms although BullMQ's is lower.
    expect(meets).toEqual({ rate: false, p99S: true, p99Ms: true, submitRate: null });
  });

  it('leaves out figures of shapes that did not run, and a failed round out of the median', () => {
    const rounds = [
      round({ 'W1.rate': 10 }, { 'W1.rate': 10 }),
      round({}, { 'W1.rate': 20 }),
      round({ 'W1.rate': 30 }, { 'W1.rate': 30 }),
    ];
    const rows = peerRows(rounds, ['W1'], FIGURES);
    expect(rows.map((r) => r.figure.key)).toEqual(['rate', 'submitRate']);
    const rate = rows[0];
    expect(rate?.ours[1]).toBeNaN();
    expect(rate?.oursMedian).toBe(20);
    expect(rate?.bullmqMedian).toBe(20);
    expect(Number.isNaN(rate?.roundRatios[1])).toBe(true);
  });

  it('counts a bar as missed when one side never produced the figure', () => {
    const [row] = peerRows([round({ 'W1.rate': 30_000 }, {})], ['W1'], [RATE]);
    expect(row?.ratio).toBeNaN();
    expect(row?.meets).toBe(false);
  });
});

describe('peerCells and peerMarkdownTable', () => {
  it('formats medians, ratios, bars and rounds', () => {
    const rounds = [
      round({ 'W1.rate': 30_000, 'W3.p99Ms': 14 }, { 'W1.rate': 20_000, 'W3.p99Ms': 102 }),
      round({ 'W1.rate': 28_000, 'W3.p99Ms': 12 }, {}),
    ];
    const cells = peerCells(peerRows(rounds, ['W1', 'W3'], [RATE, PRECISION]));
    expect(cells[0]).toEqual([
      'W1',
      'processed (/s)',
      '29,000',
      '20,000',
      '1.45×',
      '≥ 1.5× BullMQ',
      'NO',
      '30,000 / 28,000',
      '20,000 / —',
      '1.50× / —',
    ]);
    expect(cells[1]?.slice(4, 7)).toEqual(['0.13×', '≤ 10 ms', 'NO']);
    const table = peerMarkdownTable(peerRows(rounds, ['W1'], [RATE]));
    expect(table).toHaveLength(3);
    expect(table[1]).toBe('|---|---|---|---|---|---|---|---|---|---|');
  });
});
