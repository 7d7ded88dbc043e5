"""The SQL a source configures, made safe to run: Aspire's placeholders as bound parameters.

Placeholders ``{id}``, ``{sequenceId}``, ``{action}``, ``{batchSize}`` (Aspire's spelling) become
SQLAlchemy bound parameters; nothing from a row is pasted into SQL text.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from indexerd.config import SqlSource

__all__ = ["ACTIONS", "bind_placeholders", "used_params", "params_for", "short_error", "sequence_order"]

_PLACEHOLDER = re.compile(r"\{(id|sequenceId|action|batchSize)\}")
#: The queue's actions (Aspire): I insert, U update, D delete, N nothing to do.
ACTIONS = {"I": "insert", "U": "update", "D": "delete", "N": "none"}


def bind_placeholders(sql: str) -> str:
    """``"... WHERE seq = {sequenceId}"`` -> ``"... WHERE seq = :sequenceId"`` (bound, not pasted)."""
    return _PLACEHOLDER.sub(lambda m: f":{m.group(1)}", sql)


def used_params(sql: str) -> set[str]:
    """The placeholder names ``sql`` uses (``{"batchSize", "id"}``)."""
    return set(_PLACEHOLDER.findall(sql))


def params_for(cfg: SqlSource, sql: str, row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The bound values ``sql`` uses: ``batchSize``, and ``id``/``sequenceId``/``action`` of ``row``
    (by the source's column names)."""
    p: dict[str, Any] = {"batchSize": cfg.batch_size}
    if row is not None:
        p.update(id=row.get(cfg.id_column), sequenceId=row.get(cfg.sequence_column),
                 action=row.get(cfg.action_column))
    names = used_params(sql)
    return {k: v for k, v in p.items() if k in names}


def sequence_order(seq: Any):
    """Sort key of a queue row's sequence: numbers in order, then anything else as text."""
    return (0, seq) if isinstance(seq, (int, float)) else (1, str(seq))


def short_error(e: Exception) -> str:
    """The first line of a driver's error, at most 300 characters (its SQL and parameters cut)."""
    return str(e).splitlines()[0][:300]
