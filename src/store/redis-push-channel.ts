import { randomUUID } from 'node:crypto';
import { pushedChannel } from './redis-keys.js';
import { isCluster, type RedisClient } from './redis.js';

/**
 * The ready queues' pub/sub channel (`<prefix>:pushed`): every push and requeue is announced
 * on it with the task types it touched, so a worker long-polling one node wakes when another
 * node's wheel pushes. An announcement is `instanceId|type|type|…` (neither holds `|`: a UUID;
 * task types are checked), and each instance ignores its own, whose listeners it has already
 * woken. A lost announcement only loses a wake-up, which the long-poll's periodic recheck
 * (every second) makes up for, so failures to announce or to hear are never a push's failure.
 *
 * On Redis Cluster a PUBLISH on any node reaches the subscribers of every node, so the
 * subscriber connection (ioredis picks a node for it, and another when that one goes) hears
 * the announcements of all.
 */
export class RedisPushChannel {
  /** The channel's name: a push pipeline or script publishes on it itself. */
  readonly name: string;
  /** Names this instance in its announcements, so that it ignores its own. */
  readonly instanceId = randomUUID();
  /** Hears other instances' announcements; opened by the first `listen`. */
  private subscriber: RedisClient | null = null;
  private subscription: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly onError: (error: unknown, context: string) => void,
  ) {
    this.name = pushedChannel(prefix);
  }

  /** What announces these task types. */
  announcement(taskTypes: ReadonlySet<string>): string {
    return [this.instanceId, ...taskTypes].join('|');
  }

  /** Announces a push or requeue that landed; never rejects (see the class). */
  async announce(taskTypes: ReadonlySet<string>): Promise<void> {
    if (taskTypes.size === 0) return;
    try {
      await this.redis.publish(this.name, this.announcement(taskTypes));
    } catch {
      // A lost wake-up, nothing more.
    }
  }

  /**
   * Hands other instances' announcements to `emit`, on a connection of its own (a
   * `duplicate()` of the client) opened at the first call; later calls change nothing.
   */
  listen(emit: (taskTypes: Set<string>) => void): void {
    if (this.subscriber !== null || this.closed) return;
    // A subscription waits out a Redis outage instead of failing, and never times out (on a
    // cluster, in the offline queue the command client goes without).
    const patient = {
      connectionName: `wheelhouse:${this.prefix}:pushed`,
      maxRetriesPerRequest: null,
      commandTimeout: undefined,
    };
    const redis = this.redis;
    const subscriber: RedisClient = isCluster(redis)
      ? redis.duplicate(undefined, {
          enableOfflineQueue: true,
          redisOptions: { ...redis.options.redisOptions, ...patient },
        })
      : redis.duplicate(patient);
    subscriber.on('error', (error: Error) => this.onError(error, 'ready-queue subscriber connection'));
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.name) return;
      const [sender, ...taskTypes] = message.split('|');
      if (sender === this.instanceId) return;
      try {
        emit(new Set(taskTypes.filter((taskType) => taskType.length > 0)));
      } catch (error) {
        this.onError(error, 'ready-queue push listener');
      }
    });
    this.subscriber = subscriber;
    this.subscription = subscriber.subscribe(this.name).then(
      () => undefined,
      (error: unknown) => {
        if (!this.closed) this.onError(error, `subscribing to ${this.name}`);
      },
    );
  }

  /** Resolves once the subscription is in place (or failed, as told to `onError`). */
  listening(): Promise<void> {
    return this.subscription;
  }

  /** Closes the subscriber connection, if any. */
  async close(): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = null;
    if (subscriber === null) return;
    if (subscriber.status === 'ready') {
      try {
        await subscriber.quit();
        return;
      } catch {
        // The connection went down meanwhile: drop it below.
      }
    }
    subscriber.disconnect();
  }
}
