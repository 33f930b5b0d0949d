-- 000005_lease_tokens: lease tokens that cannot be guessed.
--
-- A lease token used to be the task's version (`lt1.<version>`), so anyone who could reach the
-- worker routes could heartbeat, complete or fail any running task. A claim now hands the
-- worker 128 random bits (src/domain/lease-token.ts) and keeps only their SHA-256 digest here,
-- written by the same statement that writes the attempt (attempts + 1) and the worker id, so
-- the digest belongs to that attempt of that task, claimed by that worker. Heartbeats and
-- results must present a token whose digest equals it. Every end of the attempt (a result,
-- an expiry, a hand-back) sets it back to NULL; NULL matches no token.
--
-- No index: a token is always checked on a row found by its id, never looked up by itself.
-- Adding a nullable column without a default rewrites nothing. A heartbeat does not change it,
-- so it stays a HOT update.
--
-- Tasks running when this is applied have no digest: the `lt1.` tokens their workers hold are
-- refused (409 `lease_not_held`), and those attempts end by lease expiry and are retried.

ALTER TABLE tasks ADD COLUMN lease_token_hash bytea;
