/**
 * The Redis reach a node's heartbeat reports (decision 0029): reached while a probe was
 * answered within the patience, not once probes go unanswered (a silent cut) or fail, and
 * reached again at the next answer; one probe in flight at a time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ReachProbe } from '../../src/node/reach-probe.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { eventually } from '../support/waits.js';

describe('ReachProbe', () => {
  let probe: ReachProbe | null = null;
  afterEach(() => probe?.stop());

  it('is reached while probes are answered within the patience, not while they hang or fail', async () => {
    const clock = new FakeClock();
    let mode: 'answer' | 'hang' | 'fail' = 'answer';
    let sent = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    const hanging: (() => void)[] = [];
    probe = new ReachProbe(
      () => {
        sent++;
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        const done = (): void => {
          inFlight--;
        };
        if (mode === 'answer') return Promise.resolve().finally(done);
        if (mode === 'fail') return Promise.reject(new Error('ECONNREFUSED')).finally(done);
        return new Promise<void>((resolve) => hanging.push(resolve)).finally(done);
      },
      { intervalMs: 5, patienceMs: 1_000, clock },
    ).start();
    expect(probe.reached()).toBe(true); // just opened: the open reached it

    await eventually(() => (sent >= 3 ? true : undefined), 5_000, 'three probes');
    await clock.advance(999);
    expect(probe.reached()).toBe(true);

    // A silent cut: the probe hangs; no answer for the patience → not reached.
    mode = 'hang';
    const at = sent;
    await eventually(() => (sent > at ? true : undefined), 5_000, 'a hanging probe');
    await clock.advance(1_000);
    expect(probe.reached()).toBe(false);
    // The hanging probe is the only one: no pile-up of probes behind a cut.
    const whileHanging = sent;
    await new Promise((r) => setTimeout(r, 50)); // real time is the subject: ten intervals pass
    expect(sent).toBe(whileHanging);
    expect(mostInFlight).toBe(1);

    // It answers (the cut healed): reached at once.
    mode = 'answer';
    hanging.shift()!();
    await eventually(() => (probe!.reached() ? true : undefined), 5_000, 'reached again');

    // A refused connection is no answer either.
    mode = 'fail';
    await clock.advance(1_000);
    expect(probe.reached()).toBe(false);
    await eventually(() => (sent > whileHanging + 2 ? true : undefined), 5_000, 'failing probes');
    expect(probe.reached()).toBe(false);
  });
});
