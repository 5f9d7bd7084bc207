"""What every settings group shares: frozen, typed, and each field's one flat name.

A group's fields keep the flat names the ledger has always read (``LEDGER_CONNECTOR_LEASE_MS``,
``--lease-ms``, the file key ``connector_lease_ms``) as their aliases: the flat name is the
group's prefix plus the field's name, unless the group names it otherwise (``flat_config``).
An invalid value is reported under the name it was given by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

DAY_MS = 24 * 3600 * 1000

# Upper bounds of the numeric settings, where a larger value passes validation and fails
# later (docs/operations.md, "Settings"):
# A duration in milliseconds: the processor adds one or two of them (a window and a margin,
# a lease and the skew) to a clock reading, and every such sum is an Avro long and a Kafka
# config long (2**63 - 1 at most); 2**60 ms is over 36 million years.
MAX_MS = 2**60
# An attempt number is an Avro int on every attempt's record.
MAX_ATTEMPTS = 2**31 - 1


def flat_config(prefix: str = "", /, **names: str) -> ConfigDict:
    """A group's model config: frozen, unknown names refused, each field's alias its flat
    name, ``prefix`` + the field's name unless ``names`` maps the field to another."""
    return ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True,
                      alias_generator=lambda field: names.get(field, prefix + field),
                      validate_by_name=True, validate_by_alias=True)


class SettingsGroup(BaseModel):
    """One concern's settings. Immutable; an unknown name is refused. Built from flat names
    (``Settings`` routes each to its group) or from the fields' own names."""

    model_config = flat_config()

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """Flat name -> this group's field, for every field."""
        return {field.alias or name: name for name, field in cls.model_fields.items()}

    @classmethod
    def by_flat_names(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` keyed by flat names (a field's own name is translated)."""
        flat = {name: alias for alias, name in cls.flat_names().items()}
        return {flat.get(key, key): value for key, value in values.items()}


def _port_or_off(value: Any) -> Any:
    """``off`` (or an empty value) is no port at all."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("off", "")):
        return None
    return value


# A TCP port for /metrics: 0 picks a free one (the process logs it), None ("off") serves none.
MetricsPort = Annotated[Annotated[int, Field(ge=0, le=65535)] | None, BeforeValidator(_port_or_off)]
