"""A page's main content, the part snippets are taken from (lexbor trees, selectolax).

The rule, first match wins: the first ``<main>`` or ``role=main`` element (HTML Living Standard
§4.4.14; WAI-ARIA 1.2 ``main`` role); else the page's only ``<article>``; else the body without
its navigation and page furniture (:data:`FURNITURE`), when it has any.  Measured against
boilerplate-removal libraries in ``bench/main_content.py`` (results in ``bench/RESULTS.md``).
"""

from __future__ import annotations

#: Navigation and page furniture (WAI-ARIA 1.2 landmark roles; DocBook XSL's chunk navigation,
#: "Prev Up Home Next", the markup of most generated manuals); header/footer count only outside
#: sectioning content (HTML-ARIA: they are then banner and contentinfo).
FURNITURE = ("nav, [role=navigation], [role=banner], [role=contentinfo], [role=search], "
             "div.navheader, div.navfooter")
_SECTIONING = frozenset("article aside main nav section".split())


def main_element(tree):
    """The main content element of a parsed page (module rule), or None when it has none.

    Args:
        tree: a ``selectolax.lexbor.LexborHTMLParser`` whose hidden elements are already removed.

    May remove the navigation nodes from ``tree`` (the body is then returned): call it last.
    """
    main = tree.css_first("main, [role=main]")
    if main is None:
        articles = tree.css("article")
        main = articles[0] if len(articles) == 1 else None
    if main is not None:
        return main
    furniture = tree.css(FURNITURE)
    for node in tree.css("header, footer"):
        parent = node.parent
        while parent is not None and parent.tag not in _SECTIONING:
            parent = parent.parent
        if parent is None:
            furniture.append(node)
    if not furniture:
        return None
    for node in sorted(furniture, key=lambda n: -_depth(n)):  # innermost first: none removed twice
        node.decompose()
    return tree.body


def _depth(node) -> int:
    depth = 0
    while (node := node.parent) is not None:
        depth += 1
    return depth
