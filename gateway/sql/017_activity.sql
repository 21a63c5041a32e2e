-- Who did what: every action on jobs and submissions, every membership change and key rotation, one row each.
-- `user_id` is null for the command line or an automation (`actor` then says which); the row stays when the user
-- goes, named by `actor`. Pruned after GATEWAY_ACTIVITY_DAYS by the relay's maintenance.
create table activity (
    id bigserial primary key,
    team_id bigint not null references teams (id) on delete cascade,
    user_id bigint references users (id) on delete set null,
    actor text not null,
    action text not null,
    count integer not null default 0,
    clusters text[] not null default '{}',
    scope text not null default '',
    at timestamptz not null default now()
);

create index activity_team_at on activity (team_id, at desc, id desc);
create index activity_at on activity (at);
