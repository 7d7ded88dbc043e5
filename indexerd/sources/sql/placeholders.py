"""Aspire's placeholders in a SQL source's statements (``{id}``, ``{sequenceId}``, ``{action}``,
``{batchSize}``) as SQLAlchemy bound parameters: nothing from a row is pasted into SQL text."""

from __future__ import annotations

import re

_PLACEHOLDER = re.compile(r"\{(id|sequenceId|action|batchSize)\}")


def bind_placeholders(sql: str) -> str:
    """``"... WHERE seq = {sequenceId}"`` -> ``"... WHERE seq = :sequenceId"`` (bound, not pasted)."""
    return _PLACEHOLDER.sub(lambda m: f":{m.group(1)}", sql)


def used_params(sql: str) -> set[str]:
    return set(_PLACEHOLDER.findall(sql))
