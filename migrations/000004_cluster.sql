-- 000004_cluster: cluster membership.
--
-- One row per node that ever joined (DESIGN.md "Nodes and the cluster"). A node upserts its
-- row on start (`live`, a new started_at), bumps heartbeat_at every heartbeat (1 s by
-- default), and marks it `left` on a graceful shutdown. A node is in the live set while its
-- state is `live` and its heartbeat is younger than the failure timeout (5 s by default);
-- every node reads the same live set and builds the same ring from it.
--
-- States and their legal transitions (src/store/sql/cluster.ts writes them):
--   live    → left     leave: a graceful shutdown, out at once without waiting for the timeout
--   leaving → left     leave
--   any     → live     join: a node restarted under the same id comes back with a new started_at
-- `leaving` is reserved for draining before a graceful exit (out of the ring, still
-- heartbeating); nothing writes it yet, and a `leaving` node is not in the live set.
-- A crashed node's row stays `live`; it drops out of the live set when its heartbeat ages past
-- the timeout, which is a reading-time judgement, not a write.
--
-- Clock: unlike every other table (see 000001_init), started_at and heartbeat_at are written
-- with the DATABASE clock (now()), and liveness is judged against the database clock too.
-- Liveness compares one node's heartbeat with another node's idea of "now". With application
-- clocks those are two machines' clocks: a skew of s seconds shortens or lengthens the
-- failure timeout by s as seen from each reader, and two readers whose clocks disagree put a
-- node whose heartbeat sits near the cut-off on different sides of it, so they build
-- different rings. With the database's clock on both sides of the comparison there is one
-- clock and no skew: the failure timeout means the same to every node, and the only
-- disagreement left is the unavoidable one of reading at different instants. The price is
-- that FakeClock cannot age a heartbeat; membership tests wait in real time with small
-- timeouts instead. Times are truncated to whole milliseconds, like the rest of the schema.

CREATE TABLE cluster_nodes (
  id           text        PRIMARY KEY,
  -- Where other nodes reach this one (the transport's base URL).
  address      text        NOT NULL,
  started_at   timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  state        text        NOT NULL CHECK (state IN ('live', 'leaving', 'left'))
);

-- No index besides the primary key, on purpose. The table holds one row per node (dozens at
-- most, until an operator prunes rows of nodes long gone), so reading the live set is a scan
-- of one or two pages, cheaper than any index walk. And an index on heartbeat_at would be
-- written by every heartbeat of every node, every second; without one, a heartbeat changes
-- no indexed column and is a HOT update.
