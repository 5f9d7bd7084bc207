"""The external programs the local broker needs, found on PATH or reported as missing."""

from __future__ import annotations

import shutil

from ledger_stream.kafka.exceptions import ToolMissingError

_INSTALL_HINTS = {
    "java": "install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`, "
    "`brew install openjdk@17`)",
    "mvn": "install Apache Maven (e.g. `apt-get install maven`, `brew install maven`); "
    "it is needed once, to fetch the Kafka jars",
}


def require_tool(name: str) -> str:
    """Absolute path of ``name`` on PATH; raises ToolMissingError saying what to install."""
    path = shutil.which(name)
    if path is None:
        hint = _INSTALL_HINTS.get(name, f"install {name}")
        raise ToolMissingError(
            f"`{name}` is not on PATH: {hint}, or point LEDGER_KAFKA_BOOTSTRAP at a running Kafka"
        )
    return path
