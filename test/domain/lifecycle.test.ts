import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import {
  FINAL_STATUSES,
  TRANSITIONS,
  assertTransition,
  canTransition,
  visibleStatus,
} from '../../src/domain/lifecycle.js';
import type { StoredStatus } from '../../src/domain/model.js';

describe('the task state machine', () => {
  const all = Object.keys(TRANSITIONS) as StoredStatus[];

  it('has the edges of DESIGN.md, and those of a parent waiting for its children, and nothing else', () => {
    const edges = all.flatMap((from) => TRANSITIONS[from].map((to) => `${from}→${to}`)).sort();
    expect(edges).toEqual(
      [
        'blocked→pending',
        'blocked→cancelled',
        'pending→running',
        'pending→cancelled',
        'pending→expired',
        'running→succeeded',
        'running→pending',
        'running→failed',
        'running→cancelled',
        // A parent's attempt ends waiting; its children's ends release it, fail it (on_child_failure
        // fail) or a cancel ends it.
        'running→waiting',
        'waiting→pending',
        'waiting→failed',
        'waiting→cancelled',
        'active→paused',
        'active→cancelled',
        'active→succeeded',
        'paused→active',
        'paused→cancelled',
        'failed→pending',
        'cancelled→pending',
        'expired→pending',
      ].sort(),
    );
  });

  it('refuses every transition out of a final status but the retry with invalid_transition', () => {
    for (const from of FINAL_STATUSES) {
      for (const to of all) {
        if (from !== 'succeeded' && to === 'pending') continue;
        expect(canTransition(from, to)).toBe(false);
        try {
          assertTransition(from, to);
          expect.unreachable(`${from} → ${to} was allowed`);
        } catch (error) {
          expect(isWheelhouseError(error, 'invalid_transition')).toBe(true);
        }
      }
    }
  });

  it('lets a failed, cancelled or expired task, and only those, be retried to pending', () => {
    expect(all.filter((from) => canTransition(from, 'pending')).sort()).toEqual(
      ['blocked', 'cancelled', 'expired', 'failed', 'running', 'waiting'].sort(),
    );
    expect(() => assertTransition('succeeded', 'pending')).toThrow(/cannot become pending/);
  });

  it('refuses skipping the claim: pending cannot succeed or fail directly', () => {
    expect(() => assertTransition('pending', 'succeeded')).toThrow(/cannot become succeeded/);
    expect(() => assertTransition('blocked', 'running')).toThrow(/cannot become running/);
  });

  it('derives ready from pending and due, and only from pending', () => {
    expect(visibleStatus('pending', 1000, 999)).toBe('pending');
    expect(visibleStatus('pending', 1000, 1000)).toBe('ready');
    expect(visibleStatus('running', 1000, 5000)).toBe('running');
  });
});
