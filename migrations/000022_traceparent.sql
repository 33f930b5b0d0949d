-- 000022_traceparent: a task's place in a distributed trace (issue 32; docs/decisions/0038-tracing.md).
--
-- The W3C `traceparent` (`00-<trace id>-<span id>-<flags>`) a task is traced under: the context
-- of its submit span when the node traces, else the one the submission came with. Every later
-- hop (the wheel's fire, the claim, the result, a dependent's release) starts its span with it as
-- the remote parent, and the worker is handed it with each task. A cron schedule's instances copy
-- their schedule's. NULL for a task submitted without one on a node that does not trace (almost
-- all of them without tracing): the column costs them nothing.
ALTER TABLE tasks ADD COLUMN traceparent text;
