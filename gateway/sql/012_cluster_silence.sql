-- A cluster that stops reporting: once it has sent nothing (no job report, no metrics) for a while, its queued,
-- retrying and running jobs are listed as `silent` (they keep their stored status), and they come back to it
-- when the cluster reports again. The listed status is what the outbox carries, so every count, summary and
-- panel sees it through the captured path, whoever marks or clears a silence.

-- When a request of the cluster was last taken (written by the nodes, at most every few seconds each; null: it
-- never sent one, its jobs are written by the platform's own SQL, and its silence cannot be known), and since
-- when it is silent (set by the relay's sweep: gateway.store.clusters.mark_silent).
alter table clusters add column heard_at timestamptz;
alter table clusters add column silent_since timestamptz;
-- The cluster's silence, on each job that was unfinished when it began (null: its cluster reports).
alter table jobs add column silent_since timestamptz;
create index jobs_cluster_unfinished on jobs (cluster_id)
    where removed_at is null and status in ('queued', 'retrying', 'running');

-- The status a job is listed and counted with (gateway.core.status.SILENT).
create function job_listed_status(status text, silent_since timestamptz) returns text
language sql immutable parallel safe as $$
    select case when silent_since is not null and status in ('queued', 'retrying', 'running')
                then 'silent' else status end
$$;

create or replace function jobs_capture() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select n.team_id, n.trajectory_id, n.id, null,
               case when n.removed_at is null then job_listed_status(n.status, n.silent_since) end, to_jsonb(n)
        from new_rows n;
    elsif tg_op = 'UPDATE' then
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select n.team_id, n.trajectory_id, n.id,
               case when o.removed_at is null then job_listed_status(o.status, o.silent_since) end,
               case when n.removed_at is null then job_listed_status(n.status, n.silent_since) end, to_jsonb(n)
        from new_rows n join old_rows o using (id);
    else
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select o.team_id, o.trajectory_id, o.id,
               case when o.removed_at is null then job_listed_status(o.status, o.silent_since) end, null,
               to_jsonb(o) || jsonb_build_object('removed_at', statement_timestamp(), 'version', o.version + 1)
        from old_rows o;
    end if;
    -- Wake a partition's relay only while it sleeps: NOTIFY takes a global lock at commit that halves the
    -- commit rate of concurrent writers (bench/notify_cost.py), so a busy relay polls instead. One wake-up per
    -- statement and partition: identical notifications in a transaction fold into one.
    if exists (select 1 from relay_wakeup where sleeping) then
        if tg_op = 'DELETE' then
            perform wake_relays(array(select o.team_id::bigint from old_rows o));
        else
            perform wake_relays(array(select n.team_id::bigint from new_rows n));
        end if;
    end if;
    return null;
end $$;
