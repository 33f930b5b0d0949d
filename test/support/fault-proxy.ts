/**
 * A TCP proxy for fault-injection tests, put between a real client (a node, a `pg` pool, an
 * ioredis client) and the real shared Postgres or Redis. It shows the client what a server
 * restart, a paused server or a slow network looks like, without touching the server, which
 * other test files share.
 *
 * Faults are windows: `refuse` and `blackhole` last `durationMs` (or until `restore()`) and
 * return a promise that resolves when their window is over, so a test can start one, act, and
 * `await` its end. `dropAll` is instantaneous; `latency` lasts until it is set to 0.
 */
import net from 'node:net';

/** Where the proxy forwards to. */
export interface ProxyTarget {
  host: string;
  port: number;
}

export interface FaultProxyOptions {
  /** The real server, e.g. `{ host: '127.0.0.1', port: 5432 }`. */
  target: ProxyTarget;
}

/** Counters since the proxy started. */
export interface FaultProxyStats {
  /** Connections accepted and forwarded (refused ones are not counted here). */
  accepted: number;
  /** Connections open now. */
  open: number;
  /** Connections closed at once because a `refuse` window was open. */
  refused: number;
  /** Connections destroyed by `dropAll` or at the end of a `blackhole` with `release: 'drop'`. */
  dropped: number;
  /** Bytes delivered to the target (held or dropped bytes are not counted). */
  bytesToTarget: number;
  /** Bytes delivered back to the clients. */
  bytesFromTarget: number;
}

export interface BlackholeOptions {
  /**
   * What happens to the held bytes when the window ends. `'deliver'`: forwarded in order, the
   * connections carry on, as after a `CLIENT PAUSE` or a SIGSTOP/SIGCONT of the server.
   * `'drop'`: discarded, and every connection open at that moment is destroyed, as after a
   * network partition that outlived the TCP connections.
   * @default 'deliver'
   */
  release?: 'deliver' | 'drop';
}

export interface FaultProxy {
  /** Always `127.0.0.1`. */
  readonly host: string;
  /** The port the proxy listens on (a free one). */
  readonly port: number;
  /** `original` (a `postgres://` or `redis://` URL) pointed at the proxy: same scheme, user, password, path and query. */
  url(original: string): string;
  /**
   * Destroys every open connection, both sides, at once: to the client, a server restart,
   * `pg_terminate_backend` or `CLIENT KILL`. Returns how many. Unlike a real restart, the server
   * learns of it only when it next reads: a Postgres backend busy in a long query runs on (with
   * its locks) until that query ends, unless `client_connection_check_interval` is set.
   */
  dropAll(): number;
  /**
   * For `durationMs` (forever when omitted or `Infinity`, until `restore()`), new connections are
   * reset as soon as they are accepted, like a server that is down (clients see `ECONNRESET`,
   * not `ECONNREFUSED`); open ones are left alone. Resolves when the window is over.
   */
  refuse(durationMs?: number): Promise<void>;
  /** `refuse(downMs)` after `dropAll()`: the server restarts and is down for `downMs`. Resolves when it is back. */
  restart(downMs: number): Promise<void>;
  /**
   * For `durationMs` (forever when omitted, until `restore()`), no byte is forwarded either way:
   * connections stay open and silent, new ones are accepted and silent too. Bytes are held, and
   * at the end delivered or dropped as `release` says. Resolves when the window is over.
   */
  blackhole(durationMs?: number, options?: BlackholeOptions): Promise<void>;
  /** Delays every chunk forwarded after this call by `delayMs` in each direction, order kept; 0 removes it. */
  latency(delayMs: number): void;
  /** Ends every fault at once: open windows end (as their `release` says) and their promises resolve; latency is 0. */
  restore(): void;
  stats(): FaultProxyStats;
  /** Ends every fault, destroys every connection and closes the listener. */
  close(): Promise<void>;
}

/** `setTimeout` cannot wait longer than 2³¹−1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Window {
  kind: 'refuse' | 'blackhole';
  release: 'deliver' | 'drop';
  timer: NodeJS.Timeout | undefined;
  resolve: () => void;
}

/** One direction of a connection: chunks queued in order, delayed by the latency, held in a blackhole. */
class Lane {
  private readonly queue: { chunk: Buffer | 'end'; dueAt: number }[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly from: net.Socket,
    private readonly to: net.Socket,
    private readonly proxy: TcpFaultProxy,
    private readonly countBytes: (bytes: number) => void,
  ) {}

  push(chunk: Buffer | 'end'): void {
    this.queue.push({ chunk, dueAt: Date.now() + this.proxy.delayMs });
    this.pump();
  }

