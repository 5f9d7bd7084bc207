"""The libraries a user would pick instead of ledger-stream, each wired as its own
documentation shows, protecting one payment at the payments sandbox.

Every peer takes the business key as its idempotency key, keeps it in a durable store and
sends the payment with the key its documentation says to pass downstream:

- ``effect-ledger`` 0.1.2, SQLite: ``EffectExecutor(path, scope=...).execute(operation_id,
  effect, request, handler)``; the handler sends ``operation.provider_key`` (a UUID the
  claim stores) as the payment's idempotency key.
- ``agent-ledger`` 0.2.1, PostgreSQL: ``EffectLedger(EffectLedgerOptions(store=
  PostgresStore(pool)))`` and ``run(ToolCall(..., idempotency_keys=["key"]), handler)``, the
  table from its ``SCHEMA_SQL``, a psycopg ``AsyncConnectionPool``.
- ``idemkit`` 1.0.2, PostgreSQL: ``@idempotent(backend=PostgresBackend.from_url(url),
  config=MethodConfig(key_fields=["key"]))`` over an async function, the table from
  ``init_pg`` (what ``idemkit init-pg`` runs).
- ``dbos-sqlite`` and ``dbos-postgres``, DBOS 3.4.0: a ``@DBOS.workflow()`` calling a
  ``@DBOS.step()``, started under ``SetWorkflowID(key)`` (the workflow ID is the idempotency
  key, as DBOS documents).

:class:`PeerCall` is what an agent thread calls: ``call(key, body)`` returns the payment or
raises. The async libraries run on one event loop in a thread of their own; the blocking
payment call runs in a thread pool sized to the agents, as a blocking SDK would be run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import threading
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

PEER_NAMES = ("effect-ledger", "agent-ledger", "idemkit", "dbos-sqlite", "dbos-postgres")
POSTGRES_PEERS = frozenset({"agent-ledger", "idemkit", "dbos-postgres"})


class TargetError(RuntimeError):
    """The payment call failed: an error status, or no answer (the outcome is unknown)."""


class PeerRefused(RuntimeError):
    """The peer answered without a result (an unresolved or failed record)."""


class Target:
    """``POST /v1/payments`` at the sandbox, one keep-alive connection per thread.

    ``per_attempt_keys``: send a new idempotency key on every call (a target that cannot
    deduplicate), for the unknown-outcome runs."""

    def __init__(self, url: str, per_attempt_keys: bool = False) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.per_attempt_keys = per_attempt_keys
        self._local = threading.local()

    def pay(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        sent = f"{key}#{uuid.uuid4().hex[:8]}" if self.per_attempt_keys else key
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self.host, self.port,
                                                                 timeout=30)
        try:
            conn.request("POST", "/v1/payments", json.dumps(body),
                         {"Idempotency-Key": sent, "Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            self._local.conn = None
            raise TargetError(f"no answer from the target: {exc!r}") from exc
        if response.status not in (200, 201):
            raise TargetError(f"target answered {response.status}: {data[:200]!r}")
        return dict(json.loads(data))


class PeerCall(Protocol):
    name: str
    store: str

    def call(self, key: str, body: dict[str, Any]) -> Any: ...

    def state(self, key: str) -> str: ...

    def close(self) -> None: ...


class _Loop:
    """An event loop in a daemon thread, for async libraries called from agent threads."""

    def __init__(self, workers: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = concurrent.futures.ThreadPoolExecutor(max(workers, 1))
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Awaitable of ``fn(*args)`` in the pool (call from the loop)."""
        return self.loop.run_in_executor(self.pool, fn, *args)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.pool.shutdown(wait=False)


class EffectLedgerPeer:
    name, store = "effect-ledger", "SQLite"

    def __init__(self, target: Target, folder: Path, **_: Any) -> None:
        from effect_ledger import EffectExecutor

        self.target = target
        self.executor = EffectExecutor(folder / "effects.sqlite", scope="bench")

    def call(self, key: str, body: dict[str, Any]) -> Any:
        op = self.executor.execute(key, "payments.create", body,
                                   lambda owned: self.target.pay(owned.provider_key, body))
        if op.state != "completed":
            raise PeerRefused(f"{op.state}: {op.response()['next_action']}")
        return op.result

    def state(self, key: str) -> str:
        op = self.executor.get(key)
        return "absent" if op is None else op.state

    def close(self) -> None:
        pass


