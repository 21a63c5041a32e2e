"""asyncpg adapters: every SQL statement the gateway runs, behind named functions with typed results (the pool,
migrations, the outbox reader, the web API's, the control path's and the demo seed's queries)."""
