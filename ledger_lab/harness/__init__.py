"""Real processes for tests and for the falsification matrix: ``Proc`` runs a
``ledger-stream`` subcommand and stops or SIGKILLs it by PID; ``Stack`` runs a processor
and connectors against a Kafka cluster; ``SandboxProc`` runs the payments sandbox;
``AgentWorld`` runs refund-agent workers (from the repository's ``examples/``)."""
