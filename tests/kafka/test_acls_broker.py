"""The shipped ACLs (deploy/acls/acls.toml) on a real broker that authenticates every client
(SASL/PLAIN) and enforces ACLs (KRaft's StandardAuthorizer; only the admin is a super
user): each role can do what the ledger's code does and nothing the file does not grant.
An agent cannot forge an attempt outcome, a connector cannot write an intent, a monitor
cannot read receipts; and a submit flows end to end with the processor, a connector and
the agent each running as its own principal."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ledger_lab.harness.processes import Proc, processor_group, start_processor
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import FAST
from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache
from ledger_lab.local_kafka.server_properties import LocalSasl
from ledger_stream import LedgerClient, ReceiptStatus, Workflow, operation_key
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka import topics
from ledger_stream.kafka.acls import DEFAULT_FILE, acl_set, apply_acls, load_roles
from ledger_stream.kafka.client_config import use_client_settings
from ledger_stream.kafka.clients import Consumer, Producer
from ledger_stream.serde import AvroCodec

pytestmark = [pytest.mark.timeout(300), pytest.mark.own_cluster]

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("agent", "connector", "monitor", "processor", "operator", "view")
SASL = LocalSasl(f"admin-{uuid.uuid4().hex}", {role: f"{role}-{uuid.uuid4().hex}"
                                                 for role in (*ROLES, "stranger")})
PRINCIPALS = {role: f"User:{role}" for role in ROLES}
DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A one-node cluster with SASL and the authorizer; the ledger's topics created and the
    shipped ACLs applied by the admin. Every other test's broker stays open (its own
    LocalCluster without ``sasl``)."""
    settings = Settings()
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=lambda _: None)
    cluster = LocalCluster(tmp_path_factory.mktemp("acl-cluster"), progress=lambda _: None,
                           sasl=SASL)
    try:
        status = cluster.start(libs, settings.kafka_version, nodes=1)
        assert status.bootstrap is not None
        ledger = Settings(kafka_bootstrap=status.bootstrap, topic_prefix="acl", partitions=3)
        ledger = ledger.model_copy(update={"consumer_group": processor_group(ledger)})
        as_admin(lambda: topics.require_matching(topics.create_topics(status.bootstrap,
                                                                      ledger)))
        create_audit_topic(status.bootstrap, ledger)
        yield ledger
    finally:
        cluster.wipe()


def create_audit_topic(bootstrap: str, settings: Settings) -> None:
    """The operators' audit topic, whether or not this checkout's topic set holds it."""
    audit = settings.topic("audit")
    admin = AdminClient({"bootstrap.servers": bootstrap, **SASL.client()})
    if audit not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(audit, settings.partitions, 1)])[audit].result()


def as_admin(call):  # type: ignore[no-untyped-def]
    """``call()`` with this process's Kafka clients connecting as the admin."""
    use_client_settings(SASL.client())
    try:
        return call()
    finally:
        use_client_settings({})


def produce_error(settings: Settings, user: str, role: str, event: object,
                  idempotent: bool = True) -> KafkaError | None:
    """The broker's answer to ``user`` producing ``event`` to the ledger topic ``role``
    (``idempotent``: as the ledger's producers do, which needs IdempotentWrite first)."""
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, **SASL.client(user),
                         "enable.idempotence": idempotent, "message.timeout.ms": 15_000})
    try:
        producer.produce(settings.topic(role), key=b"acme/refund/forged",
                         value=AvroCodec().encode(event),
                         on_delivery=lambda e, _: reports.append(e))
    except KafkaException as exc:
        # The broker's denial already in the producer's metadata: produce() raises it at
        # once instead of reporting it on delivery (which one depends on timing).
        return exc.args[0]
    producer.flush(20)
    assert reports, "no delivery report"
    return reports[0]


