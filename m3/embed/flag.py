"""BGE-M3 through FlagEmbedding (torch; GPUs), the optional extra ``m3-memory[flagembedding]``.

The model is loaded from a local folder only (a Hugging Face snapshot of
BAAI/bge-m3; ``embed.model_dir``), with the hub switched off. That folder must
hold ``colbert_linear.pt`` and ``sparse_linear.pt`` besides the transformer:
without them FlagEmbedding silently starts the sparse and ColBERT heads from
random weights, so their absence is refused here. The dense vectors equal
bge-m3-lite's fp32 ones, so both store them under the model id ``bge-m3``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from m3.embed.bge_m3 import LocalBgeM3
from m3.errors import EmbedderUnavailable

INSTALL_HINT = 'Install the optional extra: pip install "m3-memory[flagembedding]" (brings torch and transformers<5).'

#: Every entry must be present; a tuple means any one of its names will do.
REQUIRED: tuple[str | tuple[str, ...], ...] = (
    "config.json",
    ("model.safetensors", "pytorch_model.bin"),
    ("tokenizer.json", "sentencepiece.bpe.model"),
    "colbert_linear.pt",
    "sparse_linear.pt",
)


def missing_files(folder: Path) -> list[str]:
    """The required files ``folder`` lacks (``a|b`` when either would do); empty when complete."""
    missing = []
    for entry in REQUIRED:
        names = (entry,) if isinstance(entry, str) else entry
        if not any((folder / name).is_file() for name in names):
            missing.append("|".join(names))
    return missing


def _import_flag_model() -> Any:
    """``FlagEmbedding.BGEM3FlagModel``, after checking that transformers is below 5."""
    try:
        import transformers
    except ImportError as exc:
        raise EmbedderUnavailable("the 'transformers' package is not installed", hint=INSTALL_HINT) from exc
    major = int(str(transformers.__version__).split(".", 1)[0])
    if major >= 5:  # FlagEmbedding 1.4.2 does not import with transformers 5
        raise EmbedderUnavailable(f"FlagEmbedding does not work with transformers {transformers.__version__}",
                                  hint='pip install "transformers<5"')
    try:
        from FlagEmbedding import BGEM3FlagModel
    except ImportError as exc:
        raise EmbedderUnavailable(f"FlagEmbedding cannot be imported: {exc}", hint=INSTALL_HINT) from exc
    return BGEM3FlagModel


class FlagEmbeddingEmbedder(LocalBgeM3):
    """BGE-M3 dense vectors (fp32) computed by FlagEmbedding from ``folder``, a local snapshot of BAAI/bge-m3.

    The folder is checked (:data:`REQUIRED`), then FlagEmbedding imported and the model loaded, on the first
    :meth:`embed` (or :meth:`load`).
    """

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, "bge-m3")

    def _load(self) -> Any:
        missing = missing_files(self._folder)
        if missing:
            raise EmbedderUnavailable(
                f"the BGE-M3 folder {self._folder} lacks {', '.join(missing)}",
                hint="Put a complete local snapshot of BAAI/bge-m3 there (colbert_linear.pt and sparse_linear.pt "
                     "included) or point embed.model_dir at one; m3 never downloads it through FlagEmbedding.",
                details={"dir": str(self._folder), "files": missing},
            )
        flag_model = _import_flag_model()
        # A local folder needs no hub; these make sure a missing piece fails instead of downloading.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            return flag_model(str(self._folder), use_fp16=False)  # its default is fp16; fp32 matches bge-m3-lite
        except Exception as exc:  # torch and transformers raise many unrelated classes
            raise EmbedderUnavailable(f"FlagEmbedding could not load {self._folder}: {exc}",
                                      hint="Check the folder is a complete BAAI/bge-m3 snapshot.",
                                      details={"dir": str(self._folder)}) from exc
