"""The JSON-RPC peer of the stdio front-end, on real pipes: what it writes once the client has closed its side."""

from __future__ import annotations

import os
import threading
from typing import Any

from m3.gateway.engine.jsonrpc import Inflight, Peer

WAIT_S = 10.0


def test_an_answer_ready_only_after_the_client_closed_stdin_is_never_written() -> None:
    # A call thread still writing while the interpreter shuts down aborts the process (SIGABRT: "could not
    # acquire lock for stdout at interpreter shutdown"), so nothing may be written once serve() has returned.
    started, release = threading.Event(), threading.Event()

    def slow(params: dict[str, Any], inflight: Inflight) -> dict[str, Any]:
        started.set()
        assert release.wait(WAIT_S)
        return {"late": True}

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    with os.fdopen(in_read, "rb") as reader, os.fdopen(out_write, "wb") as writer:
        peer = Peer(reader, writer, handlers={"ping": lambda _p: {}}, slow={"slow": slow}, notified={})
        os.write(in_write, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"slow"}\n')
        os.close(in_write)
        peer.serve()  # returns at end-of-file, with call 2 still running
        assert started.wait(WAIT_S)
        (call,) = [t for t in threading.enumerate() if t.name == "m3-call-2"]  # held by `release` until now
        release.set()
        call.join(WAIT_S)
        assert not call.is_alive()
        peer.notify("notifications/tools/list_changed")
    with os.fdopen(out_read, "rb") as written:
        assert written.read() == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
