"""The chaos soak (`ledger-stream chaos`): a steady load of intents through the whole stack on
a local Kafka cluster while a seeded scheduler kills, pauses and restarts its processes and
arms target faults; then a checker reads the targets' own ledgers and the ledger's topics.

- ``plan``: the seeded fault schedule (pure).
- ``agent``: one agent worker process, submitting through the SDK and journaling.
- ``world``: the cluster, processors, connectors, targets and agents, by PID.
- ``faults``: what each fault kind does to the world, and its heal.
- ``checker``: the verdict from ground truth (targets, topics, agents' journals).
- ``soak``: the run from start to verdict; ``report``: JSON and the summary table.
"""
