"""The agent-side client (``LedgerClient``): its receipt cache."""

from __future__ import annotations

from pydantic import Field

from ledger_stream.settings.group import SettingsGroup, flat_config


class SdkSettings(SettingsGroup):
    """How a ``LedgerClient`` answers a duplicate it already knows settled (flat names
    ``sdk_*``)."""

    model_config = flat_config("sdk_")

    receipt_cache: bool = Field(
        True, description="answer a duplicate of a key this client created and saw succeed "
        "(same arguments, no approval, within sdk_receipt_cache_ttl_s) from the client's "
        "receipt cache at once; the intent is still recorded (false: the ledger answers)")
    receipt_cache_size: int = Field(
        10_000, ge=1, description="settled keys the receipt cache keeps per tenant (least "
        "recently used first out)")
    receipt_cache_ttl_s: float = Field(
        60.0, gt=0, description="how long after its settling a key is answered from the "
        "receipt cache; keep it below the shortest replay window of the actions submitted")
