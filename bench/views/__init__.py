"""The Submissions page and the dashboard at a farm's scale: windows of 100 rows over N, cards over 1,000 trajectories,
and the open page's main thread while task changes stream into its window.

    python -m bench.views [--submissions 100000] [--trajectories 1000] [--jobs-per-trajectory 20]
                          [--stream-seconds 10] [--rounds 3] [--repeat 20] [--quick] [--no-browser]

One team holds N submissions, written as the platform writes them (plain SQL, in batches: ~20 projects, several
users, priorities, titles, sizes and staging spread), and analysis tasks on some of them (mixed statuses, so
status, progress, tasks and average frame time vary); the relay saves every row into submission_rows. The same
team holds `--trajectories` trajectories of `--jobs-per-trajectory` jobs each (mixed statuses; the issue speaks of
2,000 jobs each, which the option allows), each trajectory's jobs one of the N submissions (its run: every job
belongs to a submission), and 10 tasks on each of the 200 newest submissions without any, which the streaming
phase changes. Measured:

- server: every sort key of SORT_COLUMNS in both directions, the filters (a rare and a common status, a project,
  a user, a filter with a sort), a search and a deep offset, each a window of 100 rows over HTTP from a running
  node, `--repeat` times a round, the kinds taking turns; p50 and p95 per kind and the p95 of every sort and
  filter together (the issue's target: 300 ms);
- EXPLAIN: the count and the page statement of each window, built by the store's own helpers, after ANALYZE;
  a Seq Scan of submission_rows in either is reported; in the page statement of a sort or filter it makes the
  run exit non-zero at the full size (100,000 rows and more). A count reads every matching row whatever the
  plan (with one team in the table, reading it whole is the planner's right choice until VACUUM marks its pages
  all-visible), and a search by substring and a deep offset are reported, not judged;
- browser: in Chromium, signed in as a member, from `page.goto('/submissions')` to the first window drawn (the
  pager reads "1–100 of N"), and a click on the PRIORITY header until the first row changes (target: 1 s);
- dashboard: over HTTP, p50 and p95 of the cards' pages (GET /api/teams/{id}/trajectories) and the popover's
  (.../trajectories/active): the first page, a search, a deep offset; in Chromium, from `page.goto('/')` to the
  first cards drawn (the count reads "100 of 1,001 trajectories"; target: 1 s), a click on the ring until the
  popover's count is drawn ("300 of 1,001"), and a search typed into the cards' box until the count changes
  (its 250 ms typing pause included);
- streaming: `/submissions` open sorted by progress descending, about 1,000 task changes a second (100 every
  100 ms, each flipping a task between running and completed, so rows enter and leave the window) for
  `--stream-seconds`, once with the pointer away from the table and once resting on a row, after as long a
  baseline without changes; every long task the page's PerformanceObserver saw from the first write until the
  page had the last (the relay caught up, and at least 1 s after the last write): count, max, sum, and their sum
  over that span (the main thread's share in long tasks), with the page's draws and animation frames, its window
  reads and the machine's load average. The issue's target: no task passes 50 ms. Reported, never judged.

Writes bench/results/views.json and views.md (with the commit and the date). Without Chromium the browser parts
are skipped and said so, unless GATEWAY_REQUIRE_BROWSER=1 makes that an error. Timing never fails the run; a
wrong answer, a wrong page or a page error does.
"""
