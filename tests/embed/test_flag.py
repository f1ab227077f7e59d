"""The FlagEmbedding loader (optional extra): its folder check and its clean failures without torch.

torch and FlagEmbedding are not installed here (on PyPI, Linux torch is the multi-GB CUDA build), so
what is tested is the loader up to the import: the local folder layout, the refusal of a snapshot
without the sparse and ColBERT heads, the transformers<5 gate, and the error that says how to install.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
import types
from pathlib import Path

import pytest

from m3.config import load_config
from m3.embed.factory import create_embedder
from m3.embed.flag import FlagEmbeddingEmbedder, missing_files
from m3.errors import EmbedderUnavailable

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
SNAPSHOT = ["config.json", "model.safetensors", "tokenizer.json", "colbert_linear.pt", "sparse_linear.pt"]


def snapshot(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"{}")
    return folder


def test_an_empty_folder_lacks_the_transformer_the_tokenizer_and_both_heads(tmp_path: Path) -> None:
    assert missing_files(tmp_path) == ["config.json", "model.safetensors|pytorch_model.bin",
                                       "tokenizer.json|sentencepiece.bpe.model", "colbert_linear.pt",
                                       "sparse_linear.pt"]


def test_either_weight_format_and_either_tokenizer_file_will_do(tmp_path: Path) -> None:
    folder = snapshot(tmp_path, ["config.json", "pytorch_model.bin", "sentencepiece.bpe.model",
                                 "colbert_linear.pt", "sparse_linear.pt"])
    assert missing_files(folder) == []


def test_a_snapshot_without_the_sparse_and_colbert_heads_is_refused_before_anything_loads(tmp_path: Path) -> None:
    folder = snapshot(tmp_path / "bge-m3", SNAPSHOT[:3])
    model = FlagEmbeddingEmbedder(folder)
    with pytest.raises(EmbedderUnavailable, match=r"colbert_linear\.pt, sparse_linear\.pt") as raised:
        model.embed(["hello"])
    assert raised.value.details["files"] == ["colbert_linear.pt", "sparse_linear.pt"]
    assert "never downloads" in raised.value.hint
    assert not model.loaded


@pytest.mark.skipif(importlib.util.find_spec("FlagEmbedding") is not None,
                    reason="FlagEmbedding is installed: the missing-package error cannot occur")
def test_with_a_complete_folder_but_no_flagembedding_the_error_names_the_extra(tmp_path: Path) -> None:
    model = FlagEmbeddingEmbedder(snapshot(tmp_path, SNAPSHOT))
    with pytest.raises(EmbedderUnavailable) as raised:
        model.load()
    assert 'pip install "m3-memory[flagembedding]"' in raised.value.hint
    assert raised.value.code == "embedder_unavailable"


def test_transformers_5_is_refused_with_the_pin_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    five = types.ModuleType("transformers")
    five.__version__ = "5.0.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", five)
    with pytest.raises(EmbedderUnavailable, match=r"transformers 5\.0\.1") as raised:
        FlagEmbeddingEmbedder(snapshot(tmp_path, SNAPSHOT)).load()
    assert raised.value.hint == 'pip install "transformers<5"'


def test_the_flagembedding_extra_pins_transformers_below_5() -> None:
    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(req.startswith("FlagEmbedding") for req in extras["flagembedding"])
    assert any(req.replace(" ", "").startswith("transformers") and "<5" in req for req in extras["flagembedding"])


def test_the_backend_stores_vectors_as_bge_m3_and_reads_its_folder_from_the_config(m3_home: Path,
                                                                                   tmp_path: Path) -> None:
    env = {"M3_HOME": str(m3_home), "M3_EMBED_BACKEND": "flagembedding"}
    model = create_embedder(load_config(env))
    assert isinstance(model, FlagEmbeddingEmbedder)
    assert (model.model_id, model.dim, model._folder) == ("bge-m3", 1024, m3_home / "models" / "flagembedding")
    mine = create_embedder(load_config(env | {"M3_EMBED_MODEL_DIR": str(tmp_path)}))
    assert isinstance(mine, FlagEmbeddingEmbedder) and mine._folder == tmp_path
