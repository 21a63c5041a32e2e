-- Revoked sessions (`gateway revoke`, sign-out): every node loads them at start and hears of new ones on the
-- control channel. A row matters only while a session it names could still be alive (GATEWAY_SESSION_MAX_AGE);
-- each new revocation deletes the rows older than that.
create table token_revocations (
    id bigserial primary key,
    user_id bigint,  -- every session of this user started at or before revoked_at
    token_id text,   -- or the one session this token id names
    revoked_at timestamptz not null default now(),
    check ((user_id is null) <> (token_id is null))
);
create index token_revocations_revoked_at on token_revocations (revoked_at);
