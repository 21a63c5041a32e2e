-- When a trajectory's wave was closed (its finish published). A wave the next relay opens at takeover, for work
-- no relay saw start, reads what its jobs did since then: a job that failed before the takeover makes its notice
-- say "with errors". Null for waves closed before this column was added.
alter table trajectory_waves add column closed_at timestamptz;
