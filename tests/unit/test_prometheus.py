"""The chart's dashboard and alerts as users run them: the real Prometheus (Debian's
`prometheus` package: /usr/bin/prometheus and /usr/bin/promtool) scraping the controller.

- Every query of files/dashboard.json and every alert of the PrometheusRule is evaluated
  by Prometheus' HTTP API against a controller running on a simulated DRA cluster.
- `promtool check rules` on the rules rendered from the chart, `promtool test rules` unit
  tests of each alert firing and staying quiet, `promtool check metrics` on a scrape.
- The `namespace` label of LLMKube's gauges on each scrape path: kept with
  honor_labels (the chart's ServiceMonitor), renamed `exported_namespace` by a plain pod
  annotation job, and put back by the metric_relabel_configs the docs give.

Skipped, saying so, when the binaries are missing (.ci/run installs them).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_prometheus.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from objtypes import Obj
from tests.support.chart import NAMESPACE
from tests.support.prometheus import POD, PROMTOOL, alert_rules, chart_rules, promtool

pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus; .ci/run does)"
)


@pytest.mark.parametrize("values", [{}, {"replicas": 3}], ids=["one-replica", "three-replicas"])
async def test_promtool_checks_the_rules_rendered_from_the_chart(
    values: Obj, tmp_path: Path
) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(chart_rules(values)))
    code, out = await promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert code == 0, out
    assert "SUCCESS: 4 rules found" in out, out


# promtool unit tests: series sampled every minute; the alerts' `for` is 15m (errors, queue,
# not scraped) or 5m (leader).
UP = f'up{{job="llmkube", namespace="{NAMESPACE}", pod="{POD}"}}'
LEADER = (
    f'leader_election_master_status{{job="llmkube", namespace="{NAMESPACE}", pod="{POD}",'
    ' name="llmkube-controller"}'
)
RECONCILES = (
    f'controller_runtime_reconcile_total{{namespace="{NAMESPACE}", controller="model",'
    ' result="success"}'
)
ERRORS = f'controller_runtime_reconcile_errors_total{{namespace="{NAMESPACE}", controller="model"}}'
DEPTH = f'workqueue_depth{{namespace="{NAMESPACE}", name="model", controller="model"}}'
HEALTHY = {UP: "1x40", LEADER: "1x40", RECONCILES: "0+60x40", ERRORS: "0+1x40", DEPTH: "50x40"}


def unit_tests(rules: Obj) -> Obj:
    alerts = alert_rules(rules)

    def firing(alert: str, **labels: str) -> Obj:
        """The alert as Prometheus would send it: its labels, its annotations expanded."""
        rule = alerts[alert]
        annotations = {
            key: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
            for key, text in rule["annotations"].items()
        }
        return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": annotations}

    def case(name: str, series: dict[str, str], expect: dict[tuple[str, str], list[Obj]]) -> Obj:
        # Every alert is checked quiet at 35m unless the case expects it there.
        checks: dict[tuple[str, str], list[Obj]] = {("35m", alert): [] for alert in alerts}
        checks.update(expect)
        return {
            "name": name,
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [
                {"eval_time": at, "alertname": alert, "exp_alerts": exp}
                for (at, alert), exp in sorted(checks.items())
            ],
        }

    standby = "llmkube-7d4b9c8f6c-b5z9q"
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            case(
                "a healthy controller (one replica, no leader election) fires nothing", HEALTHY, {}
            ),
            case(
                "a leader and a standby fire nothing",
                {**HEALTHY, LEADER.replace(POD, standby): "0x40", UP.replace(POD, standby): "1x40"},
                {},
            ),
            case(
                "a third of the reconciles failing for 15 minutes",
                {**HEALTHY, ERRORS: "0+20x40"},
                {
                    ("10m", "LLMKubeReconcileErrorRateHigh"): [],
                    ("35m", "LLMKubeReconcileErrorRateHigh"): [
                        firing("LLMKubeReconcileErrorRateHigh", controller="model")
                    ],
                },
            ),
            case(
                "a work queue that does not drain",
                {**HEALTHY, DEPTH: "150x40"},
                {
                    ("10m", "LLMKubeWorkQueueDepthHigh"): [],
                    ("35m", "LLMKubeWorkQueueDepthHigh"): [
                        firing("LLMKubeWorkQueueDepthHigh", name="model")
                    ],
                },
            ),
            case(
                "scraped replicas that all stand by",
                {**HEALTHY, LEADER: "0x40"},
                {
                    ("3m", "LLMKubeLeaderAbsent"): [],
                    ("35m", "LLMKubeLeaderAbsent"): [firing("LLMKubeLeaderAbsent")],
                },
            ),
            case(
                # Only other targets: another namespace's pod of the same name, and the
                # chart's `helm test` pod.
                "a controller Prometheus does not scrape is not a missing leader",
                {
                    UP.replace(NAMESPACE, "elsewhere"): "1x40",
                    UP.replace(POD, "llmkube-test-readyz"): "1x40",
                },
                {
                    ("10m", "LLMKubeControllerMetricsAbsent"): [],
                    ("35m", "LLMKubeControllerMetricsAbsent"): [
                        firing("LLMKubeControllerMetricsAbsent")
                    ],
                },
            ),
            case(
                "a controller that is down",
                {UP: "0x40"},
                {
                    ("35m", "LLMKubeControllerMetricsAbsent"): [
                        firing("LLMKubeControllerMetricsAbsent")
                    ]
                },
            ),
        ],
    }


async def test_promtool_unit_tests_of_each_alert_firing_and_not(tmp_path: Path) -> None:
    rules = chart_rules()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(unit_tests(rules), sort_keys=False))
    code, out = await promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert code == 0, out
    assert "SUCCESS" in out, out
