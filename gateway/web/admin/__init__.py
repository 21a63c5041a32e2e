"""Managing people and clusters: a team's owners and admins (team_admin), and a platform's administrators over every
team (platform_admin)."""
