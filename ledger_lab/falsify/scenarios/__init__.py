"""The scenarios of the falsification matrix, one function per scenario.

Each takes a :class:`~ledger_lab.falsify.run.Run` (an AgentWorld plus "with the ledger
or bypassing it"), plays the agent's steps with real worker processes, real LangGraph
checkpoints and real SIGKILLs, and returns the run's verdict.
"""
