-- 000019_reserved: a placeholder. Number 000019 belongs to the Activity page's migration, made
-- on another branch at the same time as 000020; this file only keeps the sequence whole on the
-- console branch and is replaced by that migration when the branches meet (it does nothing).
SELECT 1;