  pump(): void {
    if (this.timer !== undefined) return;
    while (!this.proxy.holding() && !this.to.destroyed) {
      const head = this.queue[0];
      if (head === undefined) return;
      const waitMs = head.dueAt - Date.now();
      if (waitMs > 0) {
        // real time is the subject: the proxy delays real bytes by real milliseconds
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, waitMs);
        return;
      }
      this.queue.shift();
      if (head.chunk === 'end') {
        this.to.end();
      } else if (!this.to.write(head.chunk)) {
        this.countBytes(head.chunk.length);
        this.from.pause();
        this.to.once('drain', () => this.from.resume());
      } else {
        this.countBytes(head.chunk.length);
      }
    }
  }

  clear(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

class TcpFaultProxy implements FaultProxy {
  readonly host = '127.0.0.1';
  delayMs = 0;
  private readonly windows = new Set<Window>();
  private readonly links = new Set<{ lanes: Lane[]; destroy: () => void }>();
  private readonly counts = { accepted: 0, refused: 0, dropped: 0, bytesToTarget: 0, bytesFromTarget: 0 };

  /** Kept here: `server.address()` is null once the server is closed. */
  readonly port: number;

  constructor(
    private readonly server: net.Server,
    private readonly target: ProxyTarget,
  ) {
    this.port = (server.address() as net.AddressInfo).port;
    server.on('connection', (client) => this.accept(client));
  }

  url(original: string): string {
    const url = new URL(original);
    url.hostname = this.host;
    url.port = String(this.port);
    return url.toString();
  }

  /** Whether a blackhole window is open: lanes hold their bytes. */
  holding(): boolean {
    return this.hasWindow('blackhole');
  }

  dropAll(): number {
    const count = this.links.size;
    for (const link of [...this.links]) link.destroy();
    this.counts.dropped += count;
    return count;
  }

  refuse(durationMs = Infinity): Promise<void> {
    return this.open('refuse', durationMs, 'deliver');
  }

  restart(downMs: number): Promise<void> {
    const down = this.refuse(downMs);
    this.dropAll();
    return down;
  }

  blackhole(durationMs = Infinity, options: BlackholeOptions = {}): Promise<void> {
    return this.open('blackhole', durationMs, options.release ?? 'deliver');
  }

  latency(delayMs: number): void {
    if (!(delayMs >= 0)) throw new Error(`latency: delayMs must be ≥ 0, got ${delayMs}`);
    this.delayMs = delayMs;
  }

  restore(): void {
    for (const window of [...this.windows]) this.end(window);
    this.delayMs = 0;
  }

  stats(): FaultProxyStats {
    return { ...this.counts, open: this.links.size };
  }

  async close(): Promise<void> {
    this.restore();
    for (const link of [...this.links]) link.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private hasWindow(kind: Window['kind']): boolean {
    for (const window of this.windows) if (window.kind === kind) return true;
    return false;
  }

  private open(kind: Window['kind'], durationMs: number, release: Window['release']): Promise<void> {
    if (!(durationMs >= 0)) throw new Error(`${kind}: durationMs must be ≥ 0, got ${durationMs}`);
    return new Promise((resolve) => {
      const window: Window = { kind, release, timer: undefined, resolve };
      // real time is the subject: a fault window lasts this long on the wall clock
      if (Number.isFinite(durationMs))
        window.timer = setTimeout(() => this.end(window), Math.min(durationMs, MAX_TIMER_MS));
      this.windows.add(window);
    });
  }

  private end(window: Window): void {
    if (!this.windows.delete(window)) return;
    clearTimeout(window.timer);
    if (window.kind === 'blackhole' && window.release === 'drop') this.dropAll();
    for (const link of this.links) for (const lane of link.lanes) lane.pump();
    window.resolve();
  }

  private accept(client: net.Socket): void {
    client.on('error', () => undefined);
    if (this.hasWindow('refuse')) {
      this.counts.refused += 1;
      client.resetAndDestroy();
      return;
    }
    this.counts.accepted += 1;
    const upstream = net.connect({ ...this.target, allowHalfOpen: true });
    upstream.on('error', () => undefined);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const toTarget = new Lane(client, upstream, this, (bytes) => (this.counts.bytesToTarget += bytes));
    const fromTarget = new Lane(upstream, client, this, (bytes) => (this.counts.bytesFromTarget += bytes));
    const link = {
      lanes: [toTarget, fromTarget],
      destroy: () => {
        this.links.delete(link);
        toTarget.clear();
        fromTarget.clear();
        client.destroy();
        upstream.destroy();
      },
    };
    this.links.add(link);
    client.on('data', (chunk: Buffer) => toTarget.push(chunk));
    client.on('end', () => toTarget.push('end'));
    upstream.on('data', (chunk: Buffer) => fromTarget.push(chunk));
    upstream.on('end', () => fromTarget.push('end'));
    client.on('close', link.destroy);
    upstream.on('close', link.destroy);
  }
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to `options.target`, with no fault. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const server = net.createServer({ allowHalfOpen: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return new TcpFaultProxy(server, options.target);
}
