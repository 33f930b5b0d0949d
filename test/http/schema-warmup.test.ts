import { describe, expect, it } from 'vitest';
import { lazyCompiled, pendingSchemas, warmSchemas } from '../../src/http/schema-warmup.js';
import { serverWith } from './fake-api.js';

/** Turns of the event loop until `done`, at most `turns`. */
async function until(done: () => boolean, turns = 10_000): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('route schemas compiled after the start', () => {
  it('compiles each once, whichever of its first use and the warm-up comes first', async () => {
    let compiles = 0;
    const used = lazyCompiled(() => ++compiles);
    const warmed = lazyCompiled(() => ++compiles);
    expect(used()).toBe(1);
    expect(used()).toBe(1);
    warmSchemas();
    await until(() => compiles === 2);
    expect(warmed()).toBe(2);
    expect(compiles).toBe(2);
  });

  it('leaves a compile that fails to its first use, which throws its error', async () => {
    const broken = lazyCompiled((): number => {
      throw new Error('refused');
    });
    warmSchemas();
    await until(() => pendingSchemas() === 0);
    expect(() => broken()).toThrow('refused');
  });

  it("compiles a listening server's route schemas without a request, in the background", async () => {
    const { app } = serverWith({});
    try {
      await app.ready();
      const before = pendingSchemas();
      expect(before).toBeGreaterThan(50);
      await app.listen({ host: '127.0.0.1', port: 0 });
      await until(() => pendingSchemas() === 0);
      expect(pendingSchemas()).toBe(0);
    } finally {
      await app.close();
    }
  });
});
