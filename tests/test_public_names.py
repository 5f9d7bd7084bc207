"""Every public name users had still imports from where it was.

PUBLIC lists the product's modules and names as they were before the lab moved out (the
packages' ``__all__`` and the documented entry points). The lab's modules moved to
``ledger_lab``: MOVED maps each old module to its new one, and docs/lab.md lists them, so a
user of an old path finds the new one. (The lab's commands did not move: see
tests/test_product_and_lab.py.)
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

LAB_DOC = Path(__file__).resolve().parents[1] / "docs" / "lab.md"

PUBLIC: dict[str, tuple[str, ...]] = {
    "ledger_stream": (
        "Alert", "AlertKind", "Approval", "ApprovalError", "ApprovalSigner",
        "AsyncLedgerClient", "AvroCodec", "ConflictError", "DecodeError", "EffectFailed",
        "ExpiredKeyError", "FrozenError", "Intent", "LedgerClient", "LedgerError",
        "LedgerUnavailable", "NeedsReconciliation", "Origin", "Receipt", "ReceiptStatus",
        "VersionHeldError", "Workflow", "args_hash", "canonical_json", "operation_key",
        "sign_approval",
    ),
    "ledger_stream.config": ("Settings", "load_settings", "shared_jar_cache"),
    "ledger_stream.domain": (
        "Decision", "KeyState", "Phase", "Policy", "absent", "args_hash", "canonical_json",
        "decide", "due_ms", "operation_key", "receipt_for",
    ),
    "ledger_stream.sdk": (
        "ApprovalError", "AsyncLedgerClient", "ConflictError", "EffectFailed",
        "ExpiredKeyError", "FrozenError", "InvalidIntentError", "LedgerClient", "LedgerError",
        "LedgerUnavailable", "NeedsReconciliation", "StaleStatusError", "VersionHeldError",
        "ViewUnavailableError",
    ),
    "ledger_stream.langgraph": (
        "Effect", "LedgerMiddleware", "LedgerReceipts", "MissingKeyError", "ReceiptFollower",
        "ledger_tool", "merge_receipts", "receipt_summary",
    ),
    "ledger_stream.langgraph.tool": ("business_key", "ledger_tool"),
    "ledger_stream.connector.target": ("EffectRequest", "LookupUnavailable", "Target",
                                       "TargetError"),
    "ledger_stream.connector.memory": ("AmbiguousError", "MemoryTarget", "NotAppliedError",
                                       "RejectedError"),
    "ledger_stream.connector.runtime": ("ConnectorWorker",),
    "ledger_stream.connector.options": ("ConnectorOptions",),
    "ledger_stream.mcp.server": ("LedgerTools", "Operation", "Unresolved", "build_server"),
    "ledger_stream.mcp.effects": ("EffectSpecError", "RegisteredEffect", "parse_effects"),
    "ledger_stream.gateway": ("ApiKeyError", "ApiKeys", "build_app"),
    "ledger_stream.history": ("Located", "ROLES", "TimelineRow", "evidence", "read_key",
                              "redacted", "timeline"),
    "ledger_stream.operate": ("Actor", "AuditNotWritten", "Decided", "DecisionRefused",
                              "record_decision"),
    "ledger_stream.processor": ("Processor", "ProcessorError", "StartupRefused",
                                "run_processor"),
    "ledger_stream.serde": (
        "AvroCodec", "DecodeError", "EVENT_TYPES", "EncodeError", "RegisteredSchema",
        "RegistryClient", "RegistryFraming", "SchemaRegistryError", "SchemaRegistryRefused",
        "SchemaRegistryUnavailable", "SchemaSet", "SerdeError", "SingleObjectFraming",
        "default_schemas", "make_codec",
    ),
    "ledger_stream.state": (
        "MemoryPartitionStore", "PartitionStore", "RocksDBPartitionStore", "StateFolder",
        "StateFolderLocked", "StoreBatch", "StoreError", "TimerEntry", "decode_row",
        "encode_row",
    ),
    "ledger_stream.tracing": ("annotate", "carried", "configure", "current_headers", "failed",
                              "http_headers", "link", "of_message", "span"),
    "ledger_stream.upgrade": ("Finding", "KafkaLedger", "Kind", "Ledger", "LedgerProbe",
                              "ThreadVerdict", "UNSAFE", "check_threads"),
    "ledger_stream.view": ("HistoryView", "ReceiptView", "ViewStore"),
    "ledger_stream.watch": ("SeenEffect", "Watcher", "key_for"),
    "ledger_stream.kafka.topics": ("TopicReport", "TopicSpec", "create_topics",
                                   "ledger_topics", "require_matching"),
    "ledger_stream.kafka.bootstrap": ("resolve_bootstrap",),
    "ledger_stream.cli.main": ("build_parser", "main", "package_version"),
    "connectors.http": ("Ambiguous", "HttpTarget", "NotSent", "Refused", "check_id_field",
                        "check_lookup_template", "check_path", "check_statuses",
                        "parse_statuses", "receipt_id"),
    "connectors.postgres": ("PostgresNotApplied", "PostgresOutcomeUnknown",
                            "PostgresRejected", "PostgresTarget", "PostgresTargetError"),
    "connectors.smtp": ("SmtpNotSent", "SmtpOutcomeUnknown", "SmtpRefused", "SmtpTarget",
                        "SmtpTargetError", "message_id"),
}

MOVED = {
    "ledger_stream.bench": "ledger_lab.bench",
    "ledger_stream.chaos": "ledger_lab.chaos",
    "ledger_stream.falsify": "ledger_lab.falsify",
    "ledger_stream.simulation": "ledger_lab.simulation",
    "ledger_stream.sandbox": "ledger_lab.sandbox",
    "ledger_stream.demo": "ledger_lab.demo",
    "ledger_stream.kafka.local": "ledger_lab.local_kafka",
    "ledger_stream.reliability": "ledger_lab.fuzz",
    "ledger_stream.reliability.fuzz": "ledger_lab.fuzz.seeded",
    "ledger_stream.reliability.coverage_fuzz": "ledger_lab.fuzz.coverage",
    "ledger_stream.testing.processes": "ledger_lab.harness.processes",
    "ledger_stream.testing.stack": "ledger_lab.harness.stack",
    "ledger_stream.testing.sandbox": "ledger_lab.harness.sandbox",
    "ledger_stream.testing.agents": "ledger_lab.harness.agents",
    "ledger_stream.testing.approvers": "ledger_lab.harness.approvers",
    "ledger_stream.testing.cgroup": "ledger_lab.harness.cgroup",
    "ledger_stream.testing.operator": "ledger_lab.harness.operator",
    "ledger_stream.testing.postgres": "ledger_lab.harness.postgres",
    "ledger_stream.testing.records": "ledger_lab.harness.records",
    "ledger_stream.testing.view": "ledger_lab.harness.view",
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_the_public_names_of_a_product_module_still_import(module):
    imported = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert missing == []


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_lab_module_imports_at_its_new_place_listed_in_the_docs(old):
    importlib.import_module(MOVED[old])
    listed = LAB_DOC.read_text()
    assert f"`{old}`" in listed and f"`{MOVED[old]}`" in listed


def test_the_testing_kit_offers_what_users_tests_need():
    import ledger_stream.testing as kit

    for name in kit.__all__:
        assert getattr(kit, name) is not None