class AgentLedgerPeer:
    name, store = "agent-ledger", "PostgreSQL"

    def __init__(self, target: Target, dsn: str, agents: int, **_: Any) -> None:
        from agent_ledger import EffectLedger, EffectLedgerOptions
        from agent_ledger.stores.postgres import SCHEMA_SQL, PostgresStore
        from psycopg_pool import AsyncConnectionPool

        self.target, self.aio = target, _Loop(agents)

        async def open_pool() -> Any:
            pool = AsyncConnectionPool(conninfo=dsn, max_size=max(4, agents), open=False)
            await pool.open()
            async with pool.connection() as conn:
                await conn.execute(SCHEMA_SQL)
            return pool

        self.pool = self.aio.run(open_pool())
        self.ledger: Any = EffectLedger(EffectLedgerOptions(store=PostgresStore(pool=self.pool)))

    def _tool_call(self, key: str, body: dict[str, Any]) -> Any:
        from agent_ledger import ToolCall

        return ToolCall(workflow_id="bench", tool="payments.create",
                        args={"key": key, **body}, idempotency_keys=["key"])

    def call(self, key: str, body: dict[str, Any]) -> Any:
        async def handler(_: Any) -> Any:
            return await self.aio.blocking(self.target.pay, key, body)

        return self.aio.run(self.ledger.run(self._tool_call(key, body), handler))

    def state(self, key: str) -> str:
        from agent_ledger import compute_idem_key

        found = self.aio.run(self.ledger.find_by_idem_key(
            compute_idem_key(self._tool_call(key, {}))))
        return "absent" if found is None else str(found.status.value)

    def close(self) -> None:
        self.aio.run(self.pool.close())
        self.aio.close()


class IdemkitPeer:
    name, store = "idemkit", "PostgreSQL"

    def __init__(self, target: Target, dsn: str, agents: int, **_: Any) -> None:
        from idemkit import MethodConfig, PostgresBackend, idempotent
        from idemkit.backends.postgres import init_pg

        self.target, self.aio = target, _Loop(agents)
        url = _postgres_url(dsn)
        self.aio.run(init_pg(url))
        self.backend = PostgresBackend.from_url(url, max_size=max(20, agents))

        @idempotent(backend=self.backend,
                    config=MethodConfig(key_fields=["key"], scope=lambda _: "bench"))
        async def create_payment(*, key: str, body: dict[str, Any]) -> dict[str, Any]:
            return dict(await self.aio.blocking(self.target.pay, key, body))

        self._create = create_payment

    def call(self, key: str, body: dict[str, Any]) -> Any:
        return self.aio.run(self._create(key=key, body=body))

    def state(self, key: str) -> str:
        return "no record kept for a raised call (the claim is released)"

    def close(self) -> None:
        self.aio.run(self.backend.aclose())
        self.aio.close()


class DbosPeer:
    store = ""

    def __init__(self, target: Target, folder: Path, dsn: str = "", **_: Any) -> None:
        from dbos import DBOS, SetWorkflowID

        self.name = "dbos-postgres" if dsn else "dbos-sqlite"
        self.store = "PostgreSQL" if dsn else "SQLite"
        url = _postgres_url(dsn, "postgresql+psycopg") if dsn \
            else f"sqlite:///{folder / 'dbos.sqlite'}"
        self.dbos, self._set_id = DBOS, SetWorkflowID
        DBOS(config={"name": "peers-bench", "system_database_url": url,
                     "log_level": "WARNING"})

        @DBOS.step()
        def payment_step(key: str, body: dict[str, Any]) -> dict[str, Any]:
            return target.pay(key, body)

        @DBOS.workflow()
        def payment_workflow(key: str, body: dict[str, Any]) -> dict[str, Any]:
            return payment_step(key, body)

        self._workflow = payment_workflow
        DBOS.launch()

    def call(self, key: str, body: dict[str, Any]) -> Any:
        with self._set_id(key):
            return self._workflow(key, body)

    def state(self, key: str) -> str:
        status = self.dbos.get_workflow_status(key)
        return "absent" if status is None else str(status.status)

    def close(self) -> None:
        self.dbos.destroy()


def _postgres_url(dsn: str, scheme: str = "postgresql") -> str:
    """``host=H port=P user=U dbname=D`` as a URL (idemkit and DBOS take URLs)."""
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(dsn)
    return f"{scheme}://{p.get('user', 'postgres')}@{p['host']}:{p['port']}/{p['dbname']}"


def open_peer(name: str, target: Target, folder: Path, dsn: str, agents: int) -> PeerCall:
    """The peer ``name`` ready to call; ``dsn``: a database of its own (PostgreSQL peers)."""
    folder.mkdir(parents=True, exist_ok=True)
    if name == "effect-ledger":
        return EffectLedgerPeer(target, folder)
    if name == "agent-ledger":
        return AgentLedgerPeer(target, dsn, agents)
    if name == "idemkit":
        return IdemkitPeer(target, dsn, agents)
    if name == "dbos-sqlite":
        return DbosPeer(target, folder)
    if name == "dbos-postgres":
        return DbosPeer(target, folder, dsn)
    raise ValueError(f"unknown peer {name!r}; one of {', '.join(PEER_NAMES)}")
