"""The store's declared interface (indexerd/core/store/protocols.py) is the whole of what its row
kinds offer: a public method added to a row kind without its protocol (or left in a protocol
after the method went) fails here.  mypy checks the signatures (``protocols._conforms``)."""

from __future__ import annotations

import inspect

import pytest

from indexerd.core.store import protocols
from indexerd.core.store.cluster import ClusterRows
from indexerd.core.store.crawl import CrawlRows
from indexerd.core.store.documents import DocumentRows
from indexerd.core.store.runs import SourceRuns
from indexerd.core.store.sharedfrontier import SharedFrontierRows


def _public(cls) -> set[str]:
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}


@pytest.mark.parametrize(("rows", "protocol"), [
    (DocumentRows, protocols.DocumentStore),
    (SourceRuns, protocols.RunStore),
    (CrawlRows, protocols.CrawlStore),
    (ClusterRows, protocols.ClusterStore),
    (SharedFrontierRows, protocols.SharedFrontierStore),
])
def test_each_row_kind_offers_exactly_its_protocol(rows, protocol) -> None:
    assert _public(rows) == _public(protocol)


def test_a_state_store_is_every_part_both_stores_offer() -> None:
    parts = {protocols.DocumentStore, protocols.RunStore, protocols.CrawlStore, protocols.StoreBasics}
    assert parts <= set(protocols.StateStore.__mro__)
    assert {protocols.ClusterStore, protocols.SharedFrontierStore} <= set(protocols.ClusterStateStore.__mro__)
