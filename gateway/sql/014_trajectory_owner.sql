-- A trajectory moved to another team (`update trajectories set team_id = ...`, by the platform: the jobs'
-- composite keys hold any trajectory with jobs in its team) is announced to every node, as membership changes
-- are: the old team's subscriptions to it end, and no node keeps answering from the team it had cached.
create function trajectories_owner_capture() returns trigger language plpgsql as $$
begin
    insert into job_changes (entity, team_id, trajectory_id, job_id, job)
    select 'ownership', o.team_id, n.id, n.id,
           jsonb_build_object('channel', 'trajectory:' || n.id, 'team_id', n.team_id, 'previous_team_id', o.team_id)
    from new_rows n join old_rows o using (id)
    where n.team_id <> o.team_id;
    if found and exists (select 1 from relay_wakeup where sleeping) then
        perform wake_relays(array(select o.team_id::bigint from old_rows o));
    end if;
    return null;
end $$;

create trigger trajectories_owner_capture after update on trajectories
    referencing old table as old_rows new table as new_rows for each statement
    execute function trajectories_owner_capture();
