"""What a cluster calls: ingest (its reports), noting that it was heard from, and what it may create."""
