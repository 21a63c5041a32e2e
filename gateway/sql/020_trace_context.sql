-- The trace a change belongs to (a W3C traceparent), for the relay's publish span to link to
-- (gateway.tracing). The ingest API sets `gateway.trace_context` for its transaction only when tracing is on;
-- every other writer (the platform's SQL, psql) sets nothing and its rows carry null, as do all rows when
-- tracing is off. A default, not the triggers: every capture trigger fills it without being rewritten.
alter table job_changes
    add column trace_context text default nullif(current_setting('gateway.trace_context', true), '');
