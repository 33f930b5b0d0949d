-- 000019_cluster_store_gap: a Postgres outage is not the death of every node (issue 29).
--
-- Liveness is a heartbeat younger than the failure timeout, judged on the database's clock. A
-- Postgres that is out for longer than that (a primary failing over takes 10-13 s) stops every
-- node's heartbeat at once, and when it is back every node was found stale: each was "declared
-- out", rejoined and dropped all its actors — the whole cluster re-formed after every failover
-- (nemesis run A, 2026-12-05). A heartbeat that finds no live node fresh knows the store itself
-- was away, stamps `store_resumed_at` and `last_beat_before` (the last heartbeat before the
-- outage), and for one failure timeout after it the nodes that were live when the store went
-- away (a heartbeat within a failure timeout of that last one) count as live however old their
-- heartbeat: those that are alive beat again within it, and only those that are not are then
-- out (src/store/sql/cluster.ts).

CREATE TABLE cluster_store (
  id               smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  store_resumed_at timestamptz NOT NULL DEFAULT '-infinity',
  last_beat_before timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO cluster_store (id) VALUES (1);
