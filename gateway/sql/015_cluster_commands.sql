-- Commands to clusters, kept until confirmed or expired: a cluster reaches them through the gateway (its feed,
-- `cluster:<id>`), never through the bus. A command sent while the cluster's feed is down, or across a node
-- restart or a Redis failover, is in its feed's snapshot when it connects again; the cluster acts on an id once,
-- and a repeated confirmation changes nothing (gateway.store.commands).
create table cluster_commands (
    id             text not null,             -- one action's id: the same for every cluster it asks
    cluster_id     bigint not null references clusters (id) on delete cascade,
    seq            bigint not null,           -- the cluster's own count of commands: its feed's position
    action         text not null,
    jobs           bigint[] not null,         -- the tasks it concerns (`sync`: submissions)
    priority       integer,
    instance_type  text,
    reply_to       text not null,             -- where the waiting node hears the confirmation (a bus key)
    created_at     timestamptz not null default now(),
    expires_at     timestamptz not null,      -- not delivered after this (GATEWAY_COMMAND_EXPIRY)
    confirmed_at   timestamptz,
    confirmed_jobs bigint[],
    primary key (cluster_id, id)
);
create unique index cluster_commands_seq on cluster_commands (cluster_id, seq);
create index cluster_commands_pending on cluster_commands (cluster_id, seq) where confirmed_at is null;
create index cluster_commands_expires on cluster_commands (expires_at);
