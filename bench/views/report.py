"""The run's record as markdown (views.md), and what in it fails the run: a wrong answer or page, a table scan at
the full size. Timing never does."""

from __future__ import annotations

from typing import Any

from .common import AFTER_READ_MS, FULL, JUDGED, STREAM_SETTLE, STREAM_TICK, TARGET_BROWSER_MS, TARGET_CARDS_MS


def _count_line(count: dict[str, Any] | None) -> list[str]:
    """The whole team's total as read now against `count(*)` of every row, same connection, taking turns."""
    if not count:
        return []
    return [
        f"The team's total ({count['rows']:,} rows), p50 of {count['repeat']}: {count['now_p50_ms']} ms as the windows"
        f" read it (counted to 100,001, then estimated) against {count['count_star_p50_ms']} ms for count(*)"
        f" (ratio {count['ratio']})."
    ]


def _total_cell(k: dict[str, Any]) -> str:
    """The exact count, and the answer's estimate beside it where the page said one."""
    answered = k.get("answered")
    if answered is None or answered == k["total"]:
        return f"{k['total']:,}"
    return f"{k['total']:,} (said about {answered:,})"


def _plan_cell(plan: dict[str, Any]) -> str:
    return ("**SEQ SCAN** " if plan["seq_scan"] else "") + plan["plan"]


