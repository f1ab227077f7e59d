"""``m3 embedder reembed``: give every memory a vector of the configured model, with progress.

The work is the Embedder actor's ordinary backlog, committed batch by batch (so an interrupted run
loses at most one batch); this command only starts m3, draws the progress on stderr and waits until
the store has switched search to the configured model (docs/embedder.md).
"""

from __future__ import annotations

import threading
import time
from typing import Any, TextIO

from m3.config import Config
from m3.embed.fetch import Progress
from m3.errors import EmbedderUnavailable
from m3.gateway.runtime import running
from m3.protocols.messages.memory import EmbedderInfo, EmbeddingStats

#: Seconds between two looks at the progress.
TICK_S = 0.5


def reembed(config: Config, progress: TextIO | None = None, *, stop: threading.Event | None = None
            ) -> dict[str, Any]:
    """Re-embed the store for the configured model; return a summary once search uses it.

    Args:
        config: The configuration (its ``embed.*`` settings name the model).
        progress: Where to draw progress (stderr for the CLI); None for silence.
        stop: Set it to return early (the work stays resumable).

    Raises:
        EmbedderUnavailable: the configured model cannot embed (nothing is lost; run again once fixed).
    """
    stop = stop or threading.Event()
    started = time.monotonic()
    with running(config, drain_embeddings=False) as svc:
        system = svc.system
        model = system.embedder_backend.model_id
        first = system.searcher.ask(EmbeddingStats(model=model), system.ask_timeout)
        base = first["memories"] - first["pending"]
        bar = Progress(progress, lambda done, total, s: (
            f"re-embedding for {model}: {done}/{total} memories ({100 * done / total:.0f}%), "
            f"{(done - base) / max(s, 1e-6):.1f}/s"))
        while True:
            stats = system.searcher.ask(EmbeddingStats(model=model), system.ask_timeout)
            bar.update(stats["memories"] - stats["pending"], stats["memories"])
            if stats["pending"] == 0 and stats["active_model"] in (model, None):
                break
            info = system.embedder.ask(EmbedderInfo(), system.ask_timeout)
            if info["last_error"] and info["queued"] == 0:
                raise EmbedderUnavailable(f"re-embedding for {model} stopped: {info['last_error']}",
                                          hint="Fix the embedder (see `m3 embedder status`) and run "
                                               "`m3 embedder reembed` again; it continues where it stopped.")
            if stop.wait(TICK_S):
                break
        info = system.embedder.ask(EmbedderInfo(), system.ask_timeout)
        bar.close()
        return {"model": model, "previous_model": first["active_model"], "active_model": stats["active_model"],
                "memories": stats["memories"], "pending": stats["pending"],
                "embedded": info["embedded"], "reused": info["reused"],
                "switched": first["active_model"] not in (model, None) and stats["active_model"] == model,
                "seconds": round(time.monotonic() - started, 3)}
