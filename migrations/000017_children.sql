-- 000017_children: children of a running task (issue 30; docs/api.md, "Children of a running task").
--
-- A worker holding a task's lease may add tasks to it (`POST /api/tasks/{id}/children`, the
-- channel's `spawn` frame). Each child is an ordinary task whose `parent_id` names the task that
-- spawned it; `child_key`, when given, names it within its parent, so that a spawn repeated by a
-- retried attempt answers the child made the first time instead of making a second.
--
-- No foreign key: retention and `delete` operations remove finished tasks one by one, and a
-- parent may go before its children (or they before it) without the delete having to look.
ALTER TABLE tasks ADD COLUMN parent_id uuid;
ALTER TABLE tasks ADD COLUMN child_key text;

-- One child per key within a parent. The spawn transaction locks the parent row first, so two
-- spawns of the same parent never race on a key; the index is what makes it so whatever a
-- caller does.
CREATE UNIQUE INDEX tasks_parent_child_key_idx ON tasks (parent_id, child_key)
  WHERE parent_id IS NOT NULL AND child_key IS NOT NULL;

-- A parent's children by id: `GET /api/tasks/{id}/children` pages through it, and an operation
-- filtered on `parent_id` walks it instead of the whole table. Partial: almost no task has a parent.
CREATE INDEX tasks_parent_idx ON tasks (parent_id, id) WHERE parent_id IS NOT NULL;
