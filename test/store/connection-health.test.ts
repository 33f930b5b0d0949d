/**
 * UNIT tests of ConnectionHealth: a store's reports — each failed statement, each reconnection
 * attempt, each answer — become two transitions, lost and restored, and an outcome from before
 * the last transition does not undo it.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionHealth, type ConnectionLost, type ConnectionRestored } from '../../src/store/connection-health.js';

function watched(): { health: ConnectionHealth; seen: (ConnectionLost | ConnectionRestored)[]; clock: { ms: number } } {
  const clock = { ms: 1_000 };
  const health = new ConnectionHealth('redis', () => clock.ms);
  const seen: (ConnectionLost | ConnectionRestored)[] = [];
  health.watch({ lost: (e) => seen.push(e), restored: (e) => seen.push(e) });
  return { health, seen, clock };
}

describe('ConnectionHealth', () => {
  it('turns many failures and answers into one lost and one restored', () => {
    const { health, seen, clock } = watched();
    health.up();
    const cause = new Error('ECONNREFUSED');
    for (let i = 0; i < 50; i++) health.down(i === 0 ? cause : new Error('again'));
    expect(health.available).toBe(false);
    clock.ms += 4_200;
    health.up();
    health.up();
    expect(health.available).toBe(true);
    expect(seen).toEqual([
      { store: 'redis', error: cause },
      { store: 'redis', downMs: 4_200, failures: 50 },
    ]);
  });

  it('ignores an outcome of an operation begun before the last transition', () => {
    const { health, seen } = watched();
    const before = health.begin();
    health.down(new Error('reset'), health.begin());
    // Sent before the loss, answered after it: says nothing about now.
    health.up(before);
    expect(health.available).toBe(false);
    const during = health.begin();
    const lateFailure = health.begin();
    health.up(during);
    // Sent while lost, failing after the store came back on another connection.
    health.down(new Error('late'), lateFailure);
    expect(health.available).toBe(true);
    expect(seen.map((e) => ('error' in e ? 'lost' : 'restored'))).toEqual(['lost', 'restored']);
  });

  it('tells a watcher that comes during a loss of the loss at once', () => {
    const { health } = watched();
    const cause = new Error('ECONNRESET');
    health.down(cause);
    const late: unknown[] = [];
    health.watch({ lost: (e) => late.push(e), restored: (e) => late.push(e) });
    health.up();
    expect(late).toEqual([{ store: 'redis', error: cause }, expect.objectContaining({ store: 'redis', failures: 1 })]);
  });

  it('reports nothing once closed on purpose, nor to a watcher that stopped', () => {
    const { health, seen } = watched();
    const other: unknown[] = [];
    const stop = health.watch({ lost: (e) => other.push(e), restored: (e) => other.push(e) });
    stop();
    health.close();
    health.down(new Error('closed'));
    expect(health.available).toBe(true);
    expect(seen).toEqual([]);
    expect(other).toEqual([]);
  });
});
