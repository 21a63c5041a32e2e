-- What a job names is its own team's, whoever writes it: its trajectory, cluster and submission are of the
-- job's team, and its analysis is of the job's trajectory (a submission's trajectory is of its team too).
-- The ingest API checks the same and answers 422; these keep the platform's own SQL writers to it.
--
-- Each composite key replaces the single-column one it extends (one check per insert, not two). NOT VALID:
-- rows written before are not scanned (a large table would be locked for it, and one bad old row would
-- stop the migration); every row written from now on is checked. `alter table jobs validate constraint ...`
-- checks the old rows later, without blocking writers. The actions select by team anyway.

alter table trajectories add constraint trajectories_id_team unique (id, team_id);
alter table clusters add constraint clusters_id_team unique (id, team_id);
alter table submissions add constraint submissions_id_team unique (id, team_id);
alter table analyses add constraint analyses_id_trajectory unique (id, trajectory_id);

alter table jobs drop constraint jobs_trajectory_id_fkey,
    add constraint jobs_trajectory_team foreign key (trajectory_id, team_id)
        references trajectories (id, team_id) not valid;
alter table jobs drop constraint jobs_cluster_id_fkey,
    add constraint jobs_cluster_team foreign key (cluster_id, team_id) references clusters (id, team_id) not valid;
alter table jobs drop constraint jobs_submission_id_fkey,
    add constraint jobs_submission_team foreign key (submission_id, team_id)
        references submissions (id, team_id) not valid;
alter table jobs drop constraint jobs_analysis_id_fkey,
    add constraint jobs_analysis_trajectory foreign key (analysis_id, trajectory_id)
        references analyses (id, trajectory_id) not valid;

alter table submissions drop constraint submissions_trajectory_id_fkey,
    add constraint submissions_trajectory_team foreign key (trajectory_id, team_id)
        references trajectories (id, team_id) on delete cascade not valid;
