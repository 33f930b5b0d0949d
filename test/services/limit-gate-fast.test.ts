import { describe, expect, it } from 'vitest';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import type { LimitGrant, LimitMessage } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { OnLimit, ResolvedLimit } from '../../src/domain/limits.js';
import { LimitGate, OPEN_TRUSTED_MS } from '../../src/services/limit-gate.js';
import { gatedReadyQueue } from '../../src/services/gated-ready-queue.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';

/**
 * Fast admission (docs/decisions/0023-flow-control.md): a gated entry goes straight into the
 * ready queue only while its home key said it is open, at most the room it said, less what
 * this gate pushed straight since; anything else is offered to the key.
 */
const KEY = 'k';

function entry(i: number, priority = 0): DueEntry {
  return {
    taskId: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`,
    taskType: 't',
    priority,
    dueMs: 1_000 + i,
    limits: [KEY],
  };
}

/** A gate over a fake key: `openRoom` is what its next grant answer says; offers are recorded. */
function setUp(onLimit: OnLimit = 'queue') {
  let now = 10_000;
  const key = { openRoom: 0, offered: [] as DueEntry[], asked: [] as DueEntry[][] };
  const limit: ResolvedLimit = {
    key: KEY,
    declaredAs: KEY,
    family: null,
    concurrency: 10,
    rate: null,
    onLimit,
    weight: 1,
  };
  const ref = {
    tell(message: LimitMessage) {
      if (message.type === 'offer') key.offered.push(...message.entries);
    },
    async ask(message: LimitMessage): Promise<LimitGrant> {
      if (message.type !== 'grant') throw new Error('unexpected ask');
      key.asked.push(message.entries);
      return { epoch: 1, granted: message.entries.map((e) => e.taskId), held: [], atMs: now, openRoom: key.openRoom };
    },
  };
  const system = { ref: () => ref } as unknown as ActorSystemApi;
  const gate = new LimitGate({
    keys: { gatedKeys: () => [], resolve: (k) => (k === KEY ? limit : null) },
    system,
    askTimeoutMs: 1_000,
    onError: (error) => {
      throw error;
    },
    clock: { now: () => now },
  });
  const inner = new MemoryReadyQueue();
  let ringChanged = (): void => undefined;
  const ready = gatedReadyQueue(inner, gate, { now: () => now }, (forget) => (ringChanged = forget));
  return {
    gate,
    key,
    inner,
    ready,
    advance: (ms: number) => (now += ms),
    now: () => now,
    ringChanged: () => ringChanged(),
  };
}

const ids = (entries: readonly DueEntry[]): string[] => entries.map((e) => e.taskId).sort();

describe('fast admission through the gate', () => {
  it('offers to a key that has not said it is open, and to one that said it has no room', async () => {
    const { gate, key, ready } = setUp();
    await ready.push([entry(1), entry(2)]);
    expect(ids(key.offered)).toEqual(ids([entry(1), entry(2)]));
    key.openRoom = 0;
    await gate.admit([entry(1)]);
    const routed = gate.route([entry(3)]);
    expect(routed.straight).toEqual([]);
    expect(ids([...routed.offered.values()].flat())).toEqual([entry(3).taskId]);
  });

  it('pushes straight at most the room the key said, most urgent first, and offers the rest', async () => {
    const { gate, key, inner, ready } = setUp();
    key.openRoom = 3;
    await gate.admit([entry(0)]);
    const batch = [entry(1, 5), entry(2, 1), entry(3, 0), entry(4, 9), entry(5, 0)];
    await ready.push(batch);
    expect(ids(key.offered)).toEqual(ids([entry(1, 5), entry(4, 9)]));
    expect(await inner.held(batch)).toEqual(new Set(ids([entry(2, 1), entry(3, 0), entry(5, 0)])));
    // Those three count against the room until a claim here asks the key about them.
    expect(gate.route([entry(6)]).straight).toEqual([]);
    await gate.admit([entry(2, 1)]);
    expect(ids(gate.route([entry(7)]).straight)).toEqual([entry(7).taskId]);
  });

  it('stops when the key turns binding, and when its answer is older than it is trusted', async () => {
    const { gate, key, advance } = setUp();
    key.openRoom = 100;
    await gate.admit([entry(0)]);
    expect(gate.route([entry(1)]).straight).toHaveLength(1);
    key.openRoom = 0; // the key filled up: refused tasks wait there
    await gate.admit([entry(1)]);
    expect(gate.route([entry(2)]).offered.get(KEY)).toHaveLength(1);
    key.openRoom = 100;
    await gate.admit([entry(2)]);
    advance(OPEN_TRUSTED_MS);
    expect(gate.route([entry(3)]).offered.get(KEY)).toHaveLength(1);
  });

  it('never pushes straight for a key whose on_limit is not queue', async () => {
    const { gate, key } = setUp('keep_latest_waiting');
    key.openRoom = 100; // even were the key to say so
    await gate.admit([entry(0)]);
    expect(gate.route([entry(1)]).offered.get(KEY)).toHaveLength(1);
  });

  it('counts a gated entry in the ready queue as held without offering it again', async () => {
    const { gate, key, ready } = setUp();
    key.openRoom = 10;
    await gate.admit([entry(0)]);
    await ready.push([entry(1)]);
    expect(key.offered).toEqual([]);
    expect(await ready.held([entry(1), entry(2)])).toEqual(new Set(ids([entry(1), entry(2)])));
    // entry 2 is nowhere: the net's ask hands it back to its key; entry 1 is queued.
    expect(ids(key.offered)).toEqual([entry(2).taskId]);
  });

  it('offers an overdue gated task again at once after the ring changed, not a re-offer period later', async () => {
    const { key, ready, advance, ringChanged } = setUp();
    // The safety net asks about a task that is in no ready queue: it is offered to its key.
    expect(await ready.held([entry(1)])).toEqual(new Set([entry(1).taskId]));
    expect(key.offered.length).toBe(1);
    advance(1_000);
    await ready.held([entry(1)]);
    expect(key.offered.length).toBe(1); // not again within the re-offer period
    // That offer may have gone to a node that has since left the ring.
    ringChanged();
    await ready.held([entry(1)]);
    expect(key.offered.length).toBe(2);
  });

  it('forgets the answers of keys it is no longer asked about (one of a million keys answers once)', async () => {
    const { gate, key, advance } = setUp();
    key.openRoom = 5;
    const once = Array.from({ length: 100 }, (_, i) => ({ ...entry(i), limits: [`c:${i}`] }));
    await gate.admit(once);
    expect(gate.openKeys).toBe(100);
    advance(OPEN_TRUSTED_MS);
    await gate.admit([{ ...entry(100), limits: ['c:100'] }]);
    expect(gate.openKeys).toBe(1);
  });
});
