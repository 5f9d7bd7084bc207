"""Settings grouped by concern, each group a typed frozen model in its own module.

``Settings`` holds them all and loads them from flags, ``LEDGER_*`` environment variables
and a TOML file under the flat names the ledger has always read.
"""

from ledger_stream.settings.config_file import ConfigFileError
from ledger_stream.settings.connection import ConnectionSettings
from ledger_stream.settings.connector import ConnectorSettings
from ledger_stream.settings.gateway import GatewaySettings
from ledger_stream.settings.group import DAY_MS, MetricsPort, SettingsGroup
from ledger_stream.settings.loading import (
    ENV_PREFIX,
    FLAT_ROUTES,
    GROUPS,
    Settings,
    load_settings,
)
from ledger_stream.settings.mcp import McpSettings
from ledger_stream.settings.policy import PolicySettings
from ledger_stream.settings.process import (
    LocalKafkaSettings,
    ProcessSettings,
    default_home,
    shared_jar_cache,
)
from ledger_stream.settings.processor import ProcessorSettings
from ledger_stream.settings.topics import TopicSettings
from ledger_stream.settings.view import ViewSettings

__all__ = [
    "DAY_MS", "ENV_PREFIX", "FLAT_ROUTES", "GROUPS", "ConfigFileError", "ConnectionSettings",
    "ConnectorSettings", "GatewaySettings", "LocalKafkaSettings", "McpSettings", "MetricsPort",
    "PolicySettings", "ProcessSettings", "ProcessorSettings", "Settings", "SettingsGroup",
    "TopicSettings", "ViewSettings", "default_home", "load_settings", "shared_jar_cache",
]
