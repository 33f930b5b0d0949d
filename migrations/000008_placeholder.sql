-- 000008_placeholder: stands in for another branch's 000008 so that this branch's 000009 is in
-- sequence (the loader refuses gaps). Drop this file when merging that branch's 000008.
SELECT 1;
