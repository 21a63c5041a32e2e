-- Who acted, on the rows a person sees ("Killed by Ada Lovelace at 20:16", "Removed by ... at ..."). Written with
-- the change it names, once the cluster confirmed it, in the same transaction; carried by the captured path with
-- the row itself (a submission's delta and its saved row, a removed job's last delta), so no window of 100,000
-- rows reads `activity` to say it. The name is the users table's at the time (the activity's `actor` too): a
-- person who left the team is still named; the page names a member by the users table's name of today.

-- A submission's last task action (kill, hold, unhold, retry, retry_failed, retry_preempted; null: none yet).
alter table submissions
    add column acted text,
    add column acted_by bigint references users (id) on delete set null,
    add column acted_by_name text,
    add column acted_at timestamptz;

-- Who removed a job (Remove Running Jobs, Delete analysis), by name; null: its cluster, or retention.
alter table jobs add column removed_by text;
