import Fastify from 'fastify';
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { SchemaWarmup } from '../../src/http/schema-warmup.js';
import { useRouteSchemas } from '../../src/http/server.js';

/** Turns of the event loop until `done`, at most `turns`. */
async function until(done: () => boolean, turns = 10_000): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('route schemas compiled after the start', () => {
  it('compiles each once, whichever of its first use and the warm-up comes first', async () => {
    const warmup = new SchemaWarmup();
    let compiles = 0;
    const used = warmup.lazy(() => ++compiles);
    const warmed = warmup.lazy(() => ++compiles);
    expect(used()).toBe(1);
    expect(used()).toBe(1);
    warmup.warm();
    await until(() => warmup.size === 0);
    expect(compiles).toBe(2);
    expect(warmed()).toBe(2);
    expect(compiles).toBe(2);
  });

  it('leaves a compile that fails to its first use, which throws its error', async () => {
    const warmup = new SchemaWarmup();
    const broken = warmup.lazy((): number => {
      throw new Error('refused');
    });
    warmup.warm();
    await until(() => warmup.size === 0);
    expect(() => broken()).toThrow('refused');
  });

  it('compiles nothing more once stopped', async () => {
    const warmup = new SchemaWarmup();
    let compiles = 0;
    for (let i = 0; i < 20; i++) warmup.lazy(() => ++compiles);
    warmup.warm();
    warmup.stop();
    await until(() => false, 20);
    expect(compiles).toBe(0);
    expect(warmup.size).toBe(20);
  });

  it("compiles a listening server's route schemas without a request, in the background", async () => {
    const app = Fastify();
    const warmup = useRouteSchemas(app);
    app.get(
      '/things/:id',
      {
        schema: {
          params: Type.Object({ id: Type.String() }),
          querystring: Type.Object({ limit: Type.Optional(Type.Integer()) }),
          response: { 200: Type.Object({ id: Type.String() }) },
        },
      },
      async (request) => ({ id: (request.params as { id: string }).id }),
    );
    try {
      await app.ready();
      expect(warmup.size).toBeGreaterThanOrEqual(3);
      await app.listen({ host: '127.0.0.1', port: 0 });
      await until(() => warmup.size === 0);
      expect(warmup.size).toBe(0);
    } finally {
      await app.close();
    }
  });
});
