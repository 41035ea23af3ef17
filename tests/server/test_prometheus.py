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

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_prometheus.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from app.cli import manager_for as cli_manager_for
from app.cli import parse
from app.manifests import EXAMPLES, apply_text, install_crds
from app.servers import bind_domain_metrics
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE
from objtypes import Obj
from tests.support.chart import CHART, NAMESPACE
from tests.support.manifests import quota_yaml
from tests.support.prometheus import POD, PROMTOOL, alert_rules, chart_rules, promtool
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus/promtool not installed (apt-get install prometheus; .ci/run does)",
)
TARGET = {"namespace": NAMESPACE, "pod": POD}
# What the docs tell users of a pod-annotation scrape job without honor_labels: LLMKube's
# gauges get their own `namespace` back (the scrape had renamed it exported_namespace).
NAMESPACE_RELABEL: list[Obj] = [
    {
        "source_labels": ["__name__", "exported_namespace"],
        "regex": "llmkube_.+;(.+)",
        "target_label": "namespace",
    },
    {
        "source_labels": ["__name__"],
        "regex": "llmkube_.+",
        "target_label": "exported_namespace",
        "replacement": "",
    },
]
# Dashboard queries that are right to be empty on a healthy cluster, and why.
EMPTY_WHEN_HEALTHY = {
    (15, "B"): "services whose DRA devices are not all allocated",
}


def dashboard_targets() -> list[tuple[int, str, str]]:
    """(panel id, refId, expr) of every query, Grafana's variables set to "All"."""
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    return [
        (p["id"], t["refId"], t["expr"].replace("$job", ".*").replace("$namespace", ".*"))
        for p in dashboard["panels"]
        for t in p["targets"]
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrape_job(name: str, port: int, *, honor_labels: bool, **more: Any) -> Obj:
    return {
        "job_name": name,
        "honor_labels": honor_labels,
        "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": TARGET}],
        **more,
    }


@asynccontextmanager
async def prometheus(
    tmp: Path, jobs: list[Obj], rules: Obj | None = None
) -> AsyncIterator[PrometheusApi]:
    """The real Prometheus, scraping and evaluating every second, until the block ends."""
    assert PROMETHEUS is not None
    config: Obj = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": jobs,
    }
    if rules is not None:
        (tmp / "rules.yaml").write_text(yaml.safe_dump(rules))
        config["rule_files"] = [str(tmp / "rules.yaml")]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp / "prometheus.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        PROMETHEUS,
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=log,
        stderr=log,
    )
    try:
        async with aiohttp.ClientSession() as session:
            api = PrometheusApi(session, f"http://127.0.0.1:{port}")

            async def ready() -> bool:
                if process.returncode is not None:
                    log_text = (tmp / "prometheus.log").read_text()[-2000:]
                    raise AssertionError(f"prometheus exited: {log_text}")
                try:
                    async with session.get(f"{api.url}/-/ready") as r:
                        return r.status == 200
                except aiohttp.ClientError:
                    return False

            await eventually(ready, timeout=60, what="prometheus /-/ready")
            yield api
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()
        log.close()


class PrometheusApi:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def get(self, path: str, **params: str) -> Any:
        async with self.session.get(f"{self.url}/api/v1/{path}", params=params) as r:
            body = await r.json()
        assert body["status"] == "success", (path, params, body)
        return body["data"]

    async def query(self, expr: str) -> list[Obj]:
        result: list[Obj] = (await self.get("query", query=expr))["result"]
        return result

    async def label_values(self, label: str, match: str) -> list[str]:
        values: list[str] = await self.get(f"label/{label}/values", **{"match[]": match})
        return values


@asynccontextmanager
async def controller_on_a_dra_cluster() -> AsyncIterator[tuple[KubeClient, Manager]]:
    """The controller as the chart runs it by default (one replica, no leader election),
    with the seed guide's single-GPU example allocated and a GPUQuota, so every LLMKube
    gauge has series."""
    server = await ApiServerProcess.start("--simulate-cluster", "dra=4,plugin=0")
    client = await KubeClient.connect(server.url)
    address = "127.0.0.1:0"
    flags = [f"--health-probe-bind-address={address}", f"--metrics-bind-address={address}"]
    manager = cli_manager_for(client, parse(flags))
    try:
        await install_crds(client)
        await manager.start()
        await manager.wait_synced()
        await apply_text(client, (EXAMPLES / "single-gpu.yaml").read_text())
        await apply_text(client, quota_yaml(4))

        async def allocated() -> bool:
            isvc = await client.get(INFERENCE_SERVICE, "default", "qwen3-embedding")
            allocation = ((isvc or {}).get("status") or {}).get("allocation") or {}
            return bool(
                allocation.get("allocatedDevices") == allocation.get("expectedDevices") == 1
            )

        await eventually(allocated, timeout=30, what="the example's device allocated")
        yield client, manager
    finally:
        await manager.stop()
        await client.close()
        await server.stop()


