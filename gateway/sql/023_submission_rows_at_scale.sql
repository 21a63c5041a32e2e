-- A team of a million submissions (issue 51): the relay keeps only the submissions it needs in memory, and the
-- windows that filter stay index reads at any size.
--
-- What the relay needs to go on folding a submission it set aside, beside the saved row (which holds the record and
-- the task counts): the running totals of its completed tasks' times and its tasks' last change, written with the
-- row (gateway.store.submission_rows.save). A row saved before this migration has them null: the relay's next
-- start writes it again (it counts as not saved), after which it may be set aside too.
alter table submission_rows
    add column time_sum double precision,
    add column time_n integer,
    add column last_change timestamptz;

-- A filter with the page's default order (newest first): at a million rows, a rare status, a project or a user read
-- in order from their own rows, never by walking every row of the team newest first until 100 match.
create index submission_rows_status_created on submission_rows (team_id, status, created_at, id);
create index submission_rows_project_created on submission_rows (team_id, project, created_at, id);
create index submission_rows_user_created on submission_rows (team_id, user_id, created_at, id);
