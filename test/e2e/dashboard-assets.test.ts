/**
 * The dashboard's files through a real node (review N9): the node lists the built folder once
 * as it starts, and a name it did not find there is a 404 that keeps nothing — anyone may ask,
 * without a key, for any name the route's pattern allows, and a cache of misses grew by every
 * name asked for. Watched through what the node's dashboard cache holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardFilesCached } from '../../src/http/dashboard-routes.js';
import { api, startTestNode, type TestCluster } from '../support/nodes.js';

const ADMIN = 'the-admin-key-of-the-assets-test';

describe('the dashboard files of a node', () => {
  let t: TestCluster;
  beforeAll(async () => {
    t = await startTestNode('embedded', { adminToken: ADMIN });
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('keeps the files it serves, and nothing of the names it does not have', async () => {
    // Under vitest the node serves src/dashboard/, whose style sheets are the files of this shape.
    const css = await api<string>(t.url, 'GET', '/admin/assets/dashboard.css');
    expect(css.status).toBe(200);
    expect((await api(t.url, 'GET', '/admin')).status).toBe(200);
    const held = dashboardFilesCached();
    expect(held).toBe(2);

    for (let i = 0; i < 300; i++) {
      const missing = await api<{ error: { code: string } }>(t.url, 'GET', `/admin/assets/missing-${i}.js`);
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('not_found');
    }
    expect(dashboardFilesCached()).toBe(held);
    // And the files it has are still served, from what it keeps.
    expect((await api(t.url, 'GET', '/admin/assets/dashboard.css')).body).toBe(css.body);
    expect(dashboardFilesCached()).toBe(held);
  });
});
