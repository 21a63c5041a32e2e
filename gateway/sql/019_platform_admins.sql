-- A platform administrator: a user whose token may call /api/admin/... (teams, users) and manage every team as its
-- owner would. `gateway user create NAME --platform-admin` sets it; an automation signs in with that user's token.
alter table users add column platform_admin boolean not null default false;