def read_error(settings: Settings, user: str, role: str, group: str | None = None,
               reader: str = "key-") -> KafkaError | None:
    """The first error ``user`` meets reading partition 0 of ``role`` to its end (None when
    the end is reached): assigned, with a throwaway group id starting with ``reader`` as
    the ledger's readers have, or with ``group`` as a member of that group (subscribed)."""
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, **SASL.client(user),
                         "group.id": group or f"{reader}{uuid.uuid4().hex}",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        refused = consumer.list_topics(settings.topic(role), timeout=10
                                       ).topics[settings.topic(role)].error
        if refused is not None:  # not even Describe: the broker hides the topic
            return refused
        if group:
            consumer.subscribe([settings.topic(role)])
        else:
            consumer.assign([TopicPartition(settings.topic(role), 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is None:
                continue
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return None
            return msg.error()
        raise AssertionError(f"{user} neither read {role} to its end nor was refused")
    finally:
        consumer.close()


def outcome() -> ev.AttemptOutcome:
    return ev.AttemptOutcome(uuid.uuid4().hex, "acme/refund/forged", 1, "forged-claim",
                             ev.OutcomeStatus.SUCCEEDED, int(time.time() * 1000), "forged")


def intent() -> ev.Intent:
    return ev.Intent(uuid.uuid4().hex, "acme/refund/forged", "acme", "refund", "payments",
                     "{}", "0" * 64, ev.Workflow("forger", "1"), int(time.time() * 1000))


@pytest.fixture(scope="module")
def granted(secured: Settings) -> Settings:
    """``secured`` with the shipped ACLs applied for every role, by the command itself."""
    args = ["acls", "apply", "--file", str(ROOT / DEFAULT_FILE),
            "--bootstrap", str(secured.kafka_bootstrap), "--topic-prefix", "acl",
            "--consumer-group", secured.consumer_group,
            "--principal", ",".join(f"{r}={p}" for r, p in PRINCIPALS.items())]
    env = {"LEDGER_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
           "LEDGER_KAFKA_SASL_MECHANISM": "PLAIN", "LEDGER_KAFKA_SASL_USERNAME": "admin",
           "LEDGER_KAFKA_SASL_PASSWORD": SASL.admin_password}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        try:
            assert main(args) == 0
        finally:
            use_client_settings({})
    acls = acl_set(load_roles(ROOT / DEFAULT_FILE), PRINCIPALS, secured)
    deadline = time.monotonic() + 30  # created ACLs reach the authorizer through the
    while {r.status for r in as_admin(  # metadata log: wait until the broker lists them
            lambda: apply_acls(str(secured.kafka_bootstrap), acls, dry_run=True))} != {"exists"}:
        assert time.monotonic() < deadline, "the applied ACLs never showed as existing"
        time.sleep(0.5)
    return secured


def test_an_authenticated_principal_without_acls_may_do_nothing(granted: Settings) -> None:
    assert produce_error(granted, "stranger", "intents", intent(), idempotent=False
                         ).code() == DENIED
    assert read_error(granted, "stranger", "receipts").code() == DENIED


def test_an_agent_writes_intents_and_reads_receipts_but_cannot_forge_an_outcome(
        granted: Settings) -> None:
    assert produce_error(granted, "agent", "intents", intent()) is None
    assert read_error(granted, "agent", "receipts") is None
    assert produce_error(granted, "agent", "attempts", outcome()).code() == DENIED
    assert read_error(granted, "agent", "attempts").code() == DENIED


def test_a_connector_reads_dispatch_and_writes_attempts_but_cannot_write_an_intent(
        granted: Settings) -> None:
    assert read_error(granted, "connector", "dispatch", group="acl.connector.payments") is None
    assert produce_error(granted, "connector", "attempts", outcome()) is None
    assert produce_error(granted, "connector", "intents", intent()).code() == DENIED
    assert read_error(granted, "connector", "receipts", group="acl.connector.payments"
                      ).code() == DENIED


def test_a_monitor_reads_alerts_but_not_receipts(granted: Settings) -> None:
    assert read_error(granted, "monitor", "alerts", reader="tail-") is None
    assert read_error(granted, "monitor", "receipts", reader="tail-").code() == DENIED
    assert produce_error(granted, "monitor", "alerts", outcome(), idempotent=False
                         ).code() == DENIED


@pytest.mark.parametrize("role", ["intents", "attempts", "dispatch", "receipts", "alerts",
                                  "dlq", "audit"])
def test_the_view_reads_every_timeline_topic_and_writes_none(granted: Settings,
                                                             role: str) -> None:
    assert read_error(granted, "view", role, reader="ledger-view-") is None
    assert produce_error(granted, "view", role, outcome(), idempotent=False).code() == DENIED


def test_an_operator_writes_audit_and_decisions_but_no_receipt(granted: Settings) -> None:
    assert produce_error(granted, "operator", "audit", outcome()) is None
    assert read_error(granted, "operator", "audit", reader="key-") is None  # inspect
    assert produce_error(granted, "operator", "attempts", outcome()) is None
    assert read_error(granted, "operator", "alerts", reader="tail-") is None
    assert produce_error(granted, "operator", "receipts", outcome()).code() == DENIED
    assert read_error(granted, "monitor", "audit", reader="tail-").code() == DENIED


def test_applying_again_changes_nothing_and_a_dry_run_creates_nothing(
        granted: Settings) -> None:
    acls = acl_set(load_roles(ROOT / DEFAULT_FILE), PRINCIPALS, granted)
    bootstrap = str(granted.kafka_bootstrap)
    assert {r.status for r in as_admin(lambda: apply_acls(bootstrap, acls))} == {"exists"}
    stranger = acl_set(load_roles(ROOT / DEFAULT_FILE), {"monitor": "User:stranger"}, granted)
    dry = as_admin(lambda: apply_acls(bootstrap, stranger, dry_run=True))
    assert {r.status for r in dry} == {"would create"}
    time.sleep(2)
    again = as_admin(lambda: apply_acls(bootstrap, stranger, dry_run=True))
    assert {r.status for r in again} == {"would create"}


def principal_env(role: str) -> dict[str, str]:
    return {"LEDGER_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "LEDGER_KAFKA_SASL_MECHANISM": "PLAIN", "LEDGER_KAFKA_SASL_USERNAME": role,
            "LEDGER_KAFKA_SASL_PASSWORD": SASL.users[role]}


def run_as(role: str, argv: list[str]) -> int:
    """``ledger-stream ARGV`` in this process, connecting as ``role``'s principal."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in principal_env(role).items():
            patch.setenv(name, value)
        try:
            return main(argv)
        finally:
            use_client_settings({})


def test_a_submit_flows_end_to_end_with_each_part_as_its_own_principal(
        granted: Settings, tmp_path: Path) -> None:
    sandbox = SandboxProc(tmp_path / "sandbox.db")
    procs: list[Proc] = []
    client: LedgerClient | None = None
    try:
        procs.append(start_processor(granted, tmp_path / "state", tmp_path / "processor.log",
                                     env=principal_env("processor")))
        procs.append(Proc(["connector", "http", "--name", "payments",
                           "--base-url", sandbox.url, "--deduplicates",
                           "--bootstrap", str(granted.kafka_bootstrap), "--topic-prefix", "acl"],
                          tmp_path / "connector.log", env={**FAST, **principal_env("connector")}))
        procs.append(Proc(["view", "--port", "0", "--no-auth",
                           "--state-dir", str(tmp_path / "view"),
                           *["--bootstrap", str(granted.kafka_bootstrap), "--topic-prefix",
                             "acl"]], tmp_path / "view.log", env=principal_env("view")))
        client = LedgerClient(Settings(
            kafka_bootstrap=granted.kafka_bootstrap, topic_prefix="acl", partitions=3,
            kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN",
            kafka_sasl_username="agent", kafka_sasl_password=SASL.users["agent"]))
        key = operation_key("acme", "refund", uuid.uuid4().hex[:8])
        args = {"invoice": "inv-1", "amount": 12.5, "currency": "EUR"}
        receipt = client.submit(client.intent(
            key, "refund", "payments", args, workflow=Workflow("agent", "1", "t", "refund")),
            wait=90)
        assert receipt.key_status is ReceiptStatus.SUCCEEDED, receipt
        assert len(sandbox.effects(key)) == 1
        common = ["--bootstrap", str(granted.kafka_bootstrap), "--topic-prefix", "acl"]
        group = ["--group", granted.consumer_group, "--wait", "60"]
        # An operator's freeze is one transaction over every partition, and waits for the
        # processor group's commits to pass it: both need the operator's grants.
        assert run_as("operator", ["freeze", "refund", "--tenant", "acme", "--reason",
                                   "acl test", *group, *common]) == 0
        assert run_as("operator", ["unfreeze", "refund", "--tenant", "acme", *group,
                                   *common]) == 0
        assert run_as("operator", ["inspect", key, *common]) == 0
        assert run_as("monitor", ["alerts", *common]) == 0
        for proc in procs:  # nothing the code does was refused (a missing grant shows here)
            assert "authorization failed" not in proc.log.read_text().lower(), proc.tail(30)
            assert proc.alive(), proc.tail(30)
    except BaseException:
        for proc in procs:
            print(f"--- {proc.log.name}\n{proc.tail(30)}")
        raise
    finally:
        if client is not None:
            client.close()
        use_client_settings({})
        for proc in procs:
            proc.stop(15)
        sandbox.stop()
