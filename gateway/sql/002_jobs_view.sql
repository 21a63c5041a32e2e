-- What the Jobs view knows: frame groups are looked up by trajectory and frame, finishes are remembered
-- across relay takeovers, and jobs past retention leave the lists (their rows stay as tombstones).

create index jobs_trajectory_frame on jobs (trajectory_id, frame) where removed_at is null;
create index jobs_retention on jobs (updated_at) where removed_at is null;

-- One row per trajectory that has had work: its latest wave of work and whether it is still open. A relay
-- that takes over finishes the open waves the previous one could not, and never repeats a closed one.
create table trajectory_waves (
    trajectory_id bigint primary key references trajectories (id) on delete cascade,
    wave          integer not null,
    open          boolean not null,
    started_at    timestamptz not null
);
