-- 000015_cluster_redis_reachable: whether each node reaches Redis (issue 29, network partitions).
--
-- A node cut off from Redis alone still heartbeats (Postgres answers), so the live set kept it
-- and the ring kept its wheel partitions on it: nothing it owned fired until the cut healed.
-- Now each heartbeat also says whether the node's Redis answered lately, and the ring is built
-- from the live nodes that reach Redis — unless none does (Redis down for everyone: moving
-- partitions would gain nothing, and a ring of no nodes would refuse submissions that Postgres
-- can still take). A node that cannot reach Redis therefore hands its partitions over within a
-- failure timeout and a beat, and takes them back when it reaches Redis again
-- (src/runtime/membership.ts, `ringMembers`; decision 0029).
--
-- A column with a constant default: adding it rewrites nothing, and the heartbeat that writes
-- it changes no indexed column (still a HOT update).

ALTER TABLE cluster_nodes ADD COLUMN redis_reachable boolean NOT NULL DEFAULT true;
