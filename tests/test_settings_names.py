"""Every setting keeps the names it was read by before the settings were grouped by
concern: each environment variable, file key, init argument and CLI flag still sets the same
value, now held by its group (``settings.processor.max_batch``) and still readable under its
flat name (``settings.max_batch``, the compatibility surface)."""

from __future__ import annotations

import importlib
import pkgutil
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

import ledger_lab.cli
import ledger_stream.cli
from ledger_stream.cli.main import main
from ledger_stream.config import Settings, load_settings
from ledger_stream.settings import FLAT_ROUTES

# Frozen from the flat Settings the groups replaced (every one of its 69 fields, checked
# against that code): flat name, where the group holds it, LEDGER_<NAME> text, TOML literal
# of the file key, and the value the flat Settings read from either.
OLD_SETTINGS: list[tuple[str, str, str, str, Any]] = [
    ('kafka_bootstrap', 'connection.bootstrap', 'broker:9092', '"broker:9092"', 'broker:9092'),
    ('kafka_client', 'connection.client',
     '{"ssl.ca.location": "/etc/ca.pem"}', '{ "ssl.ca.location" = "/etc/ca.pem" }',
     {'ssl.ca.location': '/etc/ca.pem'}),
    ('kafka_security_protocol', 'connection.security_protocol',
     'PLAINTEXT', '"PLAINTEXT"',
     'PLAINTEXT'),
    ('kafka_sasl_mechanism', 'connection.sasl_mechanism', 'PLAIN', '"PLAIN"', 'PLAIN'),
    ('kafka_sasl_username', 'connection.sasl_username',
     'v-kafka_sasl_username', '"v-kafka_sasl_username"',
     'v-kafka_sasl_username'),
    ('kafka_sasl_password', 'connection.sasl_password',
     'secret-kafka_sasl_password', '"secret-kafka_sasl_password"',
     'secret-kafka_sasl_password'),
    ('kafka_timeout_s', 'connection.timeout_s', '6.5', '6.5', 6.5),
    ('kafka_startup_wait_s', 'connection.startup_wait_s', '6.5', '6.5', 6.5),
    ('kafka_version', 'local.version', 'v-kafka_version', '"v-kafka_version"', 'v-kafka_version'),
    ('home', 'process.home', '/srv/home', '"/srv/home"', Path('/srv/home')),
    ('jar_cache', 'local.jar_cache', '/srv/jar_cache', '"/srv/jar_cache"', Path('/srv/jar_cache')),
    ('topic_prefix', 'topics.prefix', 'v-topic_prefix', '"v-topic_prefix"', 'v-topic_prefix'),
    ('partitions', 'topics.partitions', '13', '13', 13),
    ('replication_factor', 'topics.replication_factor', '2', '2', 2),
    ('replay_window_ms', 'topics.replay_window_ms', '604800001', '604800001', 604800001),
    ('compaction_margin_ms', 'topics.compaction_margin_ms', '604800001', '604800001', 604800001),
    ('schema_registry_url', 'connection.schema_registry_url',
     'v-schema_registry_url', '"v-schema_registry_url"',
     'v-schema_registry_url'),
    ('consumer_group', 'processor.consumer_group',
     'v-consumer_group', '"v-consumer_group"',
     'v-consumer_group'),
    ('state_dir', 'processor.state_dir',
     '/srv/state_dir', '"/srv/state_dir"',
     Path('/srv/state_dir')),
    ('processing_guarantee', 'processor.processing_guarantee',
     'at-least-once', '"at-least-once"',
     'at-least-once'),
    ('processor_instance_id', 'processor.instance_id',
     'v-processor_instance_id', '"v-processor_instance_id"',
     'v-processor_instance_id'),
    ('max_batch', 'processor.max_batch', '2001', '2001', 2001),
    ('tick_interval_ms', 'processor.tick_interval_ms', '1001', '1001', 1001),
    ('clock_skew_ms', 'processor.clock_skew_ms', '2001', '2001', 2001),
    ('clock_skew_bound_ms', 'processor.clock_skew_bound_ms', '60001', '60001', 60001),
    ('stall_after_ms', 'processor.stall_after_ms', '300001', '300001', 300001),
    ('reconcile_timeout_ms', 'processor.reconcile_timeout_ms', '600001', '600001', 600001),
    ('lag_credit_ms', 'processor.lag_credit_ms', '3600001', '3600001', 3600001),
    ('dev_mode', 'policy.dev_mode', 'true', 'true', True),
    ('session_timeout_ms', 'processor.session_timeout_ms', '10001', '10001', 10001),
    ('group_protocol', 'processor.group_protocol', 'consumer', '"consumer"', 'consumer'),
    ('metrics_port', 'processor.metrics_port', 'off', '"off"', None),
    ('metrics_host', 'process.metrics_host',
     'v-metrics_host', '"v-metrics_host"',
     'v-metrics_host'),
    ('retry_backoff_ms', 'processor.retry_backoff_ms', '1001', '1001', 1001),
    ('max_attempts', 'processor.max_attempts', '6', '6', 6),
    ('connector_name', 'connector.name',
     'v-connector_name', '"v-connector_name"',
     'v-connector_name'),
    ('connector_dsn', 'connector.dsn',
     'secret-connector_dsn', '"secret-connector_dsn"',
     'secret-connector_dsn'),
    ('connector_lease_ms', 'connector.lease_ms', '30001', '30001', 30001),
    ('connector_call_timeout_s', 'connector.call_timeout_s', '11.5', '11.5', 11.5),
    ('connector_record_margin_s', 'connector.record_margin_s', '3.5', '3.5', 3.5),
    ('connector_lookup_delay_s', 'connector.lookup_delay_s', '1.5', '1.5', 1.5),
    ('connector_instance_id', 'connector.instance_id',
     'v-connector_instance_id', '"v-connector_instance_id"',
     'v-connector_instance_id'),
    ('connector_max_in_flight', 'connector.max_in_flight', '65', '65', 65),
    ('connector_fast_path', 'connector.fast_path', 'true', 'true', True),
    ('connector_fast_path_max_age_s', 'connector.fast_path_max_age_s', '61.5', '61.5', 61.5),
    ('connector_lookup_patience_s', 'connector.lookup_patience_s', '31.5', '31.5', 31.5),
    ('connector_metrics_port', 'connector.metrics_port', '9999', '9999', 9999),
    ('view_url', 'view.url', 'v-view_url', '"v-view_url"', 'v-view_url'),
    ('view_key', 'view.key', 'secret-view_key', '"secret-view_key"', 'secret-view_key'),
    ('view_host', 'view.host', 'v-view_host', '"v-view_host"', 'v-view_host'),
    ('view_port', 'view.port', '1234', '1234', 1234),
    ('view_state_dir', 'view.state_dir',
     '/srv/view_state_dir', '"/srv/view_state_dir"',
     Path('/srv/view_state_dir')),
    ('view_timeline', 'view.timeline', 'false', 'false', False),
    ('mcp_tenant', 'mcp.tenant', 'v-mcp_tenant', '"v-mcp_tenant"', 'v-mcp_tenant'),
    ('mcp_effects', 'mcp.effects', 'v-mcp_effects', '"v-mcp_effects"', 'v-mcp_effects'),
    ('mcp_transport', 'mcp.transport', 'http', '"http"', 'http'),
    ('mcp_host', 'mcp.host', 'v-mcp_host', '"v-mcp_host"', 'v-mcp_host'),
    ('mcp_port', 'mcp.port', '1234', '1234', 1234),
    ('api_host', 'gateway.host', 'v-api_host', '"v-api_host"', 'v-api_host'),
    ('api_port', 'gateway.port', '1234', '1234', 1234),
    ('api_keys', 'gateway.keys', 'secret-api_keys', '"secret-api_keys"', 'secret-api_keys'),
    ('api_keys_file', 'gateway.keys_file',
     '/srv/api_keys_file', '"/srv/api_keys_file"',
     Path('/srv/api_keys_file')),
    ('approval_secret', 'policy.secret',
     'secret-approval_secret', '"secret-approval_secret"',
     'secret-approval_secret'),
    ('approval_keys_dir', 'policy.keys_dir',
     '/srv/approval_keys_dir', '"/srv/approval_keys_dir"',
     Path('/srv/approval_keys_dir')),
    ('approval_public_keys', 'policy.public_keys',
     'v-approval_public_keys', '"v-approval_public_keys"',
     'v-approval_public_keys'),
    ('approval_revoked_keys', 'policy.revoked_keys',
     '["refund", "wire"]', '["refund", "wire"]',
     ('refund', 'wire')),
    ('approval_signing_key', 'policy.signing_key',
     '/srv/approval_signing_key', '"/srv/approval_signing_key"',
     Path('/srv/approval_signing_key')),
    ('approval_required_actions', 'policy.required_actions',
     '["refund", "wire"]', '["refund", "wire"]',
     ('refund', 'wire')),
    ('log_level', 'process.log_level', 'debug', '"debug"', 'DEBUG'),
    ('tracing', 'process.tracing', 'otlp', '"otlp"', 'otlp'),
]

