/**
 * What a node's gate keeps of the keys that said they are open (fast admission): a room it
 * may still push into straight, less what it pushed since. A vast room is counted, not
 * tracked task by task (decision 0051); either way the gate never pushes past the key's
 * answer before the next one.
 */
import { describe, expect, it } from 'vitest';
import type { DueEntry } from '../../src/domain/model.js';
import { OPEN_TRUSTED_MS, OpenKeys, VAST_ROOM } from '../../src/services/limit-open-keys.js';

const entries = (from: number, n: number): DueEntry[] =>
  Array.from({ length: n }, (_, i) => ({ taskId: `t${from + i}`, taskType: 't', priority: 5, dueMs: 0 }));

describe('open keys', () => {
  it('tracks a small room task by task: a claim that asked about some gives their room back', () => {
    const open = new OpenKeys();
    open.answered('k', [], 10, 0);
    open.pushed('k', entries(0, 6), 1);
    expect(open.room('k', 2)).toBe(4);
    // The key answered about two of them, and still says 10 (it does not count the other four).
    open.answered('k', entries(0, 2), 10, 3);
    expect(open.room('k', 4)).toBe(6);
    open.notPushed('k', 't5');
    expect(open.room('k', 5)).toBe(7);
  });

  it('counts a vast room: the pushes since the last answer, then afresh from the next', () => {
    const open = new OpenKeys();
    open.answered('k', [], VAST_ROOM + 5, 0);
    open.pushed('k', entries(0, 1_000), 1);
    open.pushed('k', entries(1_000, 500), 2);
    expect(open.room('k', 3)).toBe(VAST_ROOM + 5 - 1_500);
    open.notPushed('k', 't7');
    expect(open.room('k', 3)).toBe(VAST_ROOM + 5 - 1_499);
    open.answered('k', entries(0, 10), VAST_ROOM, 4);
    expect(open.room('k', 5)).toBe(VAST_ROOM);
  });

  it('forgets an answer past its trust, and a key that says it has no room', () => {
    const open = new OpenKeys();
    open.answered('a', [], VAST_ROOM, 0);
    open.answered('b', [], 3, 0);
    expect(open.room('a', OPEN_TRUSTED_MS)).toBe(0);
    open.answered('b', [], 0, 1);
    expect(open.room('b', 2)).toBe(0);
    expect(open.size).toBe(0);
  });
});
