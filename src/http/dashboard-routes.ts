import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WheelhouseError } from '../lib/errors.js';
import { ASSET_NAME_PATTERN, dashboardRoutesSchemas as schemas } from './schemas/operations.js';

/**
 * The dashboard at `GET /admin`: a static page and its scripts, built from src/dashboard/ by
 * `npm run build` (docs/decisions/0014-dashboard.md). The node lists the folder once as it
 * starts and serves those files only, from memory once read, with an ETag. The page holds no
 * data, so neither needs a key (as `/docs`): the page asks for an API key and sends it on every
 * API call it makes. A strict Content-Security-Policy keeps the page to its own scripts and
 * this origin, so nothing else can read the key it holds.
 */

export interface DashboardRoutesOptions {
  /** The built dashboard's folder. @default `../dashboard/` next to this file (dist/src/dashboard/) */
  dir?: string;
  /**
   * Whether the node asks for API keys now (`ApiKeysApi.enabled`). When it does not, the page
   * says so (`<html data-keys="off">`) and the dashboard opens without its sign-in form.
   * @default keys asked for
   */
  keysEnabled?: () => boolean;
}

/** The built files, next to this module once compiled (dist/src/http → dist/src/dashboard). */
export const DASHBOARD_DIR = fileURLToPath(new URL('../dashboard/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  body: Buffer;
  etag: string;
  type: string;
}

/** A dashboard file's name, as the asset route's schema allows it (`app.js`, `dashboard.css`). */
const ASSET_NAME = new RegExp(ASSET_NAME_PATTERN);

/**
 * The files each server's dashboard cache holds, across the servers of this process: what
 * tests watch to see that asking for names the build did not write keeps nothing.
 */
const caches = new Set<ReadonlyMap<string, unknown>>();

/** How many files the dashboard caches of this process hold. */
export function dashboardFilesCached(): number {
  let n = 0;
  for (const cache of caches) n += cache.size;
  return n;
}

export const dashboardRoutes: FastifyPluginAsync<DashboardRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const dir = opts.dir ?? DASHBOARD_DIR;
  // The files the build wrote, read once: any other name is a 404 that touches no cache, so
  // the cache holds at most these (anyone may ask, without a key, for any name).
  const files = await builtFiles(dir);
  const cache = new Map<string, Promise<Asset | null>>();
  caches.add(cache);
  fastify.addHook('onClose', (_instance, done) => {
    caches.delete(cache);
    done();
  });
  const load = (name: string, keyless = false): Promise<Asset | null> => {
    if (!files.has(name)) return Promise.resolve(null);
    // The page in two forms: for a node that asks for keys and for one that does not.
    const cached = keyless ? `${name} (keyless)` : name;
    let pending = cache.get(cached);
    if (pending === undefined) {
      pending = readAsset(dir, name, keyless);
      cache.set(cached, pending);
      // A file gone since the start (or unreadable) is not kept: the cache holds hits only.
      pending.then(
        (asset) => {
          if (asset === null) cache.delete(cached);
        },
        () => cache.delete(cached),
      );
    }
    return pending;
  };

  app.get('/admin', { schema: schemas.page }, async (request, reply) => {
    const asset = await load('index.html', opts.keysEnabled?.() === false);
    if (asset === null) throw notBuilt('index.html');
    reply.header('content-security-policy', CSP);
    return send(request, reply, asset);
  });

  app.get('/admin/assets/:file', { schema: schemas.asset }, async (request, reply) => {
    const { file } = request.params;
    const asset = file === 'index.html' ? null : await load(file);
    if (asset === null) throw notBuilt(file);
    return send(request, reply, asset);
  });
};

/** The page and the scripts and style sheets in `dir`; none when it is missing (not built). */
async function builtFiles(dir: string): Promise<ReadonlySet<string>> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw error;
  }
  return new Set(names.filter((name) => name === 'index.html' || ASSET_NAME.test(name)));
}

function notBuilt(name: string): WheelhouseError {
  return new WheelhouseError('not_found', `The dashboard has no file ${name} (is it built? npm run build).`, {
    details: { file: name },
  });
}

function send(request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply
    .header('etag', asset.etag)
    .header('cache-control', 'no-cache')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer');
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).send(asset.body);
}

/**
 * One built file, or null when there is none. The page gets a `modulepreload` link for each
 * script in its place of `<!-- modulepreload -->`, so the browser fetches the modules at once
 * rather than one import after another, and, for a node that asks for no key, `data-keys="off"`.
 */
async function readAsset(dir: string, name: string, keyless: boolean): Promise<Asset | null> {
  let body: Buffer;
  try {
    body = await readFile(`${dir}/${name}`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  if (name === 'index.html') {
    const scripts = (await readdir(dir)).filter((f) => f.endsWith('.js')).sort();
    const links = scripts.map((f) => `<link rel="modulepreload" href="/admin/assets/${f}">`).join('\n    ');
    let page = body.toString('utf8').replace('<!-- modulepreload -->', links);
    if (keyless) page = page.replace('<html lang="en">', '<html lang="en" data-keys="off">');
    body = Buffer.from(page);
  }
  const extension = name.slice(name.lastIndexOf('.'));
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  return { body, etag, type: TYPES[extension] ?? 'application/octet-stream' };
}
