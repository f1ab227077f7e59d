"""Downloading a model's files into its folder: ``m3 embedder fetch-model``, the only place m3 downloads weights.

Files, sizes, SHA-256 digests and URLs are bge-m3-lite's pinned ones. Each file
is streamed to ``<name>.part`` (an interrupted download resumes from there),
checked for size and digest, then renamed into place, so the folder never holds
a file that looks complete but is not. Files already complete are skipped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import httpx2 as httpx

from m3.embed import bge_m3
from m3.embed.base import file_sha256
from m3.errors import DownloadFailed, InvalidArgument

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
CHUNK = 1 << 20


def fetch_model(model: str, folder: Path, *, progress: TextIO | None = None) -> dict[str, Any]:
    """Download what ``folder`` lacks of ``model``; return ``{model, dir, downloaded, present, bytes}``.

    Raises:
        InvalidArgument: ``model`` is not one of :data:`m3.embed.bge_m3.MODELS`.
        EmbedderUnavailable: bge-m3-lite is not installed.
        DownloadFailed: the network or the server failed, or a file arrived with the wrong size or
            digest; ``details.files`` lists what is still missing. What was fetched so far is kept.
    """
    if model not in bge_m3.MODELS:
        raise InvalidArgument(f"m3 cannot fetch {model!r}", hint=f"Fetchable models: {', '.join(bge_m3.MODELS)}.")
    from bge_m3_lite import hub

    folder.mkdir(parents=True, exist_ok=True)
    problems = {p.name for p in bge_m3.check_files(folder, model)}
    todo = [remote for remote in bge_m3.required_files(model) if remote.name in problems]
    bar = Progress(progress, _bytes_bar, sum(int(r.size) for r in todo))
    done: list[str] = []
    with httpx.Client(timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S), follow_redirects=True,
                      headers={"User-Agent": "m3-memory"}) as client:
        for remote in todo:
            try:
                _download(client, hub.file_url(remote), remote, folder, bar)
            except (httpx.HTTPError, OSError, _Mismatch) as exc:
                missing = [r.name for r in todo if r.name not in done]
                raise DownloadFailed(f"downloading {remote.name} for {model} failed: {_reason(exc)}",
                                     details={"dir": str(folder), "files": missing,
                                              "url": hub.file_url(remote)}) from None
            done.append(remote.name)
    bar.close()
    present = [r.name for r in bge_m3.required_files(model) if r.name not in done]
    return {"model": model, "dir": str(folder), "downloaded": done, "present": present,
            "bytes": bar.total}


class _Mismatch(Exception):
    """A downloaded file whose size or digest is not the pinned one."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url.host}"
    return f"{type(exc).__name__}: {exc}"


def _download(client: httpx.Client, url: str, remote: Any, folder: Path, bar: Progress) -> None:
    dest = folder / remote.name
    part = folder / (remote.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    if offset > remote.size:
        part.unlink()
        offset = 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    bar.update(bar.done + offset, bar.total)
    if offset < remote.size:
        with client.stream("GET", url, headers=headers) as response:
            response.raise_for_status()
            if offset and response.status_code != 206:  # the server ignored the range: start over
                bar.update(bar.done - offset, bar.total)
                offset = 0
            with part.open("ab" if offset else "wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
                    bar.update(bar.done + len(chunk), bar.total)
    _verify(part, remote)
    os.replace(part, dest)


def _verify(path: Path, remote: Any) -> None:
    size = path.stat().st_size
    if size != remote.size:
        raise _Mismatch(f"{remote.name} has {size} bytes, expected {remote.size}")
    if remote.sha256 and file_sha256(path) != remote.sha256:
        path.unlink()
        raise _Mismatch(f"{remote.name} does not match its pinned SHA-256 (removed; run again)")


class Progress:
    """A one-line progress display: redrawn in place on a terminal (at most every 0.2 s), a line per 10 %
    otherwise; ``render(done, total, seconds)`` gives the text. ``fetch-model`` and ``reembed`` draw with it."""

    def __init__(self, stream: TextIO | None, render: Callable[[int, int, float], str], total: int = 0) -> None:
        self._stream = stream
        self._render = render
        self._tty = bool(stream is not None and stream.isatty())
        self._start = time.monotonic()
        self._last_tenth = -1
        self._last_draw = 0.0
        self.done, self.total = 0, total

    def update(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self._stream is None or total <= 0:
            return
        now, tenth = time.monotonic(), done * 10 // total
        if self._tty and now - self._last_draw >= 0.2:
            self._draw("\r", "")
            self._last_draw = now
        elif not self._tty and tenth != self._last_tenth:
            self._draw("", "\n")
        self._last_tenth = tenth

    def close(self) -> None:
        if self._stream is not None and self.total > 0 and self._tty:
            self._draw("\r", "\n")

    def _draw(self, prefix: str, suffix: str) -> None:
        assert self._stream is not None
        self._stream.write(prefix + self._render(self.done, self.total, time.monotonic() - self._start) + suffix)
        self._stream.flush()


def _bytes_bar(done: int, total: int, seconds: float) -> str:
    share = min(1.0, done / total)
    filled = int(share * 30)
    return (f"[{'#' * filled}{'.' * (30 - filled)}] {share * 100:5.1f}% {done / (1 << 20):,.0f}/"
            f"{total / (1 << 20):,.0f} MiB {done / max(seconds, 1e-6) / (1 << 20):5.1f} MiB/s")
