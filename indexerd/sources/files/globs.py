"""Include/exclude globs of a tree source, with gitignore's pattern rules (the ``pathspec``
library translates each pattern; we only split them by what they match).  A name pattern with
at most one ``*`` and no other glob syntax (``.git/``, ``*.swp``, ``.#*``, ``.~lock.*#``: every
default exclude) is tested with ``str`` methods and needs no translation, so a source without
other patterns never imports ``pathspec``."""

from __future__ import annotations

import re
import warnings


def glob_regex(pattern: str) -> str:
    """A glob as a regex over a '/'-separated path relative to the root, by gitignore's rules
    (pathspec's ``GitWildMatchPattern``): ``*`` and ``?`` never match ``/``, ``**`` matches across
    directories, ``[...]`` classes; a pattern without an inner ``/`` matches a name at any depth;
    a pattern ending in ``/`` matches directories only (tested as ``rel + "/"``).

    Raises:
        ValueError: the pattern is a negation or a comment (gitignore's ``!`` and ``#``), which a
            source's include/exclude lists do not use, selects no path (empty, a bare ``/``, an
            unclosed ``[``) or is not a glob at all (a trailing ``\\``); the message says which,
            without the pattern (the caller names it).
    """
    from pathspec.patterns.gitwildmatch import GitWildMatchPattern  # only for patterns _simple_name cannot take

    try:
        with warnings.catch_warnings():  # the maintained class; its deprecation names a newer alias
            warnings.simplefilter("ignore", DeprecationWarning)
            regex, include = GitWildMatchPattern.pattern_to_regex(pattern)
    except ValueError as e:  # pathspec's GitIgnorePatternError: a trailing backslash
        raise ValueError(f"not a glob ({e})") from None
    if include is False:
        raise ValueError("a negation ('!'), which include and exclude do not use: leave the path out "
                         "of exclude, or write '\\!' for a name starting with '!'")
    if regex is None and pattern.startswith("#"):
        raise ValueError("a comment in gitignore's rules: write '\\#' for a name starting with '#'")
    if regex is None:
        raise ValueError("selects no path (empty, a bare '/', an unclosed '[')")
    return re.sub(r"\(\?P<\w+>", "(?:", regex)  # unnamed: the patterns are joined into one regex


def check_glob(pattern: str) -> None:
    """Can a source's include/exclude list use ``pattern``: does it translate (:func:`glob_regex`)
    to a regex that compiles (``[z-a]`` translates to a bad character range)?

    Raises:
        ValueError: why not, without the pattern (the config names it).
    """
    if _simple_name(pattern.removesuffix("/")) is not None:
        return  # a name with at most one '*': nothing to translate
    try:
        re.compile(glob_regex(pattern))
    except re.error as e:
        raise ValueError(f"not a glob ({e})") from None


def _names_only(pattern: str) -> bool:
    """Does ``pattern`` match a name at any depth (no ``/`` but a trailing one), so that it can
    be tested on the name alone?  Testing it on a whole path costs time quadratic in the path's
    length (the regex's leading ``(?:.+/)?`` backtracks over every ``/``)."""
    return "/" not in pattern.rstrip("/")


#: no glob syntax and no trailing space (gitignore strips it); a leading ``!`` or ``#`` is
#: checked apart (a negation, a comment)
_LITERAL = re.compile(r"[^*?\[\]\\/]*[^*?\[\]\\/ ]")


def _simple_name(pattern: str) -> tuple[str, str | None] | None:
    """``(before, after)`` the one ``*`` of a name pattern without other glob syntax (``after``
    None: no ``*``, an exact name), or None for any other pattern.  By gitignore's rules such a
    pattern matches a name that equals it, or (with the ``*``) starts with ``before`` and ends
    with ``after`` without the two overlapping; a leading ``!`` or ``#`` (a negation, a comment)
    and a trailing space are not simple."""
    if not pattern or pattern[0] in "!#":
        return None
    before, star, after = pattern.partition("*")
    if not star:
        return (pattern, None) if _LITERAL.fullmatch(pattern) else None
    if (before and not _LITERAL.fullmatch(before + "x")) or (after and not _LITERAL.fullmatch(after)):
        return None
    return before, after


