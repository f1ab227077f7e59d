"""Clusters of related notes and what the roll-up does with each (pure: numpy over unit vectors, no store).

Clustering (:func:`clusters`) is deterministic star clustering on the cosine graph: the note related to the
most others (cosine above the threshold; ties: the older) is a seed, and its not yet taken neighbours join it,
nearest first, up to ``max_cluster``; a seed with fewer than ``min_cluster - 1`` such neighbours makes no
cluster. Then the next seed, until none is left. Members are ordered most central first (highest mean cosine
to the other members). Each note is in at most one cluster of a run.

Planning (:func:`plan`) compares each cluster with the owner's beliefs:

- all its members already consolidated by one current belief: nothing to do (a rerun writes nothing);
- it shares members with current beliefs: a new version of the belief sharing the most, consolidating the
  cluster and that belief's sources still current (the most central ``max_cluster``), superseding it — only
  when this adds a note;
- it shares none: a new belief;
- fewer than ``min_cluster`` of its members lie outside a set of notes whose belief was undone (without
  ``allow_again``): skipped, so an undone roll-up does not come back; new notes enough for a cluster of their
  own make it a new cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Plan:
    """One belief to write: its sources (positions in the group, most central first) and the belief it
    replaces (None: a new cluster)."""

    members: tuple[int, ...]
    replaces: str | None = None


def clusters(unit: Matrix, min_similarity: float, min_cluster: int, max_cluster: int) -> list[list[int]]:
    """Star clusters of the rows of ``unit`` (unit vectors), each most central first; see the module."""
    n = unit.shape[0]
    if n < max(2, min_cluster):
        return []
    sims = unit @ unit.T
    np.fill_diagonal(sims, -1.0)
    related = sims > min_similarity
    degree = related.sum(axis=1)
    free = np.ones(n, dtype=bool)
    out: list[list[int]] = []
    # Stable sort: among seeds of equal degree the older note (lower position) comes first.
    for seed in np.argsort(-degree, kind="stable"):
        if not free[seed] or degree[seed] + 1 < min_cluster:
            continue
        near = [int(j) for j in np.argsort(-sims[seed], kind="stable") if related[seed, j] and free[j]]
        members = [int(seed), *near[:max(0, max_cluster - 1)]]
        if len(members) < min_cluster:
            continue
        free[members] = False
        out.append(by_centrality(sims, members))
    return out


def by_centrality(sims: Matrix, members: Sequence[int]) -> list[int]:
    """``members`` ordered by mean cosine to the other members, highest first (ties: the older)."""
    idx = list(members)
    if len(idx) < 2:
        return idx
    block = sims[np.ix_(idx, idx)].astype(np.float64)
    np.fill_diagonal(block, 0.0)
    mean = block.sum(axis=1) / (len(idx) - 1)
    return [idx[i] for i in sorted(range(len(idx)), key=lambda i: (-round(float(mean[i]), 6), idx[i]))]


def plan(unit: Matrix, ids: Sequence[str], found: Sequence[Sequence[int]], beliefs: Mapping[str, frozenset[str]],
         declined: Sequence[frozenset[str]], min_cluster: int, max_cluster: int) -> list[Plan]:
    """What to write for the clusters ``found`` (positions in ``ids``); see the module. Deterministic."""
    position = {memory_id: i for i, memory_id in enumerate(ids)}
    sims = unit @ unit.T if len(ids) else unit
    replaced: set[str] = set()
    out: list[Plan] = []
    for members in found:
        chosen = {ids[i] for i in members}
        if any(len(chosen - gone) < min_cluster for gone in declined):
            continue
        if any(chosen <= sources for sources in beliefs.values()):
            continue
        overlap = sorted(((len(chosen & sources), belief) for belief, sources in beliefs.items()
                          if chosen & sources and belief not in replaced), key=lambda t: (-t[0], t[1]))
        if not overlap:
            out.append(Plan(tuple(members)))
            continue
        belief = overlap[0][1]
        kept = [position[s] for s in beliefs[belief] if s in position]  # its sources still current
        union = by_centrality(sims, sorted(set(members) | set(kept)))[:max_cluster]
        if {ids[i] for i in union} <= beliefs[belief]:
            continue  # the cap left out every note the cluster would add
        replaced.add(belief)
        out.append(Plan(tuple(union), replaces=belief))
    return out
