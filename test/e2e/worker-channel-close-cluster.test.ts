import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { CLOSES, creditOnly, midResult, pushedNoResult, type CloseTestNodes } from '../support/channel-close.js';
import { startCluster, type ProcessCluster } from '../support/cluster.js';

/**
 * The channel strands nothing (issue 27, item 1) across three node processes: the closing
 * worker's socket on n1, the second worker's on n2, tasks submitted and read through n3. What
 * n1 hands back goes through the shared ready queues and reaches n2's socket within a second.
 */
describe('a worker socket that closes strands nothing, across three nodes', () => {
  let cluster: ProcessCluster;
  const n: CloseTestNodes = { closing: '', other: '', api: '', opened: [] };
  beforeAll(async () => {
    // Leases of a minute and a safety net of a minute: nothing but the hand-back can move a
    // task within the test's second.
    cluster = await startCluster({
      label: 'chanclose',
      partitions: 8,
      extraArgs: ['--safety-net-grace-seconds', '60'],
    });
    n.closing = cluster.node('n1').url;
    n.other = cluster.node('n2').url;
    n.api = cluster.node('n3').url;
  }, 60_000);
  afterEach(() => {
    for (const w of n.opened.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await cluster?.close();
  });

  for (const how of CLOSES) {
    it(`claims nothing for a socket closed (${how}) with credit and nothing pushed`, () => creditOnly(n, how));
    it(`hands back at once the tasks pushed to a socket closed (${how}) with no result`, () => pushedNoResult(n, how));
    it(`records the result sent before a close (${how}) and hands back the rest`, () => midResult(n, how));
  }
});
