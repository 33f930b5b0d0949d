import { MemorySnapshotStore } from './memory-snapshots.js';
import { describeSnapshotStoreConformance } from './snapshot-store-conformance.js';

describeSnapshotStoreConformance('in-memory test double', async () => ({
  store: new MemorySnapshotStore(),
  kindPrefix: 'conformance-',
  close: async () => {},
}));
