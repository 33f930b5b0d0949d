import { describe, expect, it } from 'vitest';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import type { LimitMessage } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { ResolvedLimit } from '../../src/domain/limits.js';
import { LimitGate } from '../../src/services/limit-gate.js';

/**
 * A wheel's fire through the gate: each entry to its home key (or free), in one offer per key,
 * with the keys looked up once per run of entries alike — a flood of one key is routed at the
 * cost of its entries, not of a catalog lookup each, and not twice (routed, then offered).
 */
const declared = (key: string): ResolvedLimit => ({
  key,
  declaredAs: key,
  family: null,
  concurrency: 1,
  rate: null,
  onLimit: 'queue',
  weight: 1,
});

function entry(i: number, limits: string[] | undefined, taskType = 't'): DueEntry {
  return {
    taskId: `task-${String(i).padStart(6, '0')}`,
    taskType,
    priority: 0,
    dueMs: i,
    ...(limits ? { limits } : {}),
  };
}

function setUp() {
  const offers: { key: string; entries: DueEntry[] }[] = [];
  let lookups = 0;
  const system = {
    ref: (_kind: unknown, key: string) => ({
      tell(message: LimitMessage) {
        if (message.type === 'offer') offers.push({ key, entries: message.entries });
      },
    }),
  } as unknown as ActorSystemApi;
  const gate = new LimitGate({
    keys: {
      gatedKeys: (type) => {
        lookups++;
        return type === 'paused' ? ['type:paused'] : [];
      },
      resolve: (k) => (k.startsWith('customer:') || k === 'type:paused' ? declared(k) : null),
    },
    system,
    askTimeoutMs: 1_000,
    onError: (error) => {
      throw error;
    },
  });
  return { gate, offers, lookups: () => lookups };
}

describe('routing a fire through the gate', () => {
  it('looks the keys up once per run of entries alike, and offers each key its own in one message', () => {
    const { gate, offers, lookups } = setUp();
    const flood = Array.from({ length: 10_000 }, (_, i) => entry(i, ['customer:0']));
    const routed = gate.route(flood);
    expect(routed.free).toEqual([]);
    expect(routed.offered.get('customer:0')).toHaveLength(10_000);
    gate.offerByHome(routed.offered);
    expect(offers.map((o) => [o.key, o.entries.length])).toEqual([['customer:0', 10_000]]);
    expect(lookups()).toBeLessThanOrEqual(2);
  });

  it('routes mixed entries each to its own home: another key, no limit, a paused type, then the first key again', () => {
    const { gate, offers } = setUp();
    const entries = [
      entry(1, ['customer:1']),
      entry(2, ['customer:2']),
      entry(3, undefined),
      entry(4, ['customer:1']),
      entry(5, undefined, 'paused'),
      entry(6, ['not-declared']),
      entry(7, ['customer:1']),
    ];
    const routed = gate.route(entries);
    gate.offerByHome(routed.offered);
    const byKey = Object.fromEntries(offers.map((o) => [o.key, o.entries.map((e) => e.dueMs)]));
    expect(byKey).toEqual({ 'customer:1': [1, 4, 7], 'customer:2': [2], 'type:paused': [5], 'not-declared': [6] });
    expect(routed.free.map((e) => e.dueMs)).toEqual([3]);
    // `offer` alone groups the same way.
    offers.length = 0;
    gate.offer(entries);
    expect(Object.fromEntries(offers.map((o) => [o.key, o.entries.map((e) => e.dueMs)]))).toEqual(byKey);
  });
});
