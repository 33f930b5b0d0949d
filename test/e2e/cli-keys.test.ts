/**
 * Which key the built CLI sends and which key a node takes, each from its own variable
 * (docs/security.md): clients read WHEELHOUSE_API_KEY (the former WHEELHOUSE_AUTH_TOKEN with a
 * warning) or the file --token-file names, and warn before sending one over plain http:// to
 * another machine; and a node never takes WHEELHOUSE_AUTH_TOKEN as its admin key — a worker's
 * environment on a node's host used to make its `work` key the node's admin key. A node given an
 * empty admin key (a variable that expanded to nothing) refuses to start rather than run open.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** An address of this machine that is not loopback, or null when it has none. */
function outwardAddress(): string | null {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

describe('the key a client sends', () => {
  let t: TestCluster;
  let local: string;
  let readKey: string;
  let dir: string;

  beforeAll(async () => {
    // On every address (it has an admin key), so that it can also be reached as a remote host.
    t = await startTestNode('embedded', { adminToken: ADMIN, host: '0.0.0.0' });
    local = `http://127.0.0.1:${new URL(t.url).port}`;
    dir = mkdtempSync(join(tmpdir(), 'wheelhouse-cli-keys-'));
    const made = await api<{ token: string }>(
      local,
      'POST',
      '/admin/tokens',
      { name: 'cli', scopes: ['read'] },
      bearer(ADMIN),
    );
    readKey = made.body.token;
  });
  afterAll(async () => {
    await t?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is WHEELHOUSE_API_KEY', async () => {
    const run = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: local, WHEELHOUSE_API_KEY: readKey }),
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('is still the former WHEELHOUSE_AUTH_TOKEN, with a warning naming the new variable', async () => {
    const run = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: local, WHEELHOUSE_AUTH_TOKEN: readKey }),
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/WHEELHOUSE_AUTH_TOKEN is deprecated .*WHEELHOUSE_API_KEY/);
  });

  it('is also WHEELHOUSE_TOKEN, deprecated: a warning naming the canonical WHEELHOUSE_API_KEY', async () => {
    const run = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: local, WHEELHOUSE_TOKEN: readKey }),
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/WHEELHOUSE_TOKEN is deprecated .*WHEELHOUSE_API_KEY/);
    // WHEELHOUSE_API_KEY wins, without a warning, when both are set.
    const both = await runCli(['list', '--json'], {
      env: cleanEnv({ WHEELHOUSE_URL: local, WHEELHOUSE_API_KEY: readKey, WHEELHOUSE_TOKEN: 'not-a-key' }),
    });
    expect(both.code).toBe(0);
    expect(both.stderr).toBe('');
  });

  it('can come from a file (--token-file), which ps does not show', async () => {
    const file = join(dir, 'read.key');
    writeFileSync(file, `${readKey}\n`, { mode: 0o600 });
    const run = await runCli(['list', '--json', '--token-file', file], { env: cleanEnv({ WHEELHOUSE_URL: local }) });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // Without a key the same call is refused: the file's key is what let it through.
    expect((await runCli(['list'], { env: cleanEnv({ WHEELHOUSE_URL: local }) })).code).toBe(1);
    const both = await runCli(['list', '--token-file', file, '--token', readKey], { env: cleanEnv() });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give --token or --token-file, not both');
    const missing = await runCli(['list', '--token-file', join(dir, 'nope.key')], { env: cleanEnv() });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--token-file .*nope\.key: ENOENT/);
    // `wheelhouse worker` takes the flag too (here it stops at the handler it lacks).
    const worker = await runCli(['worker', '--token-file', file], { env: cleanEnv() });
    expect(worker.code).toBe(2);
    expect(worker.stderr).toContain('wheelhouse worker needs --handler');
  });

  it('is sent to a host beyond this machine over plain http:// with a warning', async () => {
    const address = outwardAddress();
    expect(address, 'this machine has an address beyond loopback').not.toBeNull();
    const port = new URL(t.url).port;
    const run = await runCli(['list', '--json', '--url', `http://${address}:${port}`], {
      env: cleanEnv({ WHEELHOUSE_API_KEY: readKey }),
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(`the API key goes to ${address}:${port} over plain http://`);
    // To loopback, this machine, there is none (the first test of this file).
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
