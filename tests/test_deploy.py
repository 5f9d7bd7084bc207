"""docker-compose.yml describes a KRaft Kafka (official image) and the ledger's services.

There is no Docker engine here, so this checks the file the way `docker compose config`
would start: valid YAML, every service runnable (image or build), dependencies that exist.
"""

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[1]


def test_compose_file_is_complete():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_GROUP_COORDINATOR_APPEND_LINGER_MS"] == 0  # as the local cluster's
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            assert (ROOT / service["build"]["dockerfile"]).is_file()
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
    assert services["processor"]["command"] == ["ledger-stream", "processor"]
    assert services["processor"]["environment"]["LEDGER_KAFKA_BOOTSTRAP"] == "kafka:19092"


def test_every_ledger_command_in_compose_parses():
    """A renamed flag or subcommand would make a service exit at start: parse each one."""
    from ledger_stream.cli.main import build_parser

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    commands = {name: s["command"] for name, s in services.items()
                if isinstance(s.get("command"), list) and s["command"][0] == "ledger-stream"}
    assert {"processor", "view", "connector-payments", "sandbox", "gateway"} <= set(commands)
    for name, command in commands.items():
        args = build_parser().parse_args(command[1:])
        assert args.handler, name


def test_compose_publishes_every_port_on_this_host_only():
    """A development stack (Kafka without authentication, development mode, a public
    operator key): no port is published on the network, only on 127.0.0.1."""
    text = (ROOT / "docker-compose.yml").read_text()
    assert "never to be exposed" in text.split("services:")[0]
    services = yaml.safe_load(text)["services"]
    published = {name: s["ports"] for name, s in services.items() if "ports" in s}
    assert {"kafka", "gateway", "view"} <= set(published)
    for name, ports in published.items():
        for port in ports:
            host, _, rest = str(port).partition(":")
            assert host == "127.0.0.1" and rest.count(":") == 1, f"{name} publishes {port}"
