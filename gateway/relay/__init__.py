"""The relay process: outbox -> aggregates -> channel batches -> bus."""
