"""``Settings``: every group, loaded from flags, environment and file under the flat names.

Precedence, highest first: CLI flags (passed as init arguments), environment variables with
the ``LEDGER_`` prefix, the TOML file named by ``LEDGER_CONFIG`` (or ``--config``), defaults.
This is the only module that reads the environment.

Every source speaks the flat names the ledger has always read (``LEDGER_MAX_BATCH``, the
file key ``max_batch``, ``Settings(max_batch=...)``): they are read through one generated
flat settings class, so an environment variable is parsed exactly as before (a dict or a
tuple as JSON), then each flat name is routed to its group (``settings.processor.max_batch``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import Field, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ledger_stream.settings.config_file import read_config_file
from ledger_stream.settings.connection import ConnectionSettings
from ledger_stream.settings.connector import ConnectorSettings
from ledger_stream.settings.env_names import NESTED, check_environment
from ledger_stream.settings.gateway import GatewaySettings
from ledger_stream.settings.group import SettingsGroup
from ledger_stream.settings.mcp import McpSettings
from ledger_stream.settings.policy import PolicySettings
from ledger_stream.settings.process import LocalKafkaSettings, ProcessSettings
from ledger_stream.settings.processor import ProcessorSettings
from ledger_stream.settings.sdk import SdkSettings
from ledger_stream.settings.topics import TopicSettings
from ledger_stream.settings.view import ViewSettings

ENV_PREFIX = "LEDGER_"

# Attribute of Settings -> its group. The order is the order of --help-like listings.
GROUPS: dict[str, type[SettingsGroup]] = {
    "connection": ConnectionSettings, "topics": TopicSettings, "process": ProcessSettings,
    "local": LocalKafkaSettings, "processor": ProcessorSettings, "connector": ConnectorSettings,
    "view": ViewSettings, "gateway": GatewaySettings, "mcp": McpSettings,
    "policy": PolicySettings, "sdk": SdkSettings,
}


def _flat_routes() -> dict[str, tuple[str, str]]:
    routes: dict[str, tuple[str, str]] = {}
    for group, cls in GROUPS.items():
        for flat, attr in cls.flat_names().items():
            if flat in routes or flat in GROUPS:  # one name, one setting: checked at import
                raise TypeError(f"settings name {flat!r} is used twice")
            routes[flat] = (group, attr)
    return routes


# Flat name (env var without prefix, file key, init argument) -> (group, field).
FLAT_ROUTES: dict[str, tuple[str, str]] = _flat_routes()

_CONFIG = SettingsConfigDict(
    env_prefix=ENV_PREFIX, frozen=True, extra="ignore", env_nested_delimiter=NESTED,
    hide_input_in_errors=True,  # an invalid setting's error never quotes a password
)

# The sources' view of the settings: every field under its flat name, as one class. Never
# instantiated: it tells the environment and file sources which names to read and how
# (a dict or tuple field is JSON in the environment); the groups validate. No alias, no
# default: an alias would drop the LEDGER_ prefix, and a default would hide a group's.
class _Sources(BaseSettings):
    model_config = _CONFIG


_FlatSources: type[BaseSettings] = create_model(  # type: ignore[call-overload]
    "_FlatSources", __base__=_Sources,
    **{flat: (GROUPS[group].model_fields[attr].annotation, None)
       for flat, (group, attr) in FLAT_ROUTES.items()},
)


def _grouped(flat: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """``flat`` with each flat name moved into its group's entry, over ``current``'s groups
    (a group given whole, as a model or a dict; a flat name wins over it)."""
    out = {key: value for key, value in flat.items() if key not in FLAT_ROUTES}
    for name, value in flat.items():
        if name not in FLAT_ROUTES:
            continue
        group = FLAT_ROUTES[name][0]
        entry = out.get(group, current.get(group))
        if isinstance(entry, SettingsGroup):
            entry = entry.model_dump(by_alias=True)
        out[group] = {**GROUPS[group].by_flat_names(entry or {}), name: value}
    return out


class Settings(BaseSettings):
    """Everything a ledger-stream process can be told, one frozen group per concern:
    ``connection`` (Kafka), ``topics``, ``process``, ``local`` (the local broker),
    ``processor``, ``connector``, ``view``, ``gateway``, ``mcp`` and ``policy``.

    Compatibility surface: every flat name of before the groups (``settings.max_batch``,
    ``Settings(max_batch=...)``, ``settings.model_copy(update={"max_batch": ...})``) still
    works: the read-only properties are generated from ``FLAT_ROUTES`` and delegate to the
    groups. New code reads the groups (``settings.processor.max_batch``).
    """

    model_config = _CONFIG

    connection: ConnectionSettings = Field(default_factory=ConnectionSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)
    local: LocalKafkaSettings = Field(default_factory=LocalKafkaSettings)
    processor: ProcessorSettings = Field(default_factory=ProcessorSettings)
    connector: ConnectorSettings = Field(default_factory=ConnectorSettings)
    view: ViewSettings = Field(default_factory=ViewSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    sdk: SdkSettings = Field(default_factory=SdkSettings)

    if TYPE_CHECKING:
        # For the type checker: flat names as init arguments and the generated flat
        # properties (the compatibility surface), beside the groups.
        def __init__(self, **values: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

    @model_validator(mode="before")
    @classmethod
    def _route_flat_names(cls, data: Any) -> Any:
        return _grouped(data, data) if isinstance(data, Mapping) else data

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = init_settings.init_kwargs if isinstance(
            init_settings, InitSettingsSource) else {}
        sources: list[PydanticBaseSettingsSource] = [
            InitSettingsSource(_FlatSources, init_kwargs), EnvSettingsSource(_FlatSources)]
        check_environment(os.environ, FLAT_ROUTES, ENV_PREFIX)  # a typo never leaves a default
        config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
        if config_file:  # named but missing, unreadable or with an unknown name: refused
            sources.append(InitSettingsSource(_FlatSources, read_config_file(
                config_file, FLAT_ROUTES, GROUPS)))
        return tuple(sources)

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """A copy with ``update`` applied: flat names land in their groups (not
        validated, as pydantic's ``model_copy``)."""
        if update:
            update = {key: (self._group_copy(key, value)
                            if key in GROUPS and isinstance(value, dict) else value)
                      for key, value in _grouped(update, {}).items()}
        return super().model_copy(update=update, deep=deep)

    def _group_copy(self, group: str, flat: Mapping[str, Any]) -> SettingsGroup:
        fields = GROUPS[group].flat_names()
        current: SettingsGroup = getattr(self, group)
        return current.model_copy(update={fields.get(key, key): value
                                          for key, value in flat.items()})

    @property
    def resolved_state_dir(self) -> Path:
        return self.processor.state_dir or self.process.home / "state"

    @property
    def resolved_view_dir(self) -> Path:
        return self.view.state_dir or self.process.home / "view"

    def kafka_client_properties(self) -> dict[str, str]:
        """The librdkafka properties every Kafka client of this process gets."""
        return self.connection.client_properties()

    def topic(self, name: str) -> str:
        """Full name of a ledger topic, e.g. ``topic("intents") == "ledger.intents"``."""
        return self.topics.name(name)


def _flat_property(flat: str, group: str, attr: str) -> property:
    def read(settings: Settings) -> Any:
        return getattr(getattr(settings, group), attr)

    read.__name__ = flat
    return property(read, doc=f"``settings.{group}.{attr}`` under its flat name "
                    "(compatibility surface).")


for _flat, (_group, _attr) in FLAT_ROUTES.items():
    setattr(Settings, _flat, _flat_property(_flat, _group, _attr))


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Build settings from flags (``overrides`` that are not None), env and file."""
    if config_file:
        os.environ[f"{ENV_PREFIX}CONFIG"] = config_file
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
