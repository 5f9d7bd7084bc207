"""The shipped ACL file and the SASL settings, without a broker (tests/kafka/
test_acls_broker.py applies them to one that enforces them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.local_kafka.server_properties import LocalSasl, plan_nodes, render
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.kafka.acls import (
    DEFAULT_FILE,
    Acl,
    AclSetError,
    acl_set,
    load_roles,
    parse_principals,
)
from ledger_stream.kafka.topics import LEDGER_TOPICS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / DEFAULT_FILE


def grants(role: str, settings: Settings | None = None) -> set[tuple[str, str, str]]:
    acls = acl_set(load_roles(SHIPPED), {role: f"User:{role}"}, settings or Settings())
    return {(a.resource, a.name, a.operation) for a in acls}


def test_the_shipped_file_names_only_ledger_topics_with_the_configured_prefix() -> None:
    settings = Settings(topic_prefix="prod")
    roles = load_roles(SHIPPED)
    known = {settings.topic(name) for name in (*LEDGER_TOPICS, "audit")}
    for role in roles:
        topics = {name for kind, name, _ in grants(role, settings) if kind == "topic"}
        assert topics <= known, (role, topics - known)


def test_agents_and_connectors_hold_only_their_side_of_the_ledger() -> None:
    agent = {(name, op) for kind, name, op in grants("agent") if kind == "topic"}
    assert agent == {("ledger.intents", "Write"), ("ledger.receipts", "Read")}
    connector = {(name, op) for kind, name, op in grants("connector") if kind == "topic"}
    assert connector == {("ledger.dispatch", "Read"), ("ledger.attempts", "Write")}
    monitor = {(name, op) for kind, name, op in grants("monitor") if kind == "topic"}
    assert monitor == {("ledger.alerts", "Read")}


def test_the_processor_writes_every_output_and_owns_its_transactional_ids() -> None:
    processor = grants("processor", Settings(consumer_group="decider"))
    for output in ("dispatch", "receipts", "alerts", "dlq", "attempts", "changelog"):
        assert ("topic", f"ledger.{output}", "Write") in processor
    assert ("transactional_id", "decider.", "Write") in processor
    assert ("group", "decider", "Read") in processor
    assert not any(name == "ledger.intents" and op == "Write" for _, name, op in processor)


def test_principals_are_role_equals_principal() -> None:
    assert parse_principals(["agent=User:a,connector=User:c", "monitor=User:m"]) == {
        "agent": "User:a", "connector": "User:c", "monitor": "User:m"}
    for bad in ("agent", "agent=a", "=User:a", "agent=User:"):
        with pytest.raises(AclSetError):
            parse_principals([bad])
    with pytest.raises(AclSetError, match="given twice"):
        parse_principals(["agent=User:a", "agent=User:b"])
    with pytest.raises(AclSetError, match="unknown role"):
        acl_set(load_roles(SHIPPED), {"root": "User:x"}, Settings())


def test_a_file_with_an_unknown_operation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "acls.toml"
    path.write_text('[[roles.agent.allow]]\nresource = "topic"\nname = "x"\n'
                    'operations = ["All"]\n')
    with pytest.raises(AclSetError, match="operations among"):
        load_roles(path)


def test_an_acl_reads_as_one_line() -> None:
    acl = Acl("User:a", "group", "ledger.connector.", "prefixed", "Read")
    assert acl.line() == "ALLOW User:a Read group:ledger.connector. (prefixed)"


def test_the_command_refuses_a_bad_principal_before_reaching_kafka(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "apply", "--file", str(SHIPPED), "--principal", "agent",
                 "--bootstrap", "127.0.0.1:9", "--dry-run"]) == 2
    assert "expected ROLE=User:NAME" in capsys.readouterr().err


def test_sasl_settings_come_from_the_environment_and_never_show(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("LEDGER_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("LEDGER_KAFKA_SASL_USERNAME", "agent")
    monkeypatch.setenv("LEDGER_KAFKA_SASL_PASSWORD", "hunter2-secret")
    settings = Settings(kafka_client={"ssl.ca.location": "/etc/ca.pem"})
    assert settings.kafka_client_properties() == {
        "ssl.ca.location": "/etc/ca.pem", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "agent",
        "sasl.password": "hunter2-secret"}
    assert "hunter2-secret" not in repr(settings) + str(settings.model_dump())
    with pytest.raises(ValueError, match="sasl.username set both") as refused:
        Settings(kafka_client={"sasl.username": "other"})
    assert "hunter2-secret" not in str(refused.value)


def test_the_default_local_broker_stays_open_and_the_secured_one_enforces() -> None:
    nodes = plan_nodes(Path("/tmp/c"), [9092, 9093])
    plain = render(nodes[0], nodes)
    assert "PLAINTEXT://127.0.0.1:9092" in plain
    assert "authorizer" not in plain and "sasl" not in plain.lower()
    secured = render(nodes[0], nodes, LocalSasl("pw", {"agent": "a"}))
    assert "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" \
        in secured
    assert "advertised.listeners=SASL_PLAINTEXT://127.0.0.1:9092" in secured
    assert "super.users=User:admin\n" in secured


def test_a_cluster_without_an_authorizer_is_named_as_the_problem(
        kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "apply", "--file", str(SHIPPED), "--principal", "agent=User:a",
                 "--bootstrap", kafka_bootstrap, "--timeout", "10"]) == 2
    err = capsys.readouterr().err
    assert "creating ALLOW User:a Write topic:ledger.intents failed: No Authorizer" in err
