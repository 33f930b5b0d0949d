/**
 * Which key the built CLI sends and which key a node takes, each from its own variable
 * (docs/security.md): clients read WHEELHOUSE_API_KEY (the former WHEELHOUSE_AUTH_TOKEN with a
 * warning), and a node never takes WHEELHOUSE_AUTH_TOKEN as its admin key — a worker's
 * environment on a node's host used to make its `work` key the node's admin key. A node given an
 * empty admin key (a variable that expanded to nothing) refuses to start rather than run open.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPgliteDir } from '../support/pglite-dirs.js';
import { api, startTestNode, type TestCluster } from '../support/nodes.js';
import { requireBuiltCli, runCli, spawnCli } from '../support/processes.js';
import { eventually } from '../support/waits.js';

requireBuiltCli();

const ADMIN = 'the-admin-key-of-the-cli-key-tests';
const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });

/** The environment of this process without any WHEELHOUSE_ variable, plus `extra`. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WHEELHOUSE_')));
  return { ...env, ...extra };
}

describe('the key a client sends', () => {
  let t: TestCluster;
  let readKey: string;

  beforeAll(async () => {
    t = await startTestNode('embedded', { adminToken: ADMIN });
    const made = await api<{ token: string }>(
      t.url,
      'POST',
      '/admin/tokens',
      { name: 'cli', scopes: ['read'] },
      bearer(ADMIN),
    );
    readKey = made.body.token;
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('is WHEELHOUSE_API_KEY', async () => {
    const run = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: t.url, WHEELHOUSE_API_KEY: readKey }),
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('is still the former WHEELHOUSE_AUTH_TOKEN, with a warning naming the new variable', async () => {
    const run = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: t.url, WHEELHOUSE_AUTH_TOKEN: readKey }),
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/WHEELHOUSE_AUTH_TOKEN is deprecated .*WHEELHOUSE_API_KEY/);
  });
});

describe('a node started with WHEELHOUSE_AUTH_TOKEN in its environment', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('does not take it as its admin key, and says that it ignores it', async () => {
    const dir = await freshPgliteDir('wheelhouse-cli-keys-');
    dirs.push(dir);
    const workKey = `whk_${'w'.repeat(43)}`;
    const run = spawnCli(['dev', '--port', '0', '--data-dir', dir], {
      env: cleanEnv({ WHEELHOUSE_AUTH_TOKEN: workKey }),
    });
    try {
      const url = await eventually(() => /listening on (http:\/\/[^\s]+)/.exec(run.stdout())?.[1], 30_000, 'listening');
      expect(run.stderr()).toMatch(/WHEELHOUSE_AUTH_TOKEN is set, and a node ignores it/);
      // Had it been the admin key, keys would be on: 401 without one, and the work key an admin.
      expect((await api(url, 'GET', '/api/tasks')).status).toBe(200);
    } finally {
      run.child.kill('SIGTERM');
      await run.exited();
    }
  });
});

describe('a node given an empty admin key', () => {
  it('refuses to start, naming the key, whether the variable or the flag is empty', async () => {
    for (const [args, env, key] of [
      [['dev', '--port', '0', '--data-dir', 'memory://'], { WHEELHOUSE_ADMIN_TOKEN: '' }, 'adminToken'],
      [['dev', '--port', '0', '--data-dir', 'memory://'], { WHEELHOUSE_ADMIN_TOKEN: 'null' }, 'adminToken'],
      [['dev', '--port', '0', '--data-dir', 'memory://', '--admin-token-file', ''], {}, 'adminTokenFile'],
    ] as const) {
      const run = spawnCli([...args], { env: cleanEnv(env) });
      // It exits, or it listens (then it is stopped here, and the test fails).
      const listening = eventually(() => (/listening/.test(run.stdout()) ? true : undefined), 60_000, 'listening');
      listening.catch(() => undefined);
      const ended = await Promise.race([run.exited(), listening.then(() => null)]);
      if (ended === null) {
        run.child.kill('SIGTERM');
        await run.exited();
      }
      expect(run.stdout(), `${args.join(' ')} ${JSON.stringify(env)}`).not.toMatch(/listening/);
      expect(ended?.code).toBe(2);
      expect(run.stderr()).toMatch(new RegExp(`config ${key}: is (empty|"null"); leave it unset for none`));
    }
  });
});
