"""`m3 embedder fetch-model`: downloads only when asked, fails clearly without a network, keeps no bad file."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bge_m3_lite import hub

from m3.embed.bge_m3 import required_files
from m3.embed.fetch import fetch_model
from m3.errors import DownloadFailed, InvalidArgument
from tests.embedserver import M3, free_port

SIZES = {f.name: int(f.size) for f in hub.ALL_FILES + hub.INT8_FILES + hub.FUSED_FILES}


class WrongBytesHub(BaseHTTPRequestHandler):
    """A stand-in for the model hub over real HTTP: every file has the right size and the wrong bytes."""

    requested: list[str] = []  # noqa: RUF012 - one list per test, reset by the fixture

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        WrongBytesHub.requested.append(name)
        size = SIZES.get(name)
        if size is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        self.wfile.write(b"\x02" * size)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def wrong_hub() -> Iterator[str]:
    WrongBytesHub.requested = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), WrongBytesHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("M3_", "BGE_M3_LITE", "HF_"))}
    env.update({"M3_HOME": str(home), **extra})
    return env


def test_without_a_reachable_hub_fetch_model_fails_with_a_coded_error_listing_what_is_missing(tmp_path: Path) -> None:
    # The machine has no internet; an endpoint on a closed local port fails the same way, without sending
    # anything off the machine.
    env = cli_env(tmp_path / "home", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    done = subprocess.run([M3, "embedder", "fetch-model", "bge-m3"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "download_failed"
    assert "sentencepiece.bpe.model" in error["message"] and "ConnectError" in error["message"]
    assert error["details"]["dir"] == str(tmp_path / "home" / "models" / "bge-m3")
    assert error["details"]["files"] == [f.name for f in required_files("bge-m3")]
    assert "HF_ENDPOINT" in error["hint"]


def test_a_file_that_arrives_with_the_wrong_digest_is_removed_and_reported(
        tmp_path: Path, wrong_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", wrong_hub)
    progress = io.StringIO()
    with pytest.raises(DownloadFailed, match="SHA-256") as raised:
        fetch_model("bge-m3-int8", tmp_path, progress=progress)
    assert WrongBytesHub.requested == ["sentencepiece.bpe.model"]  # stopped at the first bad file
    assert not (tmp_path / "sentencepiece.bpe.model").exists()
    assert not (tmp_path / "sentencepiece.bpe.model.part").exists()
    assert raised.value.details["files"][0] == "sentencepiece.bpe.model"
    assert "%" in progress.getvalue() and "MiB" in progress.getvalue()


def test_only_bge_m3_models_can_be_fetched(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        fetch_model("all-MiniLM-L6-v2-int8", tmp_path)
    done = subprocess.run([M3, "embedder", "fetch-model", "gpt-5"], env=cli_env(tmp_path), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2 and "usage_error" in done.stderr
