"""Search queries through MiniLM with 8-bit products: the same space as the exact model, derived once and kept."""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from m3.embed import minilm_queries
from m3.embed.base import Embedder
from m3.embed.minilm import MiniLMEmbedder

TEXTS = [
    "What is the name of my cat?",
    "By the way, my cat's name is Luna, and she has been such a sweetie.",
    "How many days did I spend in Japan and Chicago in total?",
    "Grüße aus München — ça va? 東京で会いましょう",
    "",
    "word " * 400,  # beyond the 256 tokens the model truncates at
]


@pytest.fixture(scope="module")
def exact() -> MiniLMEmbedder:
    model = MiniLMEmbedder(threads=1)
    model.load()
    return model


def test_query_vectors_are_unit_rows_within_cosine_0_98_of_the_exact_ones(exact: MiniLMEmbedder,
                                                                            tmp_path: Path) -> None:
    queries = exact.for_queries(tmp_path / "models")
    fast, slow = queries.embed(TEXTS), exact.embed(TEXTS)
    assert fast.dtype == np.float32 and fast.shape == (len(TEXTS), 384) and not np.isnan(fast).any()
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, rtol=1e-5)
    cosines = np.sum(fast * slow, axis=1)
    assert cosines.min() >= 0.98, cosines
    assert not np.array_equal(fast, slow)  # the products really ran in 8 bits


def test_the_query_variant_keeps_the_model_id_and_says_int8_once_loaded(exact: MiniLMEmbedder,
                                                                        tmp_path: Path) -> None:
    queries = exact.for_queries(tmp_path / "models")
    assert isinstance(queries, Embedder) and queries.model_id == exact.model_id and queries.dim == exact.dim
    assert queries.precision == "float32" and exact.precision == "float32"
    queries.load()
    assert queries.precision == "int8" and queries.for_queries() is queries


def test_the_derived_model_is_kept_owner_only_and_read_back_without_deriving_it_again(
        exact: MiniLMEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models" / "minilm-queries"
    monkeypatch.setattr(minilm_queries, "_derived", {})
    model = minilm_queries.derived_model(exact.model_path, folder)
    [kept] = folder.glob("*.onnx")
    assert kept.read_bytes() == model and kept.stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == folder.parent.stat().st_mode & 0o777 == 0o700
    assert not list(folder.glob(".tmp-*"))
    written = kept.stat().st_mtime_ns
    monkeypatch.setattr(minilm_queries, "_derived", {})  # as a new process
    assert minilm_queries.derived_model(exact.model_path, folder) == model
    assert kept.stat().st_mtime_ns == written


def test_a_damaged_kept_model_is_derived_again(exact: MiniLMEmbedder, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models"
    monkeypatch.setattr(minilm_queries, "_derived", {})
    model = minilm_queries.derived_model(exact.model_path, folder)
    [kept] = folder.glob("*.onnx")
    kept.write_bytes(model[: len(model) // 2])
    monkeypatch.setattr(minilm_queries, "_derived", {})
    assert minilm_queries.derived_model(exact.model_path, folder) == model
    assert kept.read_bytes() == model


def test_without_the_converter_queries_embed_exactly_and_the_log_says_why(
        exact: MiniLMEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(minilm_queries, "_derived", {})
    # As where the onnx package is not installed: no module, and no metadata to read its version from.
    monkeypatch.setitem(sys.modules, "onnx", None)
    installed = importlib.metadata.version

    def version(name: str) -> str:
        if name == "onnx":
            raise importlib.metadata.PackageNotFoundError(name)
        return installed(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    queries = exact.for_queries(tmp_path / "models")
    with caplog.at_level(logging.WARNING, logger="m3.embed.minilm_queries"):
        vectors = queries.embed(TEXTS[:2])
    assert np.array_equal(vectors, exact.embed(TEXTS[:2])) and queries.precision == "float32"
    assert "search queries embed exactly" in caplog.text
    assert not (tmp_path / "models").exists()


def test_searchers_asking_for_one_folder_share_one_query_variant(exact: MiniLMEmbedder, tmp_path: Path) -> None:
    first = exact.for_queries(tmp_path / "a")
    assert exact.for_queries(tmp_path / "a") is first
    assert exact.for_queries(tmp_path / "b") is not first
