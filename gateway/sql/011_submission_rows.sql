-- The Submissions page at a farm's scale: the server windows, sorts, filters and counts the rows.
--
-- A submission's status, tasks, progress and average frame time are derived from its tasks by the relay (the
-- one place that folds every change, gateway.core.submission). The relay writes each row it is about to
-- publish here first (gateway.store.submission_rows), so a window read after a row's delta arrived is never
-- older than that delta. `row` is the row exactly as the team channel sends it (JSON), served without decoding.
-- Nothing writes here but the relay; losing it costs nothing: a relay's next start writes every row again.
create table submission_rows (
    id          bigint primary key references submissions (id) on delete cascade,
    team_id     bigint not null,
    user_id     bigint,
    user_name   text not null default '',
    status      text not null,
    project     text not null,
    title       text not null,
    priority    integer not null,
    cores       integer not null,
    memory_gb   integer not null,
    preemptible boolean not null,
    progress    real not null,  -- completed tasks / tasks (0 with no tasks)
    tasks       integer not null,
    avg_frame   real,
    created_at  timestamptz,
    row         text not null
);

-- One index per sortable column, each ending in the id that breaks ties: any sort of any team's rows is an
-- index scan, never a sort of the whole table.
create index submission_rows_id on submission_rows (team_id, id);
create index submission_rows_user on submission_rows (team_id, user_name, id);
create index submission_rows_user_id on submission_rows (team_id, user_id, id);  -- the User filter
create index submission_rows_status on submission_rows (team_id, status, id);
create index submission_rows_project on submission_rows (team_id, project, id);
create index submission_rows_title on submission_rows (team_id, title, id);
create index submission_rows_priority on submission_rows (team_id, priority, id);
create index submission_rows_cores on submission_rows (team_id, cores, id);
create index submission_rows_memory on submission_rows (team_id, memory_gb, id);
create index submission_rows_preemptible on submission_rows (team_id, preemptible, id);
create index submission_rows_progress on submission_rows (team_id, progress, id);
create index submission_rows_tasks on submission_rows (team_id, tasks, id);
create index submission_rows_avg_frame on submission_rows (team_id, avg_frame, id);
create index submission_rows_created on submission_rows (team_id, created_at, id);

-- The dashboard's cards: a team's trajectories newest first, in pages, however many it holds.
create index trajectories_team_created on trajectories (team_id, created_at, id);
-- A card says when its trajectory's upload is still on its way (few are at any time).
create index submissions_staging on submissions (trajectory_id, created_at) where staging <> 'ready';

-- The search box (a part of a title, project or user's name) reads trigram indexes where the server has pg_trgm
-- (PostgreSQL's contrib, in most installs and managed services; the embedded server of `gateway demo` has none,
-- and its searches read the team's rows instead, as they do without the right to create the extension).
do $$
begin
    if exists (select 1 from pg_available_extensions where name = 'pg_trgm') then
        create extension if not exists pg_trgm;
        create index submission_rows_title_trgm on submission_rows using gin (title gin_trgm_ops);
        create index submission_rows_project_trgm on submission_rows using gin (project gin_trgm_ops);
        create index submission_rows_user_trgm on submission_rows using gin (user_name gin_trgm_ops);
    end if;
exception when insufficient_privilege then
    raise notice 'pg_trgm could not be created: searches read the rows';
end $$;
