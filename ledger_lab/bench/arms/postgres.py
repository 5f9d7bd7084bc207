"""PostgreSQL arms: the usual home-made alternative, a claim loop on an idempotency table.

Each intent is Avro-decoded with the project's serde, then claimed with ``INSERT ... ON
CONFLICT (key) DO NOTHING RETURNING``; when the key is taken, the original row is read back
and its args hash compared: equal is a duplicate (answered with the original), different
is a conflict. ``pg-naive`` does this on one connection with one commit per intent.
``pg-tuned`` shards keys over several connections (threads), each claiming 500 intents per
transaction with one ``unnest`` insert and one read-back of the taken keys.

The client runs as ``python -m ledger_lab.bench.arms.postgres`` (regenerating the same
workload from its spec, outside the timed part) and prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from ledger_lab.bench.context import ArmResult, BenchContext
from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.workload import WorkloadSpec, generate
from ledger_lab.harness.postgres import PostgresServer
from ledger_stream.domain.events import Intent
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.serde import AvroCodec

TUNED_BATCH = 500
TUNED_CONNECTIONS = 4
CREATE = """CREATE TABLE {table} (key text PRIMARY KEY, intent_event_id text NOT NULL,
  args_hash text NOT NULL, tenant text NOT NULL, action text NOT NULL, target text NOT NULL,
  args_json text NOT NULL, payload_json text NOT NULL, status text NOT NULL DEFAULT 'accepted',
  created_at timestamptz NOT NULL DEFAULT now())"""
NAIVE_INSERT = """INSERT INTO {table} (key, intent_event_id, args_hash, tenant, action, target,
  args_json, payload_json) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
  ON CONFLICT (key) DO NOTHING RETURNING intent_event_id"""
TUNED_INSERT = """INSERT INTO {table} (key, intent_event_id, args_hash, tenant, action, target,
  args_json, payload_json)
  SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
  %s::text[], %s::text[]) ON CONFLICT (key) DO NOTHING RETURNING intent_event_id"""
READ_BACK = "SELECT key, intent_event_id, args_hash FROM {table} WHERE key = ANY(%s)"
READ_ONE = "SELECT intent_event_id, args_hash FROM {table} WHERE key = %s"


def _row(i: Intent) -> tuple[str, ...]:
    return (i.key, i.event_id, i.args_hash, i.tenant, i.action, i.target, i.args_json,
            i.payload_json)


def claim_naive(dsn: str, table: str, values: list[bytes], counts: dict[str, int]) -> None:
    import psycopg

    codec = AvroCodec()
    insert, read_one = NAIVE_INSERT.format(table=table), READ_ONE.format(table=table)
    with psycopg.connect(dsn) as conn:
        cur = conn.cursor()
        for value in values:
            intent = codec.decode(value, (Intent,))
            if cur.execute(insert, _row(intent), prepare=True).fetchone() is not None:
                counts["fresh"] += 1
            else:
                original = cur.execute(read_one, (intent.key,), prepare=True).fetchone()
                same = original is not None and original[1] == intent.args_hash
                counts["duplicate" if same else "conflict"] += 1
            conn.commit()


def claim_tuned_shard(dsn: str, table: str, values: list[bytes], counts: dict[str, int],
                      lock: threading.Lock) -> None:
    import psycopg

    codec = AvroCodec()
    insert, read_back = TUNED_INSERT.format(table=table), READ_BACK.format(table=table)
    local = {"fresh": 0, "duplicate": 0, "conflict": 0}
    with psycopg.connect(dsn) as conn:
        cur = conn.cursor()
        for at in range(0, len(values), TUNED_BATCH):
            intents = [codec.decode(v, (Intent,)) for v in values[at:at + TUNED_BATCH]]
            columns = [list(column) for column in zip(*map(_row, intents), strict=True)]
            won = {r[0] for r in cur.execute(insert, columns, prepare=True).fetchall()}
            taken = [i for i in intents if i.event_id not in won]
            originals = {k: h for k, _, h in cur.execute(
                read_back, ([i.key for i in taken],), prepare=True).fetchall()} if taken else {}
            conn.commit()
            local["fresh"] += len(intents) - len(taken)
            for i in taken:
                local["duplicate" if originals.get(i.key) == i.args_hash else "conflict"] += 1
    with lock:
        for name, n in local.items():
            counts[name] += n


def run_client(dsn: str, variant: str, spec: WorkloadSpec, limit: int) -> dict[str, Any]:
    """Claim the first ``limit`` intents of the workload; figures as a dict."""
    import psycopg

    workload = generate(spec, limit=limit)
    values = [v for _, v in workload.records]
    table = f"claims_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE.format(table=table))
    counts = {"fresh": 0, "duplicate": 0, "conflict": 0}
    started = time.perf_counter()
    if variant == "naive":
        claim_naive(dsn, table, values, counts)
        connections = 1
    else:
        connections = TUNED_CONNECTIONS
        shards: list[list[bytes]] = [[] for _ in range(connections)]
        for key, value in workload.records:
            shards[partition_for(key, connections)].append(value)
        lock = threading.Lock()
        errors: list[BaseException] = []

        def shard_worker(shard: list[bytes]) -> None:
            try:
                claim_tuned_shard(dsn, table, shard, counts, lock)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=shard_worker, args=(s,)) for s in shards]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"claims_per_s": len(values) / seconds, "seconds": seconds, "intents": len(values),
            "connections": connections, "peak_rss_mb": peak_kib / 1024, **counts}


class PostgresArm:
    repeated = True

    def __init__(self, variant: str) -> None:
        self.variant = variant
        self.name = f"pg-{variant}"

    def run(self, ctx: BenchContext, repetition: int) -> ArmResult:
        server = ctx.shared.get("pg-server")
        if server is None:
            server = ctx.shared["pg-server"] = PostgresServer().start()
        limit = len(ctx.workload) if self.variant == "tuned" else min(
            len(ctx.workload), ctx.sizes.pg_naive_intents)
        ctx.progress(self.name, 0, limit)
        spec = ctx.workload.spec
        argv = [sys.executable, "-m", "ledger_lab.bench.arms.postgres", "--dsn", server.dsn,
                "--variant", self.variant, "--limit", str(limit), "--intents",
                str(spec.intents), "--duplicate-share", str(spec.duplicate_share),
                "--conflict-share", str(spec.conflict_share), "--seed", str(spec.seed)]
        if spec.keys is not None:
            argv += ["--keys", str(spec.keys)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise BenchError(f"{self.name} client failed:\n{done.stderr[-3000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        ctx.progress(self.name, limit, limit)
        expected = ctx.workload.counts(limit)
        got = {k: figures[k] for k in expected}
        if got != expected:
            raise BenchError(f"{self.name} decided {got}, the workload holds {expected}")
        return ArmResult(self.name, repetition,
                         {"claims_per_s": figures["claims_per_s"], "seconds": figures["seconds"]},
                         figures["peak_rss_mb"],
                         {"intents": limit, "connections": figures["connections"],
                          "batch": TUNED_BATCH if self.variant == "tuned" else 1,
                          "postgresql": server.version, **got})


def main() -> None:
    parser = argparse.ArgumentParser(description="PostgreSQL claim-loop client")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--variant", choices=("naive", "tuned"), required=True)
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--intents", type=int, required=True)
    parser.add_argument("--keys", type=int)
    parser.add_argument("--duplicate-share", type=float, required=True)
    parser.add_argument("--conflict-share", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    a = parser.parse_args()
    spec = WorkloadSpec(a.intents, a.duplicate_share, a.conflict_share, a.keys, a.seed)
    print(json.dumps(run_client(a.dsn, a.variant, spec, a.limit)))


if __name__ == "__main__":
    main()
