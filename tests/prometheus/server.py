"""A real Prometheus server for one test: its own config and data folder under the test's
temporary folder, a free loopback port, 1 s scrape and evaluation intervals, the shipped
rule file loaded; stopped by its PID."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from ledger_lab.harness.processes import stop_process
from tests.processor.support import free_port
from tests.prometheus.tools import RULES, binary


class PrometheusServer:
    """``prometheus`` scraping ``targets`` (job name -> ``host:port`` list) every second."""

    def __init__(self, folder: Path, targets: dict[str, list[str]]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": hosts}]}
                               for job, hosts in targets.items()],
        }))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = folder / "prometheus.log"
        with self.log.open("ab") as log:
            self.popen = subprocess.Popen(
                [binary("prometheus"), f"--config.file={config}",
                 f"--storage.tsdb.path={folder / 'data'}",
                 f"--web.listen-address={self.url.removeprefix('http://')}"],
                stdout=log, stderr=subprocess.STDOUT)

    def ready(self, timeout_s: float = 30.0) -> None:
        """Wait until the server answers /-/ready (AssertionError with its log if not)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.popen.poll() is None, f"prometheus exited\n{self.tail()}"
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready in {timeout_s} s\n{self.tail()}")

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of an HTTP API answer (``/api/v1/...``)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now."""
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The pending and firing alerts of alert rule ``name``."""
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> int:
        return stop_process(self.popen, 20)