# Frozen from the CLI the groups replaced: a command line, the setting its flag sets, and
# the value the flat Settings got.
OLD_FLAGS: list[tuple[list[str], str, Any]] = [
    (["processor", "--bootstrap", "broker:9092"], "kafka_bootstrap", "broker:9092"),
    (["processor", "--home", "/srv/home"], "home", Path("/srv/home")),
    (["processor", "--topic-prefix", "acme"], "topic_prefix", "acme"),
    (["processor", "--log-level", "debug"], "log_level", "DEBUG"),
    (["processor", "--guarantee", "at-least-once"], "processing_guarantee", "at-least-once"),
    (["processor", "--group", "g7"], "consumer_group", "g7"),
    (["processor", "--instance-id", "p7"], "processor_instance_id", "p7"),
    (["processor", "--state-dir", "/srv/state"], "state_dir", Path("/srv/state")),
    (["processor", "--metrics-port", "off"], "metrics_port", None),
    (["processor", "--metrics-port", "9999"], "metrics_port", 9999),
    (["processor", "--metrics-host", "0.0.0.0"], "metrics_host", "0.0.0.0"),
    (["topics", "create", "--partitions", "5"], "partitions", 5),
    (["topics", "create", "--replication-factor", "3"], "replication_factor", 3),
    (["acls", "apply", "--principal", "agent=User:a", "--consumer-group", "g8"],
     "consumer_group", "g8"),
    (["freeze", "refund", "--reason", "r", "--group", "g9"], "consumer_group", "g9"),
    (["inspect", "acme/refund/k1", "--view-url", "http://view:8077"], "view_url",
     "http://view:8077"),
    (["api", "--host", "0.0.0.0"], "api_host", "0.0.0.0"),
    (["api", "--port", "8123"], "api_port", 8123),
    (["api", "--keys", "acme:agent=k"], "api_keys", "acme:agent=k"),
    (["api", "--keys-file", "/srv/keys"], "api_keys_file", Path("/srv/keys")),
    (["api", "--metrics-host", "0.0.0.0"], "metrics_host", "0.0.0.0"),
    (["view", "--host", "0.0.0.0"], "view_host", "0.0.0.0"),
    (["view", "--port", "8124"], "view_port", 8124),
    (["view", "--state-dir", "/srv/view"], "view_state_dir", Path("/srv/view")),
    (["view", "--no-timeline"], "view_timeline", False),
    (["mcp", "--tenant", "acme"], "mcp_tenant", "acme"),
    (["mcp", "--effects", "refund=refund@payments[invoice]"], "mcp_effects",
     "refund=refund@payments[invoice]"),
    (["mcp", "--transport", "http"], "mcp_transport", "http"),
    (["mcp", "--host", "0.0.0.0"], "mcp_host", "0.0.0.0"),
    (["mcp", "--port", "8125"], "mcp_port", 8125),
    *[(["connector", "http", "--base-url", "http://t", *flag], name, value)
      for flag, name, value in [
          (["--name", "payments"], "connector_name", "payments"),
          (["--lease-ms", "4000"], "connector_lease_ms", 4000),
          (["--call-timeout", "3.5"], "connector_call_timeout_s", 3.5),
          (["--record-margin", "1.5"], "connector_record_margin_s", 1.5),
          (["--lookup-delay", "0.5"], "connector_lookup_delay_s", 0.5),
          (["--instance-id", "c1"], "connector_instance_id", "c1"),
          (["--metrics-port", "9998"], "connector_metrics_port", 9998),
          (["--max-in-flight", "8"], "connector_max_in_flight", 8),
          (["--fast-path"], "connector_fast_path", True),
          (["--lookup-patience", "7.5"], "connector_lookup_patience_s", 7.5),
      ]],
    (["connector", "postgres", "--effect-sql", "select 1", "--dsn", "dbname=x"],
     "connector_dsn", "dbname=x"),
]


