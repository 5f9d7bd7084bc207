"""deploy/k8s: the Kubernetes manifests, checked without a cluster. Every resource validates
strictly against the Kubernetes 1.37 OpenAPI schemas (kubernetes-validate); every command
parses with the CLI; every LEDGER_* variable is a setting the code reads; the processor keeps
its state on a volume per pod, its instance id from the pod name, and approver public keys
only (no shared approval secret)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ledger_stream.cli.main import build_parser
from ledger_stream.config import ENV_PREFIX
from ledger_stream.settings import FLAT_ROUTES

pytestmark = pytest.mark.timeout(60)

K8S = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
VERSION = "1.37.0"


def resources() -> list[dict[str, Any]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def containers(resource: dict[str, Any]) -> list[dict[str, Any]]:
    spec = resource.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return list(pod.get("containers", []))


def by_kind(kind: str, name: str) -> dict[str, Any]:
    return next(r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name)


def test_every_resource_validates_strictly_against_the_kubernetes_schemas():
    found = resources()
    assert {r["kind"] for r in found} >= {"Namespace", "ConfigMap", "Job", "StatefulSet",
                                          "Deployment", "Service"}
    for resource in found:
        kubernetes_validate.validate(resource, VERSION, strict=True)


def test_the_validator_is_strict_enough_to_catch_a_typo():
    broken = copy.deepcopy(by_kind("StatefulSet", "ledger-processor"))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["livenesProbe"] = container.pop("livenessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml")
                                    if p.name != "kustomization.yaml")


def test_every_command_parses_and_every_variable_is_a_setting():
    settings = {f"{ENV_PREFIX}{name}".upper() for name in FLAT_ROUTES}
    config = by_kind("ConfigMap", "ledger-stream-config")["data"]
    assert set(config) <= settings, set(config) - settings
    for resource in resources():
        for container in containers(resource):
            command = container["command"]
            assert command[0] == "ledger-stream"
            assert build_parser().parse_args(command[1:]).handler, command
            names = {e["name"] for e in container.get("env", [])}
            assert names <= settings, names - settings


def test_the_processor_keeps_state_per_pod_and_its_secret_out_of_the_manifests():
    processor = by_kind("StatefulSet", "ledger-processor")
    container = containers(processor)[0]
    env = {e["name"]: e for e in container["env"]}
    claim = processor["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == claim)
    assert mount["mountPath"] == env["LEDGER_STATE_DIR"]["value"]
    assert env["LEDGER_PROCESSOR_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.name"
    # Approvals: public keys only, from a ConfigMap; no shared secret that could sign.
    assert "LEDGER_APPROVAL_SECRET" not in env
    keys = next(m for m in container["volumeMounts"] if m["name"] == "approval-keys")
    assert keys["mountPath"] == env["LEDGER_APPROVAL_KEYS_DIR"]["value"] and keys["readOnly"]
    volume = next(v for v in processor["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "approval-keys")
    assert volume["configMap"]["name"] == "ledger-stream-approval-keys"
    assert "LEDGER_DEV_MODE" not in env
    assert processor["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 30
    port = int(env["LEDGER_METRICS_PORT"]["value"])
    assert container["livenessProbe"]["httpGet"]["port"] == "metrics"
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"] == port
