-- Wake only the relay of the partition a statement's rows belong to, on a channel of its own
-- (job_changes_<partition>): with every relay woken by every commit, P sleeping partitions made P reads per
-- commit, all but one of them empty, and PostgreSQL sent each NOTIFY to P listeners. Each relay writes the
-- partition count it runs with beside its flag, so that writers compute its teams as it does.
alter table relay_wakeup add column partitions integer not null default 1;

-- Wake the sleeping relays of the partitions these teams belong to.
create function wake_relays(teams bigint[]) returns void language plpgsql as $$
begin
    perform pg_notify('job_changes_' || w.partition, '') from relay_wakeup w
    where w.sleeping and exists (select 1 from unnest(teams) t where t % w.partitions = w.partition);
end $$;

create or replace function jobs_capture() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select n.team_id, n.trajectory_id, n.id, null,
               case when n.removed_at is null then n.status end, to_jsonb(n)
        from new_rows n;
    elsif tg_op = 'UPDATE' then
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select n.team_id, n.trajectory_id, n.id,
               case when o.removed_at is null then o.status end,
               case when n.removed_at is null then n.status end, to_jsonb(n)
        from new_rows n join old_rows o using (id);
    else
        insert into job_changes (team_id, trajectory_id, job_id, old_status, new_status, job)
        select o.team_id, o.trajectory_id, o.id, case when o.removed_at is null then o.status end, null,
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

create or replace function submissions_capture() returns trigger language plpgsql as $$
begin
    insert into job_changes (entity, team_id, trajectory_id, job_id, old_status, new_status, job)
    select 'submission', n.team_id, n.trajectory_id, n.id, null, null, to_jsonb(n) from new_rows n;
    if exists (select 1 from relay_wakeup where sleeping) then
        perform wake_relays(array(select n.team_id::bigint from new_rows n));
    end if;
    return null;
end $$;

create or replace function memberships_capture() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        insert into job_changes (entity, team_id, job_id, job)
        select 'membership', o.team_id, o.user_id,
               jsonb_build_object('team_id', o.team_id, 'user_id', o.user_id, 'member', false)
        from old_rows o;
        if exists (select 1 from relay_wakeup where sleeping) then
            perform wake_relays(array(select o.team_id::bigint from old_rows o));
        end if;
    else
        insert into job_changes (entity, team_id, job_id, job)
        select 'membership', n.team_id, n.user_id,
               jsonb_build_object('team_id', n.team_id, 'user_id', n.user_id, 'member', true)
        from new_rows n;
        if exists (select 1 from relay_wakeup where sleeping) then
            perform wake_relays(array(select n.team_id::bigint from new_rows n));
        end if;
    end if;
    return null;
end $$;