@pytest.fixture(autouse=True)
def _no_ledger_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the name under test sets anything (a developer's LEDGER_* must not leak in)."""
    import os

    for name in list(os.environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _holds(settings: Settings, name: str, path: str, want: Any) -> None:
    assert _plain(attrgetter(path)(settings)) == want, f"settings.{path} from {name}"
    assert _plain(getattr(settings, name)) == want, f"settings.{name} (flat)"


# Settings added since the groups (each with its own tests): flat name -> where it is held.
NEW_SETTINGS = {"actions": "policy.actions",  # tests/processor/test_action_policy.py
                # tests/sdk/test_receipt_cache.py
                "sdk_receipt_cache": "sdk.receipt_cache",
                "sdk_receipt_cache_size": "sdk.receipt_cache_size",
                "sdk_receipt_cache_ttl_s": "sdk.receipt_cache_ttl_s",
                # tests/processor/test_pregrant_setting.py
                "pregrant_lease_ms": "processor.pregrant_lease_ms",
                # tests/view/test_view_limits.py
                "view_idle_timeout_s": "view.idle_timeout_s",
                "view_max_connections": "view.max_connections"}


def test_the_list_names_every_setting_and_nothing_was_dropped() -> None:
    assert len(OLD_SETTINGS) == 70
    assert {row[0] for row in OLD_SETTINGS} | set(NEW_SETTINGS) == set(FLAT_ROUTES)
    assert {row[0]: row[1] for row in OLD_SETTINGS} | NEW_SETTINGS == {
        flat: f"{group}.{attr}" for flat, (group, attr) in FLAT_ROUTES.items()}


@pytest.mark.parametrize(("name", "path", "env", "toml", "want"), OLD_SETTINGS,
                         ids=[row[0] for row in OLD_SETTINGS])
def test_each_environment_variable_sets_its_setting(
        monkeypatch: pytest.MonkeyPatch, name: str, path: str, env: str, toml: str,
        want: Any) -> None:
    monkeypatch.setenv(f"LEDGER_{name.upper()}", env)
    _holds(Settings(), name, path, want)


@pytest.mark.parametrize(("name", "path", "env", "toml", "want"), OLD_SETTINGS,
                         ids=[row[0] for row in OLD_SETTINGS])
def test_each_file_key_sets_its_setting(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, path: str, env: str,
        toml: str, want: Any) -> None:
    config = tmp_path / "ledger.toml"
    config.write_text(f"{name} = {toml}\n")
    monkeypatch.setenv("LEDGER_CONFIG", str(config))
    _holds(Settings(), name, path, want)


@pytest.mark.parametrize(("name", "path", "env", "toml", "want"), OLD_SETTINGS,
                         ids=[row[0] for row in OLD_SETTINGS])
def test_each_init_argument_and_copy_update_sets_its_setting(
        name: str, path: str, env: str, toml: str, want: Any) -> None:
    value = want if isinstance(want, dict | tuple) else env
    given = load_settings(**{name: value})
    _holds(given, name, path, want)
    _holds(Settings().model_copy(update={name: getattr(given, name)}), name, path, want)


class _Built(Exception):
    """Raised by the stand-in for settings_from: the command stops once its settings exist."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings


def _settings_of(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings the command ``argv`` builds from its flags (nothing else runs)."""
    from ledger_stream.cli import common

    real = common.settings_from

    def built(args: Any, **extra: Any) -> Settings:
        raise _Built(real(args, **extra))

    # Every module that binds settings_from, the lab's commands too, all imported before
    # any is patched: one first imported after ``common`` was patched bound the stand-in
    # and kept it after the test, stopping every later command of the session at its
    # settings (five tests of tests/operate failed when run after this file).
    modules = [importlib.import_module(info.name)
               for package in (ledger_stream.cli, ledger_lab.cli)
               for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}.")]
    for module in modules:
        if getattr(module, "settings_from", None) is real:
            monkeypatch.setattr(module, "settings_from", built)
    with pytest.raises(_Built) as caught:
        main(argv)
    return caught.value.settings


@pytest.mark.parametrize(("argv", "name", "want"), OLD_FLAGS,
                         ids=[" ".join(row[0]) for row in OLD_FLAGS])
def test_each_flag_sets_its_setting(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                    name: str, want: Any) -> None:
    group, attr = FLAT_ROUTES[name]
    _holds(_settings_of(argv, monkeypatch), name, f"{group}.{attr}", want)


def test_a_flag_beats_the_environment_which_beats_the_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "ledger.toml"
    config.write_text("max_batch = 10\ntick_interval_ms = 20\nclock_skew_ms = 30\n")
    monkeypatch.setenv("LEDGER_CONFIG", str(config))
    monkeypatch.setenv("LEDGER_MAX_BATCH", "11")
    monkeypatch.setenv("LEDGER_TICK_INTERVAL_MS", "21")
    settings = load_settings(max_batch=12)
    assert (settings.processor.max_batch, settings.processor.tick_interval_ms,
            settings.processor.clock_skew_ms) == (12, 21, 30)


def test_groups_and_the_flat_surface_are_read_only() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.processor.max_batch = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.max_batch = 3
    assert settings.processor.max_batch == 2_000


def test_an_invalid_value_is_refused_under_its_flat_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_CONNECTOR_LEASE_MS", "0")
    with pytest.raises(ValidationError, match="connector_lease_ms"):
        Settings()
