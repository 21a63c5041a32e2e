-- Each relay reads only its partition's outbox rows, in commit-safe order, through an index on
-- (team_id % P, xid, seq) for the configured P partitions (gateway.store.outbox.partition_index builds the one
-- for another P and drops the others). With one partition, team_id % 1 is 0: the same order as (xid, seq).
create index job_changes_team_mod_1 on job_changes ((team_id % 1), xid, seq);
drop index job_changes_xid;