def _scans(state: dict[str, Any], statement: str, groups: tuple[str, ...]) -> str:
    """The kinds whose `statement` scans the table, "every sort" standing for all of them."""
    plans = state["explain"]
    names = [name for name, p in plans.items() if p["group"] in groups and p[statement]["seq_scan"]]
    sorts = [name for name, p in plans.items() if p["group"] == "sort"]
    if sorts and set(sorts) <= set(names):
        names = [f"every sort ({len(sorts)})"] + [name for name in names if name not in sorts]
    return ", ".join(names) or "none"


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        "## `views`",
        "",
        f"`{record['command']}` at {record['commit']}, {record['date']}",
        "",
        f"{size['submissions']:,} submissions in one team ({size['projects']} projects, {size['users']} users),"
        f" {size['tasks']:,} tasks ({size['trajectory_jobs']:,} of them the jobs of {size['trajectories'] - 1:,}"
        f" trajectories, each trajectory's one submission, and {size['stream_tasks']:,} those streamed into below);"
        f" windows of {size['window']} rows over HTTP from one node, the kinds taking turns."
        f" Setup {record['setup_s']['total']} s (the relay done {record['setup_s']['relay_after_writes']} s after"
        f" the last write). This server's autovacuum: {record['autovacuum']}.",
    ]
    titles = {
        "analyzed": "as the relay wrote it, after ANALYZE",
        "vacuumed": "after VACUUM (ANALYZE), as autovacuum would leave it",
    }
    for name, state in record["states"].items():
        server = state["server"]
        samples = next(iter(server["kinds"].values()))["samples"]
        lines += [
            "",
            f"### The table {titles[name]}: {state['table']['pages']:,} pages,"
            f" {state['table']['all_visible_pages']:,} all-visible; {samples} requests per kind",
            "",
            "| query | kind | total | p50 ms | p95 ms | max ms | answers | count plan | page plan |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, k in record["kinds"].items():
            t, plan = server["kinds"][kind], state["explain"][kind]
            answers = "ok" if k["ok"] else f"WRONG ({len(k['wrong'])})"
            lines.append(
                f"| {kind} | {k['group']} | {_total_cell(k)} | {t['p50_ms']:.1f} | {t['p95_ms']:.1f} | {t['max_ms']:.1f}"
                f" | {answers} | {_plan_cell(plan['count'])} | {_plan_cell(plan['page'])} |"
            )
        lines += [
            "",
            f"p95 of every sort and filter: {server['sort_filter_p95_ms']} ms (target {server['target_ms']:.0f} ms:"
            f" {'met' if server['within_target'] else 'NOT met'}).",
            *_count_line(state.get("count")),
            "Sequential scans of submission_rows in a sort or filter: the count of "
            + _scans(state, "count", JUDGED)
            + "; the page of "
            + _scans(state, "page", JUDGED)
            + ". In a search or a deep offset (not judged): the count of "
            + _scans(state, "count", ("search", "offset"))
            + "; the page of "
            + _scans(state, "page", ("search", "offset"))
            + ".",
        ]
    if not record["seq_scan_enforced"]:
        lines += ["", f"The plans are not judged below {FULL:,} rows: a small table is rightly read whole."]
    browser = record["browser"]
    if "skipped" in browser:
        lines += ["", f"Browser: skipped ({browser['skipped']})."]
    else:
        lines += [
            "",
            f"### Browser (Chromium, {len(browser['loads'])} navigations, the table as written)",
            "",
            "| measure | first (cold) ms | p50 ms | max ms |",
            "|---|---|---|---|",
            f"| goto /submissions → first rows drawn | {browser['first_rows_cold_ms']:.0f} |"
            f" {browser['first_rows_p50_ms']:.0f} | {browser['first_rows_max_ms']:.0f} |",
            f"| click PRIORITY → first row changed | {browser['loads'][0]['sort_click_ms']:.0f} |"
            f" {browser['sort_click_p50_ms']:.0f} | {browser['sort_click_max_ms']:.0f} |",
            "",
            f"Target: first rows within {TARGET_BROWSER_MS:.0f} ms of navigation:"
            f" {'met' if browser['within_target'] else 'NOT met'}"
            + (f"; wrong: {'; '.join(browser['wrong'][:3])}" if browser["wrong"] else "")
            + ".",
        ]
    lines += dashboard_markdown(record)
    lines += streaming_markdown(record)
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def dashboard_markdown(record: dict[str, Any]) -> list[str]:
    size, dashboard = record["size"], record["dashboard"]
    first = next(iter(dashboard["http"].values()))
    lines = [
        "",
        f"### Dashboard and popover: {size['trajectories']:,} trajectories, {size['jobs']:,} jobs in the team",
        "",
        f"{size['trajectories'] - 1:,} trajectories of {size['jobs_per_trajectory']:,} jobs each"
        f" ({size['trajectory_jobs']:,} jobs, written in {record['setup_s']['trajectories_written']} s), beside the"
        " one holding the other submissions' tasks; the relay listed them all"
        f" {record['setup_s']['listed_after_writes']} s after the last write. Over HTTP from the node, the requests"
        f" taking turns: as written ({first['written']['samples']} each; submissions and trajectories never analyzed,"
        f" as with this server's autovacuum off), then after ANALYZE of both ({first['analyzed']['samples']} each):",
        "",
        "| request | total | rows | as written p50 ms | p95 ms | max ms | after ANALYZE p50 ms | p95 ms | max ms"
        " | answers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, x in dashboard["http"].items():
        query = "&".join(f"{k}={v}" for k, v in x["params"].items())
        answers = "ok" if x["ok"] else f"WRONG ({len(x['wrong'])})"
        w, a = x["written"], x["analyzed"]
        lines.append(
            f"| {name} (`{x['path'].removeprefix('/api/teams/{id}')}?{query}`) | {x['total']:,} | {x['rows']:,}"
            f" | {w['p50_ms']:.1f} | {w['p95_ms']:.1f} | {w['max_ms']:.1f}"
            f" | {a['p50_ms']:.1f} | {a['p95_ms']:.1f} | {a['max_ms']:.1f} | {answers} |"
        )
    lines += ["", "The cards' deepest page, EXPLAIN ANALYZE (the statement of gateway.store.people.trajectories):", ""]
    for state, label in (("written", "as written"), ("analyzed", "after ANALYZE")):
        e = dashboard["explain"][state]
        lines.append(f"- {label}: {e['execution_ms']} ms, {e['plan']}")
    browser = dashboard["browser"]
    if "skipped" in browser:
        return [*lines, "", f"Dashboard in the browser: skipped ({browser['skipped']})."]
    rows = (
        ("first_cards", "goto / → first cards drawn"),
        ("live", "goto / → the team channel live"),
        ("popover", "click the ring (once live) → the popover's count drawn"),
        ("search", f"type “{dashboard['search']}” into the cards' search → the count changed (250 ms pause included)"),
    )
    lines += [
        "",
        f"In Chromium, {len(browser['loads'])} navigations:",
        "",
        "| measure | first (cold) ms | p50 ms | max ms |",
        "|---|---|---|---|",
        *(
            f"| {label} | {_ms(browser[key]['cold_ms'])} | {_ms(browser[key]['p50_ms'])} | {_ms(browser[key]['max_ms'])} |"
            for key, label in rows
        ),
        "",
        f"Target: first cards within {TARGET_CARDS_MS:.0f} ms of navigation:"
        f" {'met' if browser['within_target'] else 'NOT met'}"
        + (f"; wrong: {'; '.join(browser['wrong'][:3])}" if browser["wrong"] else "")
        + ".",
    ]
    return lines


def streaming_markdown(record: dict[str, Any]) -> list[str]:
    streaming = record["streaming"]
    if "skipped" in streaming:
        return ["", f"Streaming into the open window: skipped ({streaming['skipped']})."]
    lines = [
        "",
        f"### Streaming into the open window: {streaming['rate']:,} task changes a second for {streaming['seconds']:g} s",
        "",
        f"`/submissions` open in Chromium, sorted by progress descending. {streaming['tasks']:,} tasks on the"
        f" {streaming['submissions']} newest submissions without tasks ({streaming['running']} running at any time),"
        f" flipped between running and completed, {streaming['batch']} every {STREAM_TICK * 1000:.0f} ms in one"
        " statement, so rows enter and leave the window. Long tasks are those the page's PerformanceObserver saw"
        f" from the first write until the relay had folded the last and at least {STREAM_SETTLE:g} s after it (the"
        " span observed); busy share: their sum over that span.",
        "",
        "| pointer | changes written (a second) | relay caught up after the last write | span observed s"
        f" | long tasks (within {AFTER_READ_MS} ms of a window read) | max ms | sum ms | busy share | longest ms | draws / frames"
        " | window reads | news shown"
        " | streamed rows in the window (before → after) | load average (1 min) | no task over 50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase in streaming["phases"]:
        t, w = phase["long_tasks"], phase["writes"]
        relay = "not within 60 s" if phase["relay_caught_up_s"] is None else f"{phase['relay_caught_up_s']} s"
        rows = phase["streamed_rows_in_window"]
        pointer = phase["pointer"] + ("" if phase["changes"] else " (baseline: no changes)")
        lines.append(
            f"| {pointer} | {w['changes']:,} ({w['per_second']:,}) | {relay} | {phase['observed_s']}"
            f" | {t['count']} ({t['after_window_read']}) | {t['max_ms']} | {t['sum_ms']} | {t['busy_share']:.1%}"
            f" | {', '.join(f'{d:g}' for d in t['longest_ms'][:5]) or '—'} | {phase['draws']} / {phase['frames']}"
            f" | {phase['window_reads']} | {phase['news'] or '—'} | {rows['before']} → {rows['after']}"
            f"{' (reordered)' if phase['window_rows_moved'] else ''}"
            f" | {phase['load_average'][0]} → {phase['load_average'][1]}"
            f" | {'met' if phase['within_target'] else 'NOT met'} |"
        )
    streamed = [p for p in streaming["phases"] if p["changes"]]
    worst = max((p["long_tasks"]["max_ms"] for p in streamed), default=0.0)
    lines += [
        "",
        f"Target, while changes stream: no main-thread task over {streaming['target_ms']:.0f} ms:"
        f" {'met' if all(p['within_target'] for p in streamed) else f'NOT met (the longest {worst} ms)'}"
        + (f"; wrong: {'; '.join(streaming['wrong'][:3])}" if streaming["wrong"] else "")
        + ". Reported, not judged: the run does not fail on it.",
    ]
    return lines


def failures(record: dict[str, Any]) -> list[str]:
    """What fails the run, whatever the machine's speed: a wrong answer or page, a table scan at FULL rows."""
    out = [f"{name}: {k['wrong'][0]}" for name, k in record["kinds"].items() if not k["ok"]]
    out += record["browser"].get("wrong", [])
    out += [f"{name}: {x['wrong'][0]}" for name, x in record["dashboard"].get("http", {}).items() if not x["ok"]]
    out += record["dashboard"]["browser"].get("wrong", [])
    out += record["streaming"].get("wrong", [])
    if not all(p["writes"]["changes"] for p in record["streaming"].get("phases", ()) if p["changes"]):
        out.append("a streaming phase wrote no task change")
    judged = record["states"]["analyzed"]["seq_scans"]["judged"]
    if record["seq_scan_enforced"] and judged:
        out.append(f"a sequential scan of submission_rows after ANALYZE in {len(judged)} sort/filter page(s)")
    return out
