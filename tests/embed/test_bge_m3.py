"""The BGE-M3 loader (bge-m3-lite): its folder check, its clean failures, and that it never downloads.

The real weights (0.6-2.6 GB) cannot be fetched here, so what is tested is everything up to the model
itself: the folder layout bge-m3-lite pins (names, sizes, SHA-256 from ``bge_m3_lite.hub``), the
errors a user sees, and that no network connection is even attempted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bge_m3_lite import hub

from m3.config import load_config
from m3.embed import bge_m3
from m3.embed.bge_m3 import BgeM3Embedder, check_files, required_files
from m3.embed.factory import create_embedder
from m3.errors import EmbedderUnavailable

FP32_NAMES = ["sentencepiece.bpe.model", "colbert_linear.pt", "sparse_linear.pt", "model.onnx", "model.onnx_data",
              "Constant_7_attr__value", "model_fused.onnx", "model_fused.onnx_data"]
INT8_NAMES = ["sentencepiece.bpe.model", "colbert_linear.pt", "sparse_linear.pt", "model_int8.onnx",
              "model_int8.onnx_data"]


def test_each_model_id_needs_the_files_bge_m3_lite_pins_for_it() -> None:
    assert [f.name for f in required_files("bge-m3")] == FP32_NAMES
    assert [f.name for f in required_files("bge-m3-int8")] == INT8_NAMES
    assert required_files("bge-m3")[0] is hub.TOKENIZER_FILES[0]
    with pytest.raises(ValueError, match="bge-m3"):
        required_files("bge-m4")


def test_an_empty_folder_lacks_every_file(tmp_path: Path) -> None:
    problems = check_files(tmp_path, "bge-m3-int8")
    assert [(p.name, p.reason) for p in problems] == [(name, "missing") for name in INT8_NAMES]


def test_large_files_are_checked_by_size_and_small_ones_by_digest_and_nothing_is_touched(tmp_path: Path) -> None:
    sizes = {f.name: int(f.size) for f in required_files("bge-m3")}
    for name, size in sizes.items():
        with (tmp_path / name).open("wb") as f:
            if size < bge_m3.HASH_LIMIT and name != "Constant_7_attr__value":
                f.write(b"\x01" * size)  # right size, wrong bytes
            else:
                f.truncate(size)  # zeros, sparse: no disk used
    with (tmp_path / "model_fused.onnx_data").open("r+b") as f:
        f.truncate(sizes["model_fused.onnx_data"] - 1)
    before = sorted((p.name, p.stat().st_size) for p in tmp_path.iterdir())
    problems = {p.name: p.reason for p in check_files(tmp_path, "bge-m3")}
    assert problems == {
        # Under 64 MiB: the pinned SHA-256 must match.
        "sentencepiece.bpe.model": "sha256", "colbert_linear.pt": "sha256", "sparse_linear.pt": "sha256",
        "model.onnx": "sha256", "model_fused.onnx": "sha256",
        # (Constant_7_attr__value really is 65,552 zero bytes: this one is the genuine file.)
        # Larger: the size must match (as bge-m3-lite checks them on load); the 2.2 GB one does.
        "model_fused.onnx_data": "size",
    }
    assert sorted((p.name, p.stat().st_size) for p in tmp_path.iterdir()) == before


def test_a_folder_in_place_of_a_file_counts_as_missing(tmp_path: Path) -> None:
    (tmp_path / "sparse_linear.pt").mkdir()
    assert ("sparse_linear.pt", "missing") in [(p.name, p.reason) for p in check_files(tmp_path, "bge-m3-int8")]


def test_loading_from_an_incomplete_folder_names_the_files_and_the_command_that_fetches_them(tmp_path: Path) -> None:
    model = BgeM3Embedder(tmp_path / "models" / "bge-m3", "bge-m3-int8")
    assert (model.model_id, model.dim, model.loaded) == ("bge-m3-int8", 1024, False)
    with pytest.raises(EmbedderUnavailable) as raised:
        model.embed(["hello"])
    error = raised.value
    assert error.code == "embedder_unavailable"
    assert error.details["files"] == INT8_NAMES
    assert "m3 embedder fetch-model bge-m3-int8" in error.hint
    assert not model.loaded
    assert not (tmp_path / "models").exists()  # nothing created, nothing fetched


NO_NETWORK_PROBE = """
import json, sys
from pathlib import Path
events = []
sys.addaudithook(lambda event, args: events.append(event) if event.startswith(("socket.", "urllib.")) else None)
from m3.embed.bge_m3 import BgeM3Embedder
from m3.errors import EmbedderUnavailable
for model in ("bge-m3", "bge-m3-int8"):
    try:
        BgeM3Embedder(Path(sys.argv[1]), model).embed(["hello"])
    except EmbedderUnavailable as exc:
        print(json.dumps({"model": model, "code": exc.code, "files": len(exc.details["files"])}))
print(json.dumps({"network_events": events}))
"""


def test_a_missing_model_fails_without_attempting_any_network_connection(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("M3_", "BGE_M3_LITE"))}
    done = subprocess.run([sys.executable, "-c", NO_NETWORK_PROBE, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[:2] == [{"model": "bge-m3", "code": "embedder_unavailable", "files": 8},
                         {"model": "bge-m3-int8", "code": "embedder_unavailable", "files": 5}]
    assert lines[2] == {"network_events": []}


def test_without_the_bge_m3_lite_package_the_error_says_how_to_install_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bge_m3_lite", None)  # as if it were not installed
    with pytest.raises(EmbedderUnavailable, match="bge-m3-lite") as raised:
        BgeM3Embedder(tmp_path).load()
    assert "pip install" in raised.value.hint


def test_the_backend_reads_its_folder_from_embed_model_dir_else_the_cache_variable_else_m3_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, m3_home: Path) -> None:
    monkeypatch.delenv("BGE_M3_LITE_CACHE", raising=False)
    env = {"M3_HOME": str(m3_home), "M3_EMBED_BACKEND": "bge-m3"}
    default = create_embedder(load_config(env))
    assert isinstance(default, BgeM3Embedder)
    assert (default._folder, default.model_id) == (m3_home / "models" / "bge-m3", "bge-m3")
    monkeypatch.setenv("BGE_M3_LITE_CACHE", str(tmp_path / "lite-cache"))
    from_cache = create_embedder(load_config(env))
    assert isinstance(from_cache, BgeM3Embedder) and from_cache._folder == tmp_path / "lite-cache"
    explicit = create_embedder(load_config(env | {"M3_EMBED_MODEL_DIR": str(tmp_path / "mine"),
                                                  "M3_EMBED_MODEL": "bge-m3-int8"}))
    assert isinstance(explicit, BgeM3Embedder)
    assert (explicit._folder, explicit.model_id) == (tmp_path / "mine", "bge-m3-int8")
    assert bge_m3.MODELS == ("bge-m3", "bge-m3-int8")
