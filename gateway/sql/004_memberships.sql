-- Membership changes go through the outbox too: a member removed from a team loses its live subscriptions
-- at once, on every node.
create function memberships_capture() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        insert into job_changes (entity, team_id, job_id, job)
        select 'membership', o.team_id, o.user_id,
               jsonb_build_object('team_id', o.team_id, 'user_id', o.user_id, 'member', false)
        from old_rows o;
    else
        insert into job_changes (entity, team_id, job_id, job)
        select 'membership', n.team_id, n.user_id,
               jsonb_build_object('team_id', n.team_id, 'user_id', n.user_id, 'member', true)
        from new_rows n;
    end if;
    if exists (select 1 from relay_wakeup where sleeping) then
        perform pg_notify('job_changes', '');
    end if;
    return null;
end $$;

create trigger memberships_capture_insert after insert on memberships
    referencing new table as new_rows for each statement execute function memberships_capture();
create trigger memberships_capture_delete after delete on memberships
    referencing old table as old_rows for each statement execute function memberships_capture();
