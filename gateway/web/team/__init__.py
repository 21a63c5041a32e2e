"""What a team's members read and do: members and trajectories (api), jobs' actions, the Submissions page's windows,
actions and saved views, analyses, activity, instance types and the lifecycle diagram."""
