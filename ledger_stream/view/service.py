"""``ledger-stream view`` as a process: the follower and its HTTP server until SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from types import FrameType

from ledger_stream.access import metrics_open, serving_keys
from ledger_stream.config import Settings
from ledger_stream.history.reader import ROLES
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.layout import check_roles
from ledger_stream.kafka.reach import StopRequested, wait_for_kafka
from ledger_stream.logs import log_fields
from ledger_stream.serde import make_codec
from ledger_stream.view.follower import ReceiptView
from ledger_stream.view.history import HistoryView
from ledger_stream.view.server import make_server, serve_in_thread
from ledger_stream.view.store import ViewStore

logger = logging.getLogger(__name__)


def run_view(settings: Settings, no_auth: bool = False) -> None:
    """Serve the receipts view until SIGTERM or SIGINT, to the gateway's tenant API keys
    (``no_auth``: to anyone on this host). Raises ServingRefused, StoreError or
    KafkaException (one line) when it cannot start."""
    keys = serving_keys(settings, no_auth=no_auth, host=settings.view.host,
                        surface="the view")
    bootstrap = resolve_bootstrap(settings)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    if not wait_for_kafka(bootstrap, "view", stop, attempt_s=settings.connection.timeout_s):
        return
    followed = ["receipts", *(ROLES if settings.view.timeline else ())]
    # Raises LayoutRefused (a KafkaSetupError) at another count than the state's.
    try:
        check_roles(bootstrap, settings.topic("changelog"),
                    sorted({settings.topic(role) for role in followed}),
                    settings.connection.timeout_s, wait_s=settings.connection.startup_wait_s,
                    stop=stop)
    except StopRequested:  # SIGTERM while the check waited for the cluster
        logger.info("view stopped while waiting for Kafka at start-up")
        return
    store = ViewStore(settings.resolved_view_dir / settings.topics.prefix)
    codec = make_codec(settings.connection.schema_registry_url)
    view: ReceiptView | None = None
    timeline: HistoryView | None = None
    try:
        view = ReceiptView(bootstrap, settings.topic("receipts"), store, close_store=False)
        if settings.view.timeline:
            timeline = HistoryView(bootstrap, {role: settings.topic(role) for role in ROLES},
                                   store, codec)
        server = make_server(view, codec, settings.view.host, settings.view.port, timeline,
                             keys=keys, metrics_open=metrics_open(settings),
                             idle_timeout_s=settings.view.idle_timeout_s,
                             max_connections=settings.view.max_connections)
    except BaseException:
        for follower in (view, timeline):
            if follower is not None:
                follower.close()
        store.close()
        raise
    view.start()
    if timeline is not None:
        timeline.start()
    serve_in_thread(server)
    logger.info("view serving", extra=log_fields(
        instance=f"{socket.gethostname()}-{os.getpid()}",
        url=f"http://{settings.view.host}:{server.server_port}", topic=view.topic,
        partitions=view.partitions, timeline=timeline is not None, api_keys=keys is not None,
        state_dir=str(store.path)))
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
        view.close()
        if timeline is not None:
            timeline.close()
        if not (view.busy or (timeline is not None and timeline.busy)):
            store.close()  # never under a thread still inside it: the exit closes it then
        logger.info("view stopped", extra=log_fields(positions=view.positions()))
