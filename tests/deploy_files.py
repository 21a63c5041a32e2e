"""What ships under deploy/ for operators: the Prometheus rules, their promtool tests, the Grafana dashboard, and
the metric names their PromQL reads (each must be one a node or relay exports: tests/integration/
test_observability.py checks them against live expositions)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
RULES = DEPLOY / "prometheus" / "gateway.rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "gateway.rules.test.yml"
DASHBOARD = DEPLOY / "grafana" / "gateway.json"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_VARIABLES = re.compile(r"\$\{?\w+\}?")  # Grafana's ($__rate_interval, ${datasource})
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_MODIFIERS = re.compile(r"(?:\boffset\s+-?|@\s*)[\w.()]+")  # `offset 1h`, `@ 1700000000`, `@ end()`
_NUMBERS = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
_KEYWORDS |= {"inf", "nan"}


def promtool() -> str:
    """promtool's path; skips the test where it is missing, unless GATEWAY_REQUIRE_PROMTOOL=1 (CI) fails it."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("GATEWAY_REQUIRE_PROMTOOL") == "1":
            pytest.fail("GATEWAY_REQUIRE_PROMTOOL=1 but promtool is not installed (Debian: the prometheus package)")
        pytest.skip("promtool is not installed")
    return found


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def expressions() -> list[str]:
    """Every PromQL expression deploy/ ships: the rules' and the dashboard's panels'."""
    exprs = [str(rule["expr"]) for rule in rules()]
    exprs += [target["expr"] for panel in dashboard()["panels"] for target in panel["targets"]]
    return exprs


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are no function, keyword, label or number."""
    text = _STRINGS.sub('""', expr)
    text = _VARIABLES.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _MODIFIERS.sub(" ", text)
    text = _NUMBERS.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() not in _KEYWORDS:
            names.add(match.group())
    return names


def shipped_metric_names() -> set[str]:
    return {name for expr in expressions() for name in metric_names(expr)}
