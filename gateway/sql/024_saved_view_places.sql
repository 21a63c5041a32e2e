-- The order a person keeps the saved views they see in a team (the Submissions page's View list and Manage views):
-- their own and the shared ones alike, each person their own order. A view with no place here follows those with
-- one, by name; a view deleted takes its places with it.
create table saved_view_places (
    user_id bigint not null references users (id) on delete cascade,
    view_id bigint not null references saved_views (id) on delete cascade,
    place   integer not null,
    primary key (user_id, view_id)
);
