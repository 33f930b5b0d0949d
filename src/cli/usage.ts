import { readFileSync } from 'node:fs';
import { isLoopbackHost } from '../lib/address-patterns.js';

/**
 * What the verbs that talk to a node share: the error for something the user typed that
 * cannot be run, and where the node is (`--url`, `--token` or `--token-file`, and their
 * environment twins).
 */

/** Where a verb looks for a node when neither `--url` nor WHEELHOUSE_URL says: `wheelhouse dev`'s address. */
export const DEFAULT_NODE_URL = 'http://127.0.0.1:7070';

/**
 * Something the user typed that cannot be run: printed, exit code 2. `usage` is the help
 * printed after the message: undefined for the client verbs' help, null for none (the
 * message says all there is, as for a handler module that is missing).
 */
export class UsageError extends Error {
  readonly usage: string | null | undefined;
  constructor(message: string, options: { usage?: string | null; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'UsageError';
    this.usage = options.usage;
  }
}

/** The variable that holds the key the CLI and `wheelhouse worker` send (docs/security.md). */
export const API_KEY_VARIABLE = 'WHEELHOUSE_API_KEY';
/**
 * Other names it went by, still read (in this order, when WHEELHOUSE_API_KEY is not set), each
 * with a warning naming WHEELHOUSE_API_KEY: WHEELHOUSE_AUTH_TOKEN, its former name (nodes no
 * longer read it as their admin key), and WHEELHOUSE_TOKEN, the name `--token` suggests and
 * older docs and scripts used.
 */
export const DEPRECATED_API_KEY_VARIABLES = ['WHEELHOUSE_AUTH_TOKEN', 'WHEELHOUSE_TOKEN'] as const;

/**
 * The node a verb talks to: `--url` or WHEELHOUSE_URL or the default, and its key: `--token`,
 * or the file `--token-file` names (what `ps` cannot show), or WHEELHOUSE_API_KEY (or, with a
 * warning on `warn`, one of its deprecated names). A key about to go over plain `http://`
 * to a host that is not this machine is warned about: anyone on the way can read it.
 */
export function nodeConnection(
  values: { url?: string | undefined; token?: string | undefined; 'token-file'?: string | undefined },
  env: NodeJS.ProcessEnv,
  warn: (text: string) => void,
): { url: string; token?: string } {
  const url = values.url ?? env.WHEELHOUSE_URL ?? DEFAULT_NODE_URL;
  let token = values.token ?? tokenFromFile(values['token-file']) ?? env[API_KEY_VARIABLE];
  if (values.token !== undefined && values['token-file'] !== undefined) {
    throw new UsageError('give --token or --token-file, not both', { usage: null });
  }
  for (const name of DEPRECATED_API_KEY_VARIABLES) {
    if (token !== undefined || env[name] === undefined) continue;
    warn(`wheelhouse: ${name} is deprecated for the key a client sends: set ${API_KEY_VARIABLE}\n`);
    token = env[name];
  }
  if (token) {
    for (const host of plainRemoteHosts(url)) {
      warn(`wheelhouse: the API key goes to ${host} over plain http://, readable on the way: use https://\n`);
    }
  }
  return token ? { url, token } : { url };
}

/** The key in the file `--token-file` names (whitespace around it dropped), or undefined without the flag. */
function tokenFromFile(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new UsageError(`--token-file ${file}: ${(error as Error).message}`, { usage: null, cause: error });
  }
  if (text === '') throw new UsageError(`--token-file ${file} is empty`, { usage: null });
  return text;
}

/** The hosts of `urls` (one, or several separated by commas) reached over `http:` that are not loopback. */
function plainRemoteHosts(urls: string): string[] {
  const hosts: string[] = [];
  for (const text of urls.split(',')) {
    let parsed: URL;
    try {
      parsed = new URL(text.trim());
    } catch {
      continue; // the client says what is wrong with it
    }
    if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname)) hosts.push(parsed.host);
  }
  return hosts;
}

/** `text` as a whole number of at least `min` (and at most `max`), or a `UsageError` naming `flag`. */
export function intFlag(text: string, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new UsageError(`${flag} must be a whole number ${range}, got "${text}"`);
  }
  return n;
}

/** The options of every verb that talks to a node: where, with which key, and how to print. */
export const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  json: { type: 'boolean' },
} as const;
