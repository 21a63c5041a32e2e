"""The cluster simulator: clusters that behave like real ones, talking to the gateway only as clusters do
(the ingest API and the command feed on /ws, with the gateway's URL and their keys only). `gateway simulate` runs it; `gateway demo` too."""
