import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { WheelhouseError } from '../lib/errors.js';
import { uuidv7 } from '../lib/ids.js';
import type { ApiKeyStore } from '../store/api-key-store.js';

/**
 * API keys with scopes (docs/security.md). A request names a key as `Authorization: Bearer
 * <secret>`; a route needs one scope. The bootstrap admin key comes from configuration
 * (`adminToken` / `adminTokenFile`) and holds every scope; the others are made, listed and
 * revoked through `/admin/tokens` and kept in `api_keys` as the sha256 of their secret. Each
 * node holds the live keys in memory and re-reads them every `refreshMs`, so a key made or
 * revoked on one node counts on every node within that; a secret this node does not know (of
 * the shape keys have) makes it re-read — no sooner than `missRefreshMs` after the last read,
 * however many arrive — so a key made on another node works on its first request here.
 */

/**
 * What a key may do (docs/security.md): `submit`, `read` and `work` on tasks; `metrics` reads
 * `/metrics` (a Prometheus scrape); `ops` reads the operator routes (`/admin/cluster`, actors,
 * queues, `/metrics`), so `["read", "ops"]` is a dashboard that cannot change anything;
 * `admin` has those operator routes too and alone manages keys.
 */
export const SCOPES = ['submit', 'read', 'work', 'metrics', 'ops', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** Who a request is: a key's id and name, and what it may do. */
export interface Principal {
  keyId: string;
  name: string;
  scopes: readonly Scope[];
}

/** A key as `GET /admin/tokens` shows it: never its secret. */
export interface ApiKeyView {
  keyId: string;
  name: string;
  scopes: Scope[];
  createdMs: number;
}

/** What the HTTP face needs of the keys. */
export interface ApiKeysApi {
  /**
   * Whether requests need a key: an admin key is configured, or a key was ever made — revoked
   * or not, so revoking the last key does not open the node again.
   */
  enabled(): boolean;
  /** The key `secret` names, or null. */
  authenticate(secret: string): Promise<Principal | null>;
  create(name: string, scopes: readonly Scope[]): Promise<ApiKeyView & { secret: string }>;
  list(): Promise<ApiKeyView[]>;
  /** `not_found` when no live key has this id. */
  revoke(keyId: string): Promise<void>;
  /**
   * Calls `listener` with the ids of the keys that a re-read of the keys (this node's revoke,
   * or the periodic one) finds no longer live, so that what they opened is closed; `null` among
   * them when the node, which asked for no key, now asks for one (the first key was made): what
   * was opened without a key goes too. Returns a function that stops.
   */
  onRevoked(listener: (keyIds: ReadonlySet<string | null>) => void): () => void;
}

export interface ApiKeysOptions {
  store: ApiKeyStore;
  /** The bootstrap admin key's secret, or null. */
  adminSecret: string | null;
  /** How often the live keys are re-read, ms. @default 500 */
  refreshMs?: number;
  /** Least time between re-reads caused by an unknown secret, ms. @default 250 */
  missRefreshMs?: number;
}

const ADMIN: Principal = { keyId: 'admin', name: 'bootstrap admin key', scopes: SCOPES };
const SECRET_PREFIX = 'whk_';

export class ApiKeys implements ApiKeysApi {
  private byHash = new Map<string, Principal>();
  private readonly adminHash: Buffer | null;
  private loadedMs = 0;
  /** A key was made once (`api_keys` holds a row): from then on, for good, keys are asked for. */
  private everMade = false;
  private loading: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly revokedListeners = new Set<(keyIds: ReadonlySet<string | null>) => void>();

  constructor(private readonly options: ApiKeysOptions) {
    this.adminHash = options.adminSecret === null ? null : sha256(options.adminSecret);
  }

  /** Reads the live keys, then again every `refreshMs` until `stop`. */
  async start(onError: (error: unknown) => void): Promise<void> {
    await this.refresh();
    const tick = (): void => {
      this.timer = setTimeout(() => {
        this.refresh().then(tick, (error: unknown) => {
          onError(error);
          tick();
        });
      }, this.options.refreshMs ?? 500);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  enabled(): boolean {
    return this.adminHash !== null || this.everMade;
  }

  async authenticate(secret: string): Promise<Principal | null> {
    const hash = sha256(secret);
    if (this.adminHash !== null && timingSafeEqual(hash, this.adminHash)) return ADMIN;
    const hex = hash.toString('hex');
    // A map lookup by the hash of the secret: equal hashes are what a guess would have to
    // find, and the hash of a 256-bit secret cannot be worked back from timing.
    const known = this.byHash.get(hex);
    if (known !== undefined) return known;
    if (!secret.startsWith(SECRET_PREFIX)) return null;
    // Perhaps a key made on another node since the last read: read again, but not more often
    // than every `missRefreshMs` however many unknown secrets arrive (they wait for that read).
    await this.rereadForMiss();
    return this.byHash.get(hex) ?? null;
  }

  private missRead: Promise<void> | null = null;

  private rereadForMiss(): Promise<void> {
    const startedMs = Date.now();
    this.missRead ??= (async () => {
      const wait = this.loadedMs + (this.options.missRefreshMs ?? 250) - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (this.loadedMs <= startedMs) await this.refresh();
    })().finally(() => {
      this.missRead = null;
    });
    return this.missRead;
  }

  async create(name: string, scopes: readonly Scope[]): Promise<ApiKeyView & { secret: string }> {
    const secret = `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
    const unique = [...new Set(scopes)].sort((a, b) => SCOPES.indexOf(a) - SCOPES.indexOf(b));
    const stored = await this.options.store.insert({
      keyId: uuidv7(),
      name,
      scopes: unique,
      secretHash: sha256(secret).toString('hex'),
    });
    await this.refresh();
    return { keyId: stored.keyId, name: stored.name, scopes: unique, createdMs: stored.createdMs, secret };
  }

  onRevoked(listener: (keyIds: ReadonlySet<string | null>) => void): () => void {
    this.revokedListeners.add(listener);
    return () => this.revokedListeners.delete(listener);
  }

  /**
   * Tells the listeners of the keys live in `before` that are not in `after`, and of the end of
   * keyless access (`null`) when the node began asking for keys.
   */
  private tellRevoked(before: Map<string, Principal>, after: Map<string, Principal>, keylessEnded: boolean): void {
    if (this.revokedListeners.size === 0) return;
    const live = new Set<string>();
    for (const key of after.values()) live.add(key.keyId);
    const revoked = new Set<string | null>();
    for (const key of before.values()) if (!live.has(key.keyId)) revoked.add(key.keyId);
    if (keylessEnded) revoked.add(null);
    if (revoked.size === 0) return;
    for (const listener of this.revokedListeners) listener(revoked);
  }

  async list(): Promise<ApiKeyView[]> {
    const live = await this.options.store.live();
    return live.map((k) => ({ keyId: k.keyId, name: k.name, scopes: k.scopes as Scope[], createdMs: k.createdMs }));
  }

  async revoke(keyId: string): Promise<void> {
    if (!(await this.options.store.revoke(keyId))) {
      throw new WheelhouseError('not_found', `No live API key has the id ${keyId}.`, { details: { token_id: keyId } });
    }
    await this.refresh();
  }

  /**
   * Re-reads the live keys; concurrent callers share one read. While no key is live and none
   * is known to have been made, it also asks whether a revoked one was (after a restart).
   */
  refresh(): Promise<void> {
    this.loading ??= this.options.store
      .live()
      .then(async (live) => {
        const next = new Map<string, Principal>();
        for (const k of live) next.set(k.secretHash, { keyId: k.keyId, name: k.name, scopes: k.scopes as Scope[] });
        const made = this.everMade || live.length > 0 || (await this.options.store.anyMade());
        const before = this.byHash;
        const wasEnabled = this.enabled();
        this.byHash = next;
        this.everMade = made;
        this.tellRevoked(before, next, !wasEnabled && this.enabled());
        this.loadedMs = Date.now();
      })
      .finally(() => {
        this.loading = null;
      });
    return this.loading;
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
