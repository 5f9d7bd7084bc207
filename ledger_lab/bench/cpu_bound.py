"""What the processor's loop would cost if its decision, then also its codec, cost nothing.

A bound, not a figure of the product: the CPU harness's workload (``cpu.polls_of``) runs
once through the real batch loop with the decision's calls recorded (``decide``,
``invalid_reason``, ``row_texts_too_large``, and the codec's ``decode`` and ``encode``),
then again on fresh stores with those calls replaced by the recorded answers, handed back
in the order they were asked for. Each replayed pass must produce the recorded pass's
outputs byte for byte (the harness's digest of every topic and the changelog): otherwise
the figure would be of a different loop, and the run stops.

- ``processor``: the real loop, as ``ledger-stream bench --cpu`` measures it.
- ``free decision``: decision and validation answered from the record: what is left is the
  codec, the state overlays and store, the changelog, the produce calls and the loop. No
  compiled decision core can go below it.
- ``free decision and codec``: the codec answered from the record too: the loop, the
  store and the produce calls alone.
- ``echo``: the Avro echo's per-record work (decode, encode, produce), the ratio's base.

µs of the main thread's CPU per record, the fastest of ``passes`` interleaved passes.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ledger_lab.bench import cpu
from ledger_lab.bench.cpu_clients import log_digest
from ledger_lab.bench.workload import WorkloadSpec
from ledger_stream.domain.transitions import Decision
from ledger_stream.processor import step as step_module

DECISION_CALLS = ("decide", "invalid_reason", "row_texts_too_large")
CODEC_CALLS = ("decode", "encode")
ARMS = ("processor", "free decision", "free decision and codec")
Recorded = dict[str, list[Any]]


def _recording(name: str, call: Callable[..., Any], log: list[Any]) -> Callable[..., Any]:
    if name == "decide":
        def decide(state: Any, *args: Any, **kwargs: Any) -> Any:
            decision = call(state, *args, **kwargs)
            # Whether the state came back unchanged: the step writes a row only for a new
            # state object, so the replay must hand back the state it is given then.
            log.append((decision, decision.state is state))
            return decision
        return decide

    def recorded(*args: Any, **kwargs: Any) -> Any:
        answer = call(*args, **kwargs)
        log.append(answer)
        return answer
    return recorded


def _replaying(name: str, log: list[Any]) -> Callable[..., Any]:
    answers: Iterator[Any] = iter(log)
    if name == "decide":
        def decide(state: Any, *args: Any, **kwargs: Any) -> Any:
            decision, unchanged = next(answers)
            return Decision(state, decision.outputs) if unchanged else decision
        return decide

    def replayed(*args: Any, **kwargs: Any) -> Any:
        return next(answers)
    return replayed


def one_pass(polls: cpu.Polls, partitions: int, exactly_once: bool, arm: str,
             recorded: Recorded) -> tuple[float, str]:
    """(µs of this thread's CPU per record, outputs' digest) of one pass of ``arm``; the
    ``processor`` arm fills ``recorded`` with the answers the others replay."""
    records = sum(map(len, polls))
    with tempfile.TemporaryDirectory(prefix="cpu-bound-") as tmp, cpu._collector_tuned():
        run = cpu.ProcessorRun(Path(tmp), partitions, exactly_once)
        try:
            targets: list[tuple[Any, str]] = [(step_module, name) for name in DECISION_CALLS]
            targets += [(run.codec, name) for name in CODEC_CALLS]
            plans: list[Any] = []
            for target, name in targets:
                if arm == "processor":
                    recorded[name] = []
                    plans.append((target, name,
                                  _recording(name, getattr(target, name), recorded[name])))
                elif name in DECISION_CALLS or arm == "free decision and codec":
                    plans.append((target, name, _replaying(name, recorded[name])))

            def work() -> None:
                with cpu._all(plans):
                    for batch in polls:
                        run.batch(batch)

            gc.collect()
            started = time.thread_time()
            work()
            spent = time.thread_time() - started
            return spent / records * 1e6, log_digest(run.log())
        finally:
            run.close()


def measure(spec: WorkloadSpec, partitions: int, passes: int,
            exactly_once: bool = False) -> dict[str, Any]:
    """Every arm's µs per record (fastest of ``passes``), checked to give one digest."""
    polls = cpu.polls_of(spec, partitions)
    records = sum(map(len, polls))
    seen: dict[str, list[float]] = {arm: [] for arm in (*ARMS, "echo")}
    digests: set[str] = set()
    for _ in range(passes):  # interleaved: a disturbance spreads over every arm
        recorded: Recorded = {}
        for arm in ARMS:
            us, digest = one_pass(polls, partitions, exactly_once, arm, recorded)
            seen[arm].append(us)
            digests.add(digest)
        seen["echo"].append(cpu.echo_pass(polls) / records * 1e6)
    if len(digests) != 1:
        raise RuntimeError(f"a replayed pass changed the outputs: {sorted(digests)}")
    result: dict[str, Any] = {"records": records, "partitions": partitions,
                              "passes": passes, "exactly_once": exactly_once,
                              "digest": digests.pop()}
    for arm, figures in seen.items():
        result[arm] = {"us": round(min(figures), 2),
                       "passes_us": [round(f, 2) for f in figures]}
    return result


def table(result: dict[str, Any]) -> str:
    echo = result["echo"]["us"]
    rows = ["| µs per record | fastest | / echo |", "|---|---|---|"]
    for arm in (*ARMS, "echo"):
        rows.append(f"| {arm} | {result[arm]['us']:.2f} | {result[arm]['us'] / echo:.2f} |")
    guarantee = "exactly once" if result["exactly_once"] else "at least once"
    return "\n".join(rows) + (f"\n\n{result['records']} records, {guarantee}, fastest of "
                              f"{result['passes']} passes; outputs sha256 "
                              f"{result['digest'][:16]} in every pass")


def main(argv: list[str] | None = None) -> int:
    parser = cpu.harness_parser(__doc__)
    parser.add_argument("--exactly-once", action="store_true")
    args = parser.parse_args(argv)
    if min(args.intents, args.partitions, args.passes) < 1:
        parser.error("--intents, --partitions and --passes must be 1 or more")
    result = measure(WorkloadSpec(args.intents), args.partitions, args.passes,
                     args.exactly_once)
    return cpu.emit(table(result), result, args.out)


if __name__ == "__main__":
    sys.exit(main())
