/**
 * LimitCatalog: the node's copy of the declarations. Resolution (own declaration, family,
 * none), the gated keys of a task, submit's `known`/`firstUnknown` (reading the store once
 * on a miss), and refreshing: at most once per interval, at once when forced, never
 * re-reading an unchanged catalog, and a forced refresh during a read reading again after it.
 */
import { describe, expect, it } from 'vitest';
import type { LimitDeclaration, LimitSpec } from '../../src/domain/limits.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { LimitCatalog } from '../../src/services/limit-catalog.js';
import type { LimitStore } from '../../src/store/limit-types.js';

const SPEC: LimitSpec = { concurrency: 2, rate: null, onLimit: 'queue', weight: 1 };

/** A store whose catalog is a list the test edits; its version is a counter bumped on each edit. */
class FakeCatalogStore implements Pick<LimitStore, 'catalog'> {
  declarations: LimitDeclaration[] = [];
  version = 0;
  reads = 0;
  fullReads = 0;
  /** When set, `catalog` waits for it before answering (a read under way). */
  gate: Promise<void> | null = null;

  declare(name: string, spec: Partial<LimitSpec> = {}): void {
    this.declarations = [
      ...this.declarations.filter((d) => d.name !== name),
      { name, ...SPEC, ...spec, createdMs: 0, updatedMs: 0 },
    ];
    this.version++;
  }

  remove(name: string): void {
    this.declarations = this.declarations.filter((d) => d.name !== name);
    this.version++;
  }

  async catalog(sinceVersion: string | null) {
    this.reads++;
    // What the store holds when the read begins is what it answers.
    const version = String(this.version);
    const snapshot = [...this.declarations];
    if (this.gate) await this.gate;
    if (version === sinceVersion) return { version, declarations: null };
    this.fullReads++;
    return { version, declarations: snapshot };
  }
}

async function catalogWith(...names: string[]) {
  const store = new FakeCatalogStore();
  for (const name of names) store.declare(name);
  const clock = new FakeClock();
  const catalog = new LimitCatalog({ store, clock });
  await catalog.start();
  return { store, clock, catalog };
}

describe('LimitCatalog', () => {
  it('resolves a key by its own declaration, else its most specific family, else none', async () => {
    const { store, catalog } = await catalogWith('customer:*', 'customer:eu:*', 'customer:42');
    store.declarations = store.declarations.map((d) => (d.name === 'customer:42' ? { ...d, concurrency: 9 } : d));
    store.version++;
    await catalog.refresh(true);
    expect(catalog.resolve('customer:42')).toMatchObject({
      key: 'customer:42',
      declaredAs: 'customer:42',
      concurrency: 9,
    });
    expect(catalog.resolve('customer:eu:7')).toMatchObject({ key: 'customer:eu:7', declaredAs: 'customer:eu:*' });
    expect(catalog.resolve('customer:7')).toMatchObject({ declaredAs: 'customer:*', concurrency: 2 });
    expect(catalog.resolve('stripe-api')).toBeNull();
    expect(catalog.isGated('customer:7')).toBe(true);
    expect(catalog.isGated('stripe-api')).toBe(false);
  });

  it("names a task's gated keys, its type's among them, sorted; one shared empty array when none", async () => {
    const empty = await catalogWith();
    const none = empty.catalog.gatedKeys('email.send', ['a', 'b']);
    expect(none).toEqual([]);
    expect(empty.catalog.gatedKeys('other', null)).toBe(none);

    const { catalog } = await catalogWith('type:email.send', 'customer:*', 'zeta');
    expect(catalog.gatedKeys('email.send', ['customer:42', 'stripe-api', 'zeta'])).toEqual([
      'customer:42',
      'type:email.send',
      'zeta',
    ]);
    expect(catalog.gatedKeys('sms.send', ['customer:1'])).toEqual(['customer:1']);
    expect(catalog.gatedKeys('sms.send', ['stripe-api'])).toBe(none);
  });

  it('knows a declared name or one a declared family covers', async () => {
    const { catalog } = await catalogWith('stripe-api', 'customer:*');
    expect(catalog.known('stripe-api')).toBe(true);
    expect(catalog.known('customer:42')).toBe(true);
    expect(catalog.known('customer')).toBe(false);
    expect(catalog.known('github-api')).toBe(false);
  });

  it('reads the store once before calling a name unknown, so a declaration from another node is seen', async () => {
    const { store, catalog } = await catalogWith('stripe-api');
    const reads = store.reads;
    expect(await catalog.firstUnknown(['stripe-api'])).toBeNull();
    expect(store.reads).toBe(reads);

    store.declare('github-api');
    expect(await catalog.firstUnknown(['stripe-api', 'github-api'])).toBeNull();
    expect(store.reads).toBe(reads + 1);

    expect(await catalog.firstUnknown(['github-api', 'nope', 'also-nope'])).toBe('nope');
    expect(store.reads).toBe(reads + 2);
  });

  it('reads the store at most once per interval unless forced, and not the declarations when unchanged', async () => {
    const { store, clock, catalog } = await catalogWith('a');
    expect(store.reads).toBe(1);
    expect(await catalog.refresh()).toBe(false);
    expect(store.reads).toBe(1);

    await clock.advance(1000);
    expect(await catalog.refresh()).toBe(false);
    expect(store.reads).toBe(2);
    expect(store.fullReads).toBe(1);

    store.declare('b');
    expect(await catalog.refresh()).toBe(false);
    expect(catalog.known('b')).toBe(false);
    expect(await catalog.refresh(true)).toBe(true);
    expect(catalog.known('b')).toBe(true);

    store.remove('a');
    await clock.advance(1000);
    expect(await catalog.refresh()).toBe(true);
    expect(catalog.known('a')).toBe(false);
    expect(catalog.size).toBe(1);
  });

  it('forgets resolutions when the declarations change, and tells its listeners', async () => {
    const { store, catalog } = await catalogWith('customer:*');
    let told = 0;
    const off = catalog.onChange(() => told++);
    expect(catalog.resolve('customer:1')).toMatchObject({ declaredAs: 'customer:*' });
    store.declare('customer:1', { concurrency: 7 });
    await catalog.refresh(true);
    expect(catalog.resolve('customer:1')).toMatchObject({ declaredAs: 'customer:1', concurrency: 7 });
    expect(told).toBe(1);
    off();
    store.remove('customer:*');
    await catalog.refresh(true);
    expect(catalog.resolve('customer:2')).toBeNull();
    expect(told).toBe(1);
  });

  it('reads again after a read under way when a refresh is forced meanwhile', async () => {
    const { store, clock, catalog } = await catalogWith();
    await clock.advance(1000);
    let open!: () => void;
    store.gate = new Promise((resolve) => (open = resolve));
    const under = catalog.refresh();
    // The change lands after the read under way took its snapshot: only a second read sees it.
    store.declare('late');
    const forced = catalog.refresh(true);
    const alsoForced = catalog.refresh(true);
    open();
    store.gate = null;
    await Promise.all([under, forced, alsoForced]);
    expect(catalog.known('late')).toBe(true);
    expect(store.reads).toBe(3);
  });
});