class NameTest:
    """One ``match(name)`` for many name-only patterns: a simple one (:func:`_simple_name`) as
    ``str`` tests -- ``*LIT`` a suffix, ``LIT*`` a prefix, ``LIT`` an equality, ``A*B`` a prefix
    and a suffix (a tenth of a regex's cost: the walk tests every file's name) --, the rest
    through their regex (:func:`glob_regex`).  ``name`` is one path component, no ``/``; the
    answer is truthy when a pattern matches it.

    Raises:
        ValueError: a pattern :func:`glob_regex` refuses.
    """

    def __init__(self, patterns: list[str]) -> None:
        suffixes: list[str] = []
        prefixes: list[str] = []
        exact: set[str] = set()
        both: list[tuple[str, str, int]] = []
        rest: list[str] = []
        for p in patterns:
            simple = _simple_name(p)
            if simple is None:
                rest.append(p)
                continue
            before, after = simple
            if after is None:
                exact.add(before)
            elif not before:
                suffixes.append(after)
            elif not after:
                prefixes.append(before)
            else:
                both.append((before, after, len(before) + len(after)))
        self._suffixes, self._prefixes, self._exact = tuple(suffixes), tuple(prefixes), frozenset(exact)
        self._both = tuple(both)
        self._both_prefixes = tuple(b for b, _, _ in both)  # a quick refusal of most names
        # tested on a name alone, the regex's leading "any directories" can only match nothing
        self._rest = re.compile("|".join(f"(?:{glob_regex(p).replace('^(?:.+/)?', '^', 1)})" for p in rest)) \
            if rest else None

    def match(self, name: str) -> bool:
        """Does a pattern match the name ``name``?"""
        return (name.endswith(self._suffixes) or name.startswith(self._prefixes) or name in self._exact
                or (name.startswith(self._both_prefixes) and self._match_both(name))
                or (self._rest is not None and self._rest.match(name) is not None))

    def _match_both(self, name: str) -> bool:
        return any(len(name) >= n and name.startswith(b) and name.endswith(a) for b, a, n in self._both)


class PathMatcher:
    """Include/exclude globs of one source.

    A pattern ending in ``/`` names directories (``.git/``); a pattern without ``/`` matches a
    file or directory *name* anywhere (``*.swp``); a pattern with an inner ``/`` matches the path
    relative to the root (``build/*.html``).  Include patterns select files; exclude patterns
    remove files and prune directories.

    Name patterns are tested on the name only, so a test costs the same at any depth (a watch
    of a tree thousands of directories deep gets an event per directory).
    """

    def __init__(self, include: list[str], exclude: list[str]) -> None:
        def compile_(pats: list[str]) -> re.Pattern | None:
            return re.compile("|".join(f"(?:{glob_regex(p)})" for p in pats)) if pats else None

        self.include_all = include == ["*"]
        inc = [] if self.include_all else include
        self._inc_name = compile_([p for p in inc if _names_only(p)])
        self._inc_rel = compile_([p for p in inc if not _names_only(p)])
        file_excl = [p for p in exclude if not p.endswith("/")]  # "x/" matches directories only
        self._exc_file_rel = compile_([p for p in file_excl if not _names_only(p)])
        dir_names = [p for p in exclude if _names_only(p)]  # a name pattern prunes directories too
        simple_dirs = [p.removesuffix("/") for p in dir_names if _simple_name(p.removesuffix("/"))]
        self._exc_dir_simple = NameTest(simple_dirs).match if simple_dirs else None
        self._exc_dir_name = compile_([p for p in dir_names if not _simple_name(p.removesuffix("/"))])
        self._exc_dir_rel = compile_([p for p in exclude if not _names_only(p)])
        #: does selecting a file need its path relative to the root (not only its name)?
        self.needs_rel = self._exc_file_rel is not None or self._inc_rel is not None
        names = [p for p in file_excl if _names_only(p)]
        #: the test of a file's name against the name-only exclude patterns (the walk's, per file)
        self.exc_file_name_match = NameTest(names).match if names else None

    def dir_excluded(self, name: str, rel: str) -> bool:
        """Is the directory ``rel`` (relative to the root; ``name`` its last part) pruned?"""
        return bool((self._exc_dir_simple and self._exc_dir_simple(name)) or
                    (self._exc_dir_name and self._exc_dir_name.match(name + "/")) or
                    (self._exc_dir_rel and self._exc_dir_rel.match(rel + "/")))

    def file_selected(self, name: str, rel: str) -> bool:
        """Is the file ``rel`` (relative to the root; ``name`` its last part) selected?"""
        if (self.exc_file_name_match and self.exc_file_name_match(name)) or \
                (self._exc_file_rel and self._exc_file_rel.match(rel)):
            return False
        return self.include_all or bool(self._inc_name and self._inc_name.match(name)) or \
            bool(self._inc_rel and self._inc_rel.match(rel))

    def any_dir_excluded(self, rel: str, *, last_too: bool) -> bool:
        """Is a directory on the way to ``rel`` (relative to the root, '/'-separated) pruned?
        ``last_too``: ``rel`` is itself a directory, tested too.  Costs time linear in the
        path's length unless relative directory patterns are configured."""
        parts = rel.split("/")
        dirs = parts if last_too else parts[:-1]
        if self._exc_dir_simple and any(self._exc_dir_simple(p) for p in dirs):
            return True
        if self._exc_dir_name and any(self._exc_dir_name.match(p + "/") for p in dirs):
            return True
        if self._exc_dir_rel:
            end = 0
            for p in dirs:
                end += len(p)
                if self._exc_dir_rel.match(rel[:end] + "/"):
                    return True
                end += 1
        return False

    def path_selected(self, rel: str) -> bool:
        """Is the file at ``rel`` (relative to the root, '/'-separated) selected, dirs included?"""
        if self.any_dir_excluded(rel, last_too=False):
            return False
        return self.file_selected(rel.rpartition("/")[2], rel)
