import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { compileOptions } from '../../src/lib/config.js';
import { nodeClock } from '../../src/node/context.js';
import type { Backend } from '../../src/store/backend.js';

// The nemesis steps a running node's clock through `testClockStepFile` (bench/nemesis.ts).
describe('testClockStepFile', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  const embedded = { kind: 'embedded' } as Backend;
  const skewMs = (clock: { now(): number }): number => clock.now() - Date.now();

  it('steps the running clock whenever the file changes, on top of the fixed offset', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wh-clock-'));
    dirs.push(dir);
    const file = join(dir, 'step');
    writeFileSync(file, '0');
    const options = compileOptions({ backend: 'embedded', testClockOffsetSeconds: 1, testClockStepFile: file });
    const { clock } = await nodeClock(options, embedded, undefined);
    expect(Math.round(skewMs(clock) / 1000)).toBe(1);

    writeFileSync(file, '-2.5');
    await vi.waitFor(() => expect(Math.round(skewMs(clock) / 100)).toBe(-15), { timeout: 10_000, interval: 50 });
    writeFileSync(file, '0');
    await vi.waitFor(() => expect(Math.round(skewMs(clock) / 1000)).toBe(1), { timeout: 10_000, interval: 50 });
  });

  it('reads no step while the file is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wh-clock-'));
    dirs.push(dir);
    const options = compileOptions({ backend: 'embedded', testClockStepFile: join(dir, 'none') });
    const { clock } = await nodeClock(options, embedded, undefined);
    expect(Math.abs(skewMs(clock))).toBeLessThan(1_000);
  });
});
