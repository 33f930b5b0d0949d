-- 000010_running_lease_idx: the safety net finds expired leases by the expiry itself.
--
-- The net's look at leases (src/store/sql/claim.ts, EXPIRED_LEASES; every 5 s) asked the
-- partial index (partition) WHERE status = 'running' for the running tasks of its partitions
-- and filtered them by `lease_expires_at`. Running tasks are few, but every claim leaves an
-- entry in that index for the row version it replaced, and the entry stays until VACUUM: at
-- 2 000 claims a second with a VACUUM a minute, a pass read 83 164 entries and 11 900 heap pages
-- to find 13 running tasks (a bitmap scan, which never marks an entry dead for the next one):
-- 214 ms a pass on average, up to 454 ms, holding a connection of the submissions' pool
-- (`npm run soak`, pg_stat_statements; docs/decisions/0020-expired-leases-index.md).
--
-- With the expiry in the key, a pass reads only the entries whose lease ran out: the versions
-- a claim left behind carry the lease of a claim that is seconds old, in the future.
--
-- The cost: a heartbeat now changes an indexed column, so it is no longer a HOT update (see
-- the fillfactor note in 000001_init): it writes an entry here and in the primary key. A
-- heartbeat comes every third of a task's timeout; a claim and a completion write as many.
CREATE INDEX tasks_running_lease_idx ON tasks (partition, lease_expires_at) WHERE status = 'running';

-- Its partition prefix serves what the old index did (the running tasks of a partition).
DROP INDEX tasks_running_idx;
