-- 000014_limits_index_no_pending_list: a limit key's live tasks are found through the GIN index
-- itself, not a scan of its pending list (docs/decisions/0024-distinct-limit-keys.md).
--
-- With GIN's default `fastupdate`, new entries of `tasks_live_limits_idx` wait in an unsorted
-- pending list (up to `gin_pending_list_limit`, 4 MB) until a vacuum or an overflow merges
-- them, and every lookup scans that whole list. Tasks submitted for 20 000 keys of a family
-- are all in it when their keys' actors activate and read their live tasks: each key's lookup
-- scanned 20 000 entries (3.2 s for a batch of 1 000 keys; 14 ms once merged), which held
-- distinct keys to about 300 a second. Without the list, an insert updates the index at once:
-- one entry per name a task takes part in (20 000 inserts took 290 ms either way).

ALTER INDEX tasks_live_limits_idx SET (fastupdate = off);

-- Turning it off leaves the entries already pending in the list: merge them now.
SELECT gin_clean_pending_list('tasks_live_limits_idx'::regclass);
