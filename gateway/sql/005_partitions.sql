-- Relays partition the teams: each partition's relay says for itself whether it sleeps (writers NOTIFY
-- while any does). Partition 0 keeps the row that was the only one.
alter table relay_wakeup drop constraint relay_wakeup_id_check;
alter table relay_wakeup rename column id to partition;
