"""The cluster simulator: clusters that behave like real ones, talking to the gateway only as clusters do
(the ingest API and the Redis command channel). `gateway simulate` runs it; `gateway demo` too."""
