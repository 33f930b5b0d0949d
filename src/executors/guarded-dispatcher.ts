import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { DestinationRefusedError, type DestinationPolicy } from './destination-policy.js';

export interface GuardedDispatcherOptions {
  /** Connections open at once to one origin (scheme, host, port); further requests wait in its queue. */
  connectionsPerDestination: number;
  /** The longest a connection may take to open, ms. */
  connectTimeoutMs: number;
}

/**
 * An undici dispatcher that checks every connection against `policy` as it is made, on the
 * addresses it would be made to: an address in the URL is checked as it is; a name is
 * resolved, and refused if any of its addresses is (a name that mixes public and private
 * addresses is how a rebinding attack looks), before a socket is opened. The addresses
 * checked are the ones connected to — the check and the connection cannot disagree, however
 * the name resolves next time. Any request through it, whatever the URL and however it got
 * there (a redirect, were one followed), is held to the same rule.
 */
export function guardedDispatcher(policy: DestinationPolicy, options: GuardedDispatcherOptions): Agent {
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error !== null) return callback(error, '');
      for (const { address } of addresses) {
        const refusal = policy.refusal(hostname, address);
        if (refusal !== null) return callback(new DestinationRefusedError(refusal), '');
      }
      const first = addresses[0];
      if (first === undefined)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
      // net asks for every address when it races IPv4 and IPv6 (autoSelectFamily), else for one.
      if (lookupOptions.all === true) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
  const connectResolved = buildConnector({ lookup, timeout: options.connectTimeoutMs });
  const connect: buildConnector.connector = (target, callback) => {
    // net.connect does not look an address up, so an address in the URL is checked here.
    if (isIP(target.hostname) !== 0) {
      const refusal = policy.refusal(target.hostname, target.hostname);
      if (refusal !== null) {
        queueMicrotask(() => callback(new DestinationRefusedError(refusal), null));
        return;
      }
    }
    connectResolved(target, callback);
  };
  return new Agent({ connect, connections: options.connectionsPerDestination });
}
