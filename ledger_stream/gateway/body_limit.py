"""A bound on a request's body, enforced before anything reads it.

FastAPI reads and parses a request's whole body before any dependency runs, the API key
check included: without a bound, anyone who can reach the gateway could make it hold any
number of bytes (a 400 MB body took it from 83 MB to 1.3 GB resident). ``BodyLimit`` sits
ahead of routing and answers 413 (one line of JSON, then the connection closes) for a body
that declares more than ``MAX_BODY_BYTES`` in ``Content-Length``, and for any body once more
than that has arrived, whatever its headers said: the application never sees more.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# An intent's args and payload take at most ROW_TEXTS_MAX (900,000) bytes in its key's row
# (state/rows.py), which holds them as UTF-8. A client's JSON encoder may escape every
# character that is not ASCII (Python's json.dumps does by default): three times the bytes
# (an emoji, 4 in UTF-8, is \ud83d\ude00, 12), so 2.7 MB for the largest args the ledger
# takes. 8 MiB is room for that, the other fields and an encoder's indentation.
MAX_BODY_BYTES = 8 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: 413 for a request body larger than ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await too_large(send, self.limit)
            return
        # A declared length within the bound proves nothing: a request with both
        # Content-Length and Transfer-Encoding: chunked is read as chunked (h11), and then
        # as long as the client sends. So count what arrives, whatever the headers said, and
        # keep it for the application, which reads it only once all of it came within the
        # bound.
        held: list[Message] = []
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await too_large(send, self.limit)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:  # the server refuses it before the application sees it
                return None
    return None


async def too_large(send: Send, limit: int) -> None:
    """The 413 answer, with ``Connection: close``: the server then reads nothing more of
    the body, and closes the connection."""
    body = json.dumps({"detail": f"the request body is larger than {limit} bytes, the "
                       "most the gateway reads"}).encode("utf-8")
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
