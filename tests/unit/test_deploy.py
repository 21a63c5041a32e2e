"""deploy/: the Prometheus rules pass `promtool check rules` and their own `promtool test rules`; each alert
is tested firing and silent; the Grafana dashboard is one Grafana can import, every query on the chosen
Prometheus. (That each metric they name is exported: tests/integration/test_observability.py.)"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.deploy_files import DASHBOARD, RULE_TESTS, RULES, dashboard, metric_names, promtool, rules

ALERTS = {  # what operators must be told of (docs/operations.md, Observability)
    "GatewayRelayLagging",
    "GatewayNoActiveRelay",
    "GatewayRedisUnreachable",
    "GatewaySlowConsumersRising",
    "GatewayNodeAtConnectionLimit",
    "GatewayDeliveryLagging",
}


def _promtool(*args: str) -> None:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_pass_promtool_check() -> None:
    _promtool("check", "rules", str(RULES))


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    _promtool("test", "rules", str(RULE_TESTS))


def test_every_alert_is_tested_firing_and_silent() -> None:
    assert {rule["alert"] for rule in rules()} == ALERTS
    assert all(rule["labels"]["severity"] in ("warning", "critical") for rule in rules())
    evaluations = [
        check for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for check in test["alert_rule_test"]
    ]
    for alert in ALERTS:
        expected = [check["exp_alerts"] for check in evaluations if check["alertname"] == alert]
        assert [] in expected, f"{alert}: no evaluation where it stays silent"
        assert any(expected), f"{alert}: no evaluation where it fires"


def test_the_dashboard_queries_the_chosen_prometheus_in_panels_that_do_not_overlap() -> None:
    board = dashboard()
    assert board["uid"] == "jobs-gateway" and isinstance(board["schemaVersion"], int)
    (variable,) = board["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == ("datasource", "datasource", "prometheus")
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        assert panel["title"] and panel["description"] and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and metric_names(target["expr"]), target
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    titles = {p["title"] for p in panels}
    assert {"Connections", "Messages out", "Relay lag", "Slow consumers", "HTTP requests by status"} <= titles
    assert "Relay cycles" in titles and DASHBOARD.read_text().endswith("\n")


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("gateway_redis_up == 0", {"gateway_redis_up"}),
        (
            'histogram_quantile(0.99, sum by (le) (rate(gateway_publish_to_write_seconds_bucket{job="x"}[5m])))',
            {"gateway_publish_to_write_seconds_bucket"},
        ),
        (
            "process_open_fds / process_max_fds > 0.9 and on (job, instance) gateway_connections",
            {"process_open_fds", "process_max_fds", "gateway_connections"},
        ),
        ("sum without (instance) (rate(a_total[$__rate_interval] offset 1h)) > 1e3", {"a_total"}),
        ('count by (version) (gateway_build_info{commit!~"x{2}"})', {"gateway_build_info"}),
        ("max(x) by (partition) unless on (partition) group_left y", {"x", "y"}),
        ("rate(up_total[5m] @ 1700000000) / z @ end()", {"up_total", "z"}),
    ],
)
def test_the_metric_names_an_expression_selects(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names
