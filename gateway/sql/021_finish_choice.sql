-- Which finishes reach a person as a toast and a browser notification, chosen in Account and kept here so that it
-- follows them to another browser: their own (the default), every finish of their team's, or none.
alter table users add column finishes text not null default 'mine' check (finishes in ('mine', 'team', 'none'));