@pytest.mark.server
async def test_prometheus_evaluates_every_dashboard_query_and_alert(tmp_path: Path) -> None:
    rules = chart_rules()
    async with (
        controller_on_a_dra_cluster() as (_, manager),
        prometheus(
            tmp_path,
            [scrape_job("llmkube", manager.http_port or 0, honor_labels=True)],
            rules,
        ) as api,
    ):
        targets = dashboard_targets()
        assert len(targets) >= 28

        async def every_query_has_data() -> bool:
            missing = [
                (panel, ref)
                for panel, ref, expr in targets
                if (panel, ref) not in EMPTY_WHEN_HEALTHY and not await api.query(expr)
            ]
            assert not missing, f"no data yet for (panel, refId) {missing}"
            return True

        # rate() needs two scrapes in its window, and the first scrapes must have the objects.
        await eventually(every_query_has_data, timeout=60, what="data for every dashboard query")
        for panel, ref, expr in targets:
            result = await api.query(expr)  # an invalid query fails the API call itself
            if (panel, ref) in EMPTY_WHEN_HEALTHY:
                assert result == [], (panel, ref, EMPTY_WHEN_HEALTHY[(panel, ref)])
        # Grafana's variables: label_values(metric, label), as its API asks.
        assert "llmkube" in await api.label_values("job", "controller_runtime_reconcile_total")
        namespaces = await api.label_values("namespace", "llmkube_inferenceservice_phase")
        assert namespaces == ["default"]  # the service's namespace, not the controller's

        # The panels the issue named: memory in bytes, the leader without leader election.
        (rss,) = await api.query("process_resident_memory_bytes")
        assert float(rss["value"][1]) > 1e6
        (leader,) = await api.query('max by (pod) (leader_election_master_status{job=~".*"})')
        assert leader["metric"] == {"pod": POD} and leader["value"][1] == "1"
        codes = await api.query("sum by (code, method) (rate(rest_client_requests_total[5m]))")
        assert {"code": "200", "method": "GET"} in [c["metric"] for c in codes]

        # A healthy controller: every alert's expression evaluates, to nothing.
        for name, rule in alert_rules(rules).items():
            assert await api.query(rule["expr"]) == [], name

        # Prometheus itself evaluates the rule file without error, and nothing fires.
        async def evaluated() -> list[Obj] | None:
            groups = (await api.get("rules"))["groups"]
            loaded = [r for g in groups for r in g["rules"]]
            done = all(r["lastEvaluation"] > "2000" for r in loaded)
            return loaded if done and len(loaded) == len(alert_rules(rules)) else None

        for rule in await eventually(evaluated, timeout=30, what="every rule evaluated"):
            assert (rule["name"], rule["health"], rule["state"]) == (
                rule["name"],
                "ok",
                "inactive",
            ), rule


@pytest.mark.server
async def test_namespace_label_on_each_scrape_path(tmp_path: Path) -> None:
    async with (
        controller_on_a_dra_cluster() as (_, manager),
        prometheus(
            tmp_path,
            [
                # The chart's ServiceMonitor: honorLabels.
                scrape_job("servicemonitor", manager.http_port or 0, honor_labels=True),
                # A pod-annotation job as commonly configured: target labels namespace
                # and pod, Prometheus' default honor_labels: false.
                scrape_job("annotations", manager.http_port or 0, honor_labels=False),
                scrape_job(
                    "annotations-relabelled",
                    manager.http_port or 0,
                    honor_labels=False,
                    metric_relabel_configs=NAMESPACE_RELABEL,
                ),
            ],
        ) as api,
    ):

        async def per_job(expr: str) -> dict[str, Obj] | None:
            found = {r["metric"]["job"]: r["metric"] for r in await api.query(expr)}
            return found if len(found) == 3 else None

        quota = await eventually(
            lambda: per_job("llmkube_gpuquota_used_gpus"), timeout=60, what="3 jobs scraped"
        )
        # The GPUQuota lives in `default`; the controller's pod in llmkube-system.
        assert quota["servicemonitor"]["namespace"] == "default"
        assert "exported_namespace" not in quota["servicemonitor"]
        assert quota["annotations"]["namespace"] == NAMESPACE
        assert quota["annotations"]["exported_namespace"] == "default"
        assert quota["annotations-relabelled"]["namespace"] == "default"
        assert "exported_namespace" not in quota["annotations-relabelled"]
        # The controller's own series carry the pod's namespace on every path (the alerts
        # select on it), the relabelling included.
        reconciles = await per_job('controller_runtime_reconcile_total{result="success"}')
        assert reconciles is not None
        assert {m["namespace"] for m in reconciles.values()} == {NAMESPACE}
        # The dashboard's namespace variable on each path.
        namespaces = {
            job: await api.label_values(
                "namespace", f'llmkube_inferenceservice_phase{{job="{job}"}}'
            )
            for job in ("servicemonitor", "annotations", "annotations-relabelled")
        }
        assert namespaces == {
            "servicemonitor": ["default"],
            "annotations": [NAMESPACE],  # every service shows under the controller's namespace
            "annotations-relabelled": ["default"],
        }


async def test_promtool_check_metrics_on_a_scrape_is_clean_but_for_the_deprecated_name(
    kube: KubeClient, controller: Manager
) -> None:
    bind_domain_metrics(controller)
    await apply_text(kube, quota_yaml(4))
    await eventually(
        lambda: asyncio.sleep(0, controller.cache.list(GPU_QUOTA)), what="quota in the cache"
    )
    url = f"http://127.0.0.1:{controller.http_port}/metrics"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as r:
            text = await r.text()
        headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
        async with session.get(url, headers=headers) as r:
            openmetrics = await r.text()
    # No *_created series in either format (controller-runtime has none).
    assert "_created" not in text and "_created" not in openmetrics
    assert "llmkube_gpuquota_used_gpu_count{" in text  # the deprecated name, still there

    code, out = await promtool("check", "metrics", stdin=text)
    problems = [line for line in out.splitlines() if line.strip()]
    suffix = 'non-histogram and non-summary metrics should not have "_count" suffix'
    assert problems == [f"llmkube_gpuquota_used_gpu_count {suffix}"], out
    # Without the deprecated family (it goes in the next release), nothing to say.
    current = "\n".join(
        line for line in text.splitlines() if "llmkube_gpuquota_used_gpu_count" not in line
    )
    code, out = await promtool("check", "metrics", stdin=current + "\n")
    assert (code, out) == (0, ""), out
