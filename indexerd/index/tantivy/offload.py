"""The tantivy engine's task for the analysis worker (:mod:`indexerd.index.offload`).

``python -m indexerd.index.tantivy.offload FOLD`` still runs a worker of this task.
"""

from __future__ import annotations

import sys

from indexerd.index.offload import BATCH_DOCS, AnalysisWorker, batch_full  # noqa: F401  (the engine's names)

#: :class:`~indexerd.index.offload.AnalysisWorker`'s task name of :func:`analyse_texts`.
TASK = "indexerd.index.tantivy.offload:analyse_texts"


def analyse_texts(texts: list[tuple[str, str, str]],
                  fold_diacritics: bool) -> list[tuple[str, str, str, str, str]]:
    """``(title, content, headings)`` -> ``(title tokens, content tokens, identifiers, headings
    tokens, content pairs)``, each joined by single spaces (the tantivy engine's field values;
    the pairs: :func:`~indexerd.index.tantivy.pairs.field_terms` of the content tokens).  Runs in
    the worker or in-process."""
    from indexerd.index.analysis import analyzer
    from indexerd.index.tantivy.pairs import field_terms

    a = analyzer(fold_diacritics=fold_diacritics)
    out = []
    for title, content, headings in texts:
        t = a.analyse(title)
        c = a.analyse(content)
        out.append((" ".join(t.tokens), " ".join(c.tokens), " ".join(t.ids + c.ids),
                    " ".join(a.tokens(headings)) if headings else "", " ".join(field_terms(c.tokens))))
    return out


if __name__ == "__main__":
    from indexerd.index.offload import main

    sys.exit(main(sys.argv[1:], analyse_texts))
