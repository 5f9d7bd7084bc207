"""``ledger-stream replay-plan``: for each checkpoint of a thread, what a replay from it
would ask of the ledger, as a dry run (plan.py judges, run.py replays, history.py reads the
checkpointer)."""

from ledger_stream.replay.plan import CheckpointPlan, Kind, Step, exit_status, judge_replay

__all__ = ["CheckpointPlan", "Kind", "Step", "exit_status", "judge_replay"]
