"""Identical documents collapse into one hit (issue 34): the first of them, "also at" the others.

Two documents are identical when the state store records the same content hash for them
(:func:`indexerd.extract.content_hash`: title and text), whatever their keys and sources: three
packages shipping one changelog are one hit, listing the other two keys.  Pure functions of the
hits and the hashes; the caller reads the hashes (:meth:`indexerd.core.store.DocumentRows.content_hashes`).
"""

from __future__ import annotations

from dataclasses import replace


def collapse(hits: list, hashes: dict[str, str]) -> tuple[list, int]:
    """``hits`` (:class:`indexerd.index.Hit`, best first) with every hit whose content hash an
    earlier hit has folded into that one's ``also_at`` (keys in rank order), ranks counted again
    from 1; and how many hits were folded.  A hit without a known hash stays on its own."""
    first: dict[str, int] = {}
    groups: list[list] = []
    for h in hits:
        digest = hashes.get(h.key)
        if digest is not None and digest in first:
            groups[first[digest]].append(h)
            continue
        if digest is not None:
            first[digest] = len(groups)
        groups.append([h])
    out = [replace(g[0], rank=i, also_at=tuple(x.key for x in g[1:])) for i, g in enumerate(groups, 1)]
    return out, len(hits) - len(out)


def folded_facets(facets: dict[str, list[tuple[str, int]]], folded: list) -> dict[str, list[tuple[str, int]]]:
    """``facets`` (:meth:`indexerd.index.SearchIndex.facets`: per field, ``(value, documents)``
    most first, then by value) without the hits ``folded`` (:class:`indexerd.index.Hit` folded
    into an identical one by :func:`collapse`): each is taken off its media type's and its
    source's count, so a set of identical documents counts once there as in the total.  Values
    left at 0 are dropped."""
    if not folded:
        return facets
    out = {}
    for name, values in facets.items():
        counts = dict(values)
        for h in folded:
            value = getattr(h, name, None)
            if value in counts:
                counts[value] -= 1
        out[name] = sorted(((v, n) for v, n in counts.items() if n > 0), key=lambda p: (-p[1], p[0]))
    return out


def shown_keys(keys: list[str], hashes: dict[str, str], offset: int, end: int) -> set[str]:
    """The keys of the hits a page shows once ``keys`` (hits' keys, best first) are collapsed
    as :func:`collapse` does: the first of each set of identical documents, sets ``offset`` to
    ``end`` (counted from 0, end exclusive).  Only these need a snippet."""
    firsts: list[str] = []
    seen: set[str] = set()
    for key in keys:
        digest = hashes.get(key)
        if digest is not None:
            if digest in seen:
                continue
            seen.add(digest)
        firsts.append(key)
    return set(firsts[offset:end])
