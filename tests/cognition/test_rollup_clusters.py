"""Star clustering of unit vectors and the plan of what to write for each cluster (pure, deterministic)."""

from __future__ import annotations

import numpy as np

from m3.cognition.rollup_clusters import Plan, by_centrality, clusters, plan

IDS = ["n0", "n1", "n2", "n3", "n4"]


def unit(*rows: list[float]) -> np.ndarray:
    mat = np.asarray(rows, dtype=np.float32)
    return mat / np.linalg.norm(mat, axis=1, keepdims=True)


#: n0..n2 near each other (n1 the most central), n3 near them only a little, n4 apart.
VECTORS = unit([1.0, 0.15, 0.0], [1.0, 0.0, 0.0], [1.0, -0.15, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0])


def test_related_vectors_form_one_cluster_most_central_first_and_the_others_none() -> None:
    assert clusters(VECTORS, 0.9, 3, 12) == [[1, 0, 2]]


def test_fewer_related_vectors_than_min_cluster_form_no_cluster() -> None:
    assert clusters(VECTORS, 0.9, 4, 12) == []
    assert clusters(VECTORS[:2], 0.9, 2, 12) == [[0, 1]]


def test_max_cluster_keeps_the_seed_and_its_nearest_neighbours() -> None:
    # Equal degrees: the older note seeds, its nearest joins; the one left over has no free neighbour.
    assert clusters(VECTORS, 0.9, 2, 2) == [[0, 1]]


def test_centrality_is_the_mean_cosine_to_the_other_members() -> None:
    sims = VECTORS @ VECTORS.T
    assert by_centrality(sims, [0, 2, 1]) == [1, 0, 2]


def test_a_new_cluster_is_planned_as_a_new_belief() -> None:
    assert plan(VECTORS, IDS, [[1, 0, 2]], {}, [], 3, 12) == [Plan((1, 0, 2))]


def test_a_cluster_a_belief_consolidates_already_is_not_planned_again() -> None:
    beliefs = {"b1": frozenset({"n0", "n1", "n2"})}
    assert plan(VECTORS, IDS, [[1, 0, 2]], beliefs, [], 3, 12) == []
    assert plan(VECTORS, IDS, [[1, 0]], beliefs, [], 2, 12) == []


def test_a_grown_cluster_is_a_new_version_of_the_belief_sharing_most_of_it() -> None:
    beliefs = {"b1": frozenset({"n0", "n1"}), "b2": frozenset({"n4"})}
    [grown] = plan(VECTORS, IDS, [[1, 0, 2]], beliefs, [], 3, 12)
    assert grown.replaces == "b1" and set(grown.members) == {0, 1, 2}


def test_a_grown_cluster_keeps_the_beliefs_current_sources_up_to_the_cap() -> None:
    beliefs = {"b1": frozenset({"n0", "n3", "gone"})}  # "gone" is no longer a current note
    [grown] = plan(VECTORS, IDS, [[1, 0, 2]], beliefs, [], 3, 12)
    assert set(grown.members) == {0, 1, 2, 3}
    [capped] = plan(VECTORS, IDS, [[1, 0, 2]], beliefs, [], 3, 3)
    assert len(capped.members) == 3 and 3 not in capped.members


def test_an_undone_cluster_is_skipped_until_new_notes_make_a_cluster_of_their_own() -> None:
    declined = [frozenset({"n0", "n1", "n2"})]
    assert plan(VECTORS, IDS, [[1, 0, 2]], {}, declined, 3, 12) == []
    assert plan(VECTORS, IDS, [[1, 0, 2, 3]], {}, declined, 3, 12) == []  # one new note is not enough
    assert plan(VECTORS, IDS, [[1, 0, 2, 3]], {}, declined, 1, 12) == [Plan((1, 0, 2, 3))]
