-- The Submissions page's search by words (issue 51), as a search box reads them while a person types: every word
-- typed is a word of the title, the project or the user's name, the last one may be the beginning of one
-- (`copper gra` finds "Copper grain, shot 0417"; `shot 04` the shots 0400 to 0499), case aside; a search in
-- ASCII digits also finds that job id. A word is a run of letters and digits; anything else separates words.
--
-- Trigram indexes (sql/011) found a part of a text anywhere, but the titles' common parts and digits share most of
-- their trigrams: a search of ten shot numbers in a million rows went through posting lists of every row in three
-- indexes and was seconds long. A row's words in one GIN index (PostgreSQL's full-text search, built in: the
-- embedded server of `gateway demo` has it too) let the rarest word of a search lead: `0417` holds a row or two,
-- `shot` every row, and the index skips through the common ones.
--
-- The words are stored, so that a broad search (a lossy bitmap) rechecks a row by reading them rather than
-- deriving them again (the 'simple' configuration: lower case, no stemming, no stop words). Adding the column
-- rewrites the table once, locked meanwhile (as long as reading and writing it whole: minutes at a million rows).
alter table submission_rows add column words tsvector generated always as (
    to_tsvector('simple'::regconfig,
                regexp_replace(title || ' ' || project || ' ' || user_name, '[^[:alnum:]]+', ' ', 'g'))
) stored;

-- Without fastupdate each write puts its words in place at once (a row has ten or so): no pending list that every
-- search reads until autovacuum merges it, so a search right after a bulk load is as quick as later.
create index submission_rows_words on submission_rows using gin (words) with (fastupdate = off);

-- The trigram indexes served the search alone, and every relay upsert wrote all three.
drop index if exists submission_rows_title_trgm;
drop index if exists submission_rows_project_trgm;
drop index if exists submission_rows_user_trgm;
