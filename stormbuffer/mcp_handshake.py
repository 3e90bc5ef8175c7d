"""The start of a ``stormbuffer-mcp`` session: everything read before ``initialize``.

rmcp's server (2.1, ``serve_server``) answers ``ping`` while it waits for
``initialize``; any other message read first (a request, a notification, a
response) fails the handshake, and Stormbuffer's ``main`` then exits 1 with
"could not start the stdio adapter": that message gets no answer and nothing
after it is read.  Stdin closing first fails the same way.  Lines that hold no
message at all never reach the handshake: they are answered as they are after
it (rmcp answers the well-formed ones -32600 and drops the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from memstrata.mcp_server.jsonrpc import INVALID_REQUEST, Batch, Incoming, Reply, error_response


def handshake(lines: Iterator[Incoming], *, refuse: Callable[[Any], dict | None],
              answer: Callable[[Any], dict | None], write: Callable[[Any], bool]) -> bool:
    """Consume ``lines`` up to and including ``initialize``; True when it was answered.

    ``refuse`` gives the -32600 answer of a value that is no JSON-RPC message
    (else None); ``answer`` handles one message (ping, initialize); ``write``
    sends a reply.
    """
    for incoming in lines:
        if incoming is None:
            continue
        if isinstance(incoming, Reply):
            write(incoming.payload)
            continue
        if isinstance(incoming, Batch):
            # rmcp reads no batches: an array is well-formed JSON that is no message.
            write(error_response(None, INVALID_REQUEST, "Invalid request"))
            continue
        refused = refuse(incoming.value)
        if refused is not None:
            write(refused)
            continue
        msg = incoming.value
        method = msg.get("method")
        if "id" not in msg or method not in ("ping", "initialize"):
            return False
        reply = answer(msg)
        if reply is not None and not write(reply):
            return False
        if method == "initialize":
            return True
    return False



__all__ = ["handshake"]
