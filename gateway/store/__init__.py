"""asyncpg adapters: the pool, migrations, the outbox reader and the queries the gateway needs."""
