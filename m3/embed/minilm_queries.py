"""Search queries through the offline model with 8-bit products (``embed.query_int8``, on by default).

At 1k-10k memories a search spends most of its time embedding its query (docs/benchmarks.md). The packaged
model keeps int8 weights but turns them back into float32 before its matrix products, so every query streams
about 40 MB of float weights through the processor. From it this module derives, once per machine, a model whose
products run on 8-bit integers (onnxruntime's dynamic quantisation: each product's input quantised on the fly,
the weights per output channel) and otherwise the same: same tokenizer, pooling, truncation and dimension. Its
vectors lie in the same space, within cosine 0.99 of the exact ones, at about 2.5x the speed on one core.

Only queries use it. Every stored vector is computed exactly, so a store never holds two kinds of vector and a
query vector is never stored; the query embedder carries the exact model's id because its vectors are compared
with that model's (the retrieval figures with it: docs/embedder.md).

The derived file is kept under the m3 home (``models/minilm-queries/``, folder 0700, file 0600), named after the
packaged model's sha256 and the converter's versions, and written atomically; without a folder it is derived
once per process. A process that cannot derive it (the ``onnx`` package missing, a failed conversion) embeds its
queries exactly, says so once in its log, and reports ``precision`` "float32".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import tempfile
import threading
from pathlib import Path

from m3.embed import minilm
from m3.errors import EmbedderUnavailable

log = logging.getLogger(__name__)

#: What a query embedder reports when it runs the derived model.
INT8 = "int8"

_derived: dict[str, bytes] = {}
_derive_lock = threading.Lock()


class MiniLMQueries(minilm.MiniLMEmbedder):
    """``exact``'s model with 8-bit products, for search queries; loads (and derives, if needed) on first use."""

    def __init__(self, exact: minilm.MiniLMEmbedder, cache_dir: Path | None = None):
        super().__init__(threads=exact.threads, max_tokens=exact.max_tokens, model_path=exact.model_path)
        self._exact = exact
        self._cache_dir = cache_dir
        self.precision = "float32"  # until the derived model is loaded

    def for_queries(self, cache_dir: Path | None = None) -> minilm.MiniLMEmbedder:
        return self

    def _load_runtime(self) -> minilm._Runtime:
        try:
            model = derived_model(self.model_path, self._cache_dir)
            session = minilm._load_session(model, self.threads)
        except (ImportError, EmbedderUnavailable, OSError, ValueError) as exc:
            log.warning("search queries embed exactly: the 8-bit query model is not available (%s)", exc)
            return self._exact._get_runtime()
        self.precision = INT8
        return minilm._Runtime(tokenizer=minilm.verified_tokenizer(self.max_tokens), session=session)


def derived_model(source: Path, cache_dir: Path | None) -> bytes:
    """The serialised 8-bit model derived from ``source``, read from ``cache_dir`` when it holds it intact, else
    derived now (``source`` verified against :data:`minilm.MODEL_SHA256` first) and kept there. The kept file's
    name carries that digest and its own digest lies beside it, so reading it back needs no pass over ``source``.

    Raises:
        ImportError: the ``onnx`` package (the converter's) is not installed.
        EmbedderUnavailable: ``source`` does not match its pinned sha256 (when deriving).
    """
    name = _file_name()
    with _derive_lock:
        found = _derived.get(name)
        if found is None:
            found = _read(cache_dir / name) if cache_dir is not None else None
            if found is None:
                minilm._verify_sha256(source, minilm.MODEL_SHA256, minilm.MODEL_DISTRIBUTION)
                found = _derive(source)
                if cache_dir is not None:
                    _keep(cache_dir, name, found)
            _derived[name] = found
        return found


def _file_name() -> str:
    """The derived file's name: what it is derived from and with (another converter may write other bytes).

    Raises:
        ImportError: the ``onnx`` package is not installed (its version is read from its metadata: importing it
            costs 0.8 s, which a process that finds the model kept need not pay).
    """
    import onnxruntime

    onnx = importlib.metadata.version("onnx")  # PackageNotFoundError is an ImportError
    return f"minilm-{minilm.MODEL_SHA256[:16]}-ort{onnxruntime.__version__}-onnx{onnx}-int8.onnx"


def _read(path: Path) -> bytes | None:
    """The kept model, if it is there and matches the digest written beside it (else it is derived again)."""
    try:
        model, digest = path.read_bytes(), path.with_suffix(".sha256").read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return model if hashlib.sha256(model).hexdigest() == digest else None


def _derive(source: Path) -> bytes:
    """Fold the dequantised weights into float32 constants (onnxruntime's basic optimisation), then quantise every
    product dynamically, weights per output channel (per tensor moved vectors to cosine 0.95; per channel 0.99)."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="m3-query-model-") as tmp:
        folded, quantised = Path(tmp) / "folded.onnx", Path(tmp) / "int8.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        root = logging.getLogger()
        root.addFilter(_converter_advice)
        try:
            quantize_dynamic(folded, quantised, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(_converter_advice)
        return quantised.read_bytes()


def _converter_advice(record: logging.LogRecord) -> bool:
    """Drop the converter's own advice (it logs, on the root logger, a warning to pre-process image models)."""
    return record.levelno >= logging.ERROR or "onnxruntime" not in record.pathname.replace("\\", "/")


def _keep(cache_dir: Path, name: str, model: bytes) -> None:
    """Write ``model`` and its digest into ``cache_dir`` atomically, owner-only; a failure only costs the next
    process a conversion."""
    target = cache_dir / name
    try:
        for folder in reversed([cache_dir, *cache_dir.parents]):  # every folder m3 makes is 0700 (parents too)
            if not folder.exists():
                folder.mkdir(mode=0o700, exist_ok=True)
        _write_atomically(target.with_suffix(".sha256"), hashlib.sha256(model).hexdigest().encode("ascii"))
        _write_atomically(target, model)
    except OSError as exc:
        log.warning("could not keep the 8-bit query model in %s: %s", cache_dir, exc)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # created 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
