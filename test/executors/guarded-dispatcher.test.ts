import type { LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { interceptors, request, type Dispatcher } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DestinationPolicy } from '../../src/executors/destination-policy.js';
import { DestinationRefusedError } from '../../src/executors/destination-policy.js';
import { guardedDispatcher } from '../../src/executors/guarded-dispatcher.js';

/**
 * A name that resolves to a public address and a loopback one, public first, as a rebinding
 * attacker's DNS would answer; every other name resolves as usual.
 */
const MIXED = vi.hoisted(() => ({
  host: 'mixed.rebinding.test',
  addresses: [
    { address: '93.184.215.14', family: 4 },
    { address: '127.0.0.1', family: 4 },
  ] as LookupAddress[],
}));
vi.mock('node:dns', async (importOriginal) => {
  const dns = await importOriginal<typeof import('node:dns')>();
  const lookup = ((hostname: string, options: unknown, callback: (...args: unknown[]) => void) => {
    if (hostname !== MIXED.host) return (dns.lookup as (...args: unknown[]) => void)(hostname, options, callback);
    setImmediate(() => callback(null, MIXED.addresses));
  }) as typeof dns.lookup;
  return { ...dns, lookup };
});

/**
 * The guard sits on the connection, not on the URL: whatever leads a request to an address —
 * the URL, a name, a redirect (the executor follows none, but a dispatcher that did would
 * still be held) — the address is checked before a socket is opened.
 */
describe('the guarded dispatcher', () => {
  let refused: Server;
  let refusedConnections = 0;
  let redirector: Server;
  let refusedUrl: string;
  let redirectorUrl: string;
  const dispatchers: Dispatcher[] = [];

  const listen = async (server: Server, host: string): Promise<string> => {
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return `http://${host}:${(server.address() as AddressInfo).port}`;
  };
  const guarded = (allow: string[]) => {
    const agent = guardedDispatcher(new DestinationPolicy(allow), {
      connectionsPerDestination: 4,
      connectTimeoutMs: 5_000,
    });
    dispatchers.push(agent);
    return agent;
  };

  beforeAll(async () => {
    refused = createServer((_req, res) => res.end('reached'));
    refused.on('connection', () => refusedConnections++);
    refusedUrl = await listen(refused, '127.0.0.1');
    redirector = createServer((_req, res) => res.writeHead(302, { location: `${refusedUrl}/stolen` }).end());
    redirectorUrl = await listen(redirector, '127.0.0.2');
  });
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.destroy()));
  });
  afterAll(async () => {
    refused.closeAllConnections();
    redirector.closeAllConnections();
    await new Promise((resolve) => refused.close(resolve));
    await new Promise((resolve) => redirector.close(resolve));
  });

  it('holds every hop of a redirect to the rule, were redirects followed', async () => {
    const following = guarded(['127.0.0.2']).compose(interceptors.redirect({ maxRedirections: 3 }));
    const error = await request(`${redirectorUrl}/go`, { dispatcher: following }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DestinationRefusedError);
    expect((error as Error).message).toBe('refused: 127.0.0.1 is a loopback address; allow it with httpExecutorAllow');
    expect(refusedConnections).toBe(0);
  });

  it('refuses a name by what it resolves to, and lets a name on the allow-list through', async () => {
    const port = new URL(refusedUrl).port;
    const refused = await request(`http://localhost:${port}/`, { dispatcher: guarded([]) }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(DestinationRefusedError);
    expect((refused as DestinationRefusedError).message).toMatch(
      /^refused: localhost resolves to a non-public address/,
    );
    expect((refused as DestinationRefusedError).detail).toMatch(
      /^refused: localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/,
    );
    expect(refusedConnections).toBe(0);
    // The name is allowed, not the address: 127.0.0.1 in the URL is still refused.
    const byName = guarded(['localhost']);
    await expect(request(`${refusedUrl}/`, { dispatcher: byName })).rejects.toThrow(/^refused: 127\.0\.0\.1/);
    const answer = await request(`http://localhost:${port}/`, { dispatcher: byName });
    expect(await answer.body.text()).toBe('reached');
  });

  it('refuses a name if any of its addresses is refused, not only the first', async () => {
    const port = new URL(refusedUrl).port;
    const before = refusedConnections;
    const error = await request(`http://${MIXED.host}:${port}/`, { dispatcher: guarded([]) }).then(
      () => null,
      (e: unknown) => e,
    );
    // On the refusal, not its wording: the guard said no before any socket was opened.
    expect(error).toBeInstanceOf(DestinationRefusedError);
    expect(refusedConnections).toBe(before);
  });
});
