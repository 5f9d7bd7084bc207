"""Apache Kafka's jars, fetched once from Maven Central into a cache folder.

Layout under the cache: ``kafka-<version>/pom.xml``, ``kafka-<version>/libs/*.jar`` and a
``.complete`` marker that records the pom it was built from. The marker is written only
after Maven succeeded, so an interrupted or failed download is retried from scratch on the
next call; a cache whose marker matches the pom is used without running Maven (or needing it).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger_lab.local_kafka.filelock import exclusive
from ledger_lab.local_kafka.toolchain import require_tool
from ledger_stream.kafka.exceptions import JarFetchError

if TYPE_CHECKING:
    from ledger_stream.config import Settings

# The log4j version Kafka 4.1.x itself resolves to (`mvn dependency:tree`); the broker
# artifact carries no logging backend, so we add log4j-core and the slf4j 1.x binding.
LOG4J_VERSION = "2.24.3"
MARKER = ".complete"
MVN_OUTPUT_TAIL_LINES = 30

POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by ledger-stream: the runtime classpath of a local Apache Kafka broker. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ledger-stream.local</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>{kafka_version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka_version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-api</artifactId>
      <version>{log4j_version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{log4j_version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j_version}</version>
    </dependency>
  </dependencies>
</project>
"""


def jar_cache(settings: Settings) -> Path:
    """Folder that holds one ``kafka-<version>`` subfolder per fetched Kafka version."""
    from ledger_stream.config import shared_jar_cache  # pydantic: not for a parser's help

    return settings.jar_cache or shared_jar_cache()


def ensure_jars(
    home: Path,
    version: str,
    progress: Callable[[str], None] = print,
    log4j_version: str = LOG4J_VERSION,
) -> Path:
    """Return ``home/kafka-<version>/libs`` holding Kafka's runtime classpath.

    Runs Maven only when the completion marker is absent, was written for another pom, or
    the broker jar has gone; every run starts from an empty ``libs``.
    Safe to call from several processes at once (they serialize on a lock file). Raises
    ToolMissingError without Maven, JarFetchError when Maven fails (log tail in the message).
    """
    root = home / f"kafka-{version}"
    libs = root / "libs"
    pom = POM_TEMPLATE.format(kafka_version=version, log4j_version=log4j_version)
    digest = hashlib.sha256(pom.encode()).hexdigest()
    marker = root / MARKER
    if _is_complete(marker, digest, libs, version):
        return libs
    root.mkdir(parents=True, exist_ok=True)
    with exclusive(root / ".lock"):
        if _is_complete(marker, digest, libs, version):  # another process just finished
            return libs
        mvn = require_tool("mvn")
        marker.unlink(missing_ok=True)
        # A copy cut short leaves a truncated jar newer than its source, which Maven would
        # not overwrite: start from an empty folder every time.
        shutil.rmtree(libs, ignore_errors=True)
        (root / "pom.xml").write_text(pom)
        progress(f"fetching Apache Kafka {version} jars from Maven Central (once) into {libs} ...")
        started = time.monotonic()
        _run_maven(mvn, root, libs)
        if not _broker_jar(libs, version).exists():
            raise JarFetchError(f"Maven finished but {libs} holds no kafka_2.13-{version} jar")
        marker.write_text(digest + "\n")
        count = len(list(libs.glob("*.jar")))
        progress(f"fetched {count} jars in {time.monotonic() - started:.0f} s")
    return libs


def _broker_jar(libs: Path, version: str) -> Path:
    return libs / f"kafka_2.13-{version}.jar"


def _is_complete(marker: Path, digest: str, libs: Path, version: str) -> bool:
    """The marker was written for this pom and the broker jar is still there."""
    try:
        return marker.read_text().strip() == digest and _broker_jar(libs, version).exists()
    except FileNotFoundError:
        return False


def _run_maven(mvn: str, root: Path, libs: Path) -> None:
    command = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(root / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={libs}",
    ]
    result = subprocess.run(
        command, cwd=root, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        tail = "\n".join(output[-MVN_OUTPUT_TAIL_LINES:])
        raise JarFetchError(
            f"`mvn dependency:copy-dependencies` failed (exit {result.returncode}) in {root}; "
            f"check network access to Maven Central\n{tail}"
        )
