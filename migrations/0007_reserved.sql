-- Reserved: migration 7 belongs to another branch (triggers on class
-- tables). This placeholder keeps the numbers without gaps on the branch
-- that added migration 8; the other branch's 0007 replaces it at merge.
SELECT 1;
