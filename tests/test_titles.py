"""Plain-text titles (indexerd/extract/titles.py): real Debian copyright files and scripts, end to end."""

from __future__ import annotations

import base64
import glob
import shutil

import pytest

from indexerd.extract.titles import plain_text_title, reads_as_title


@pytest.mark.parametrize("line", [
    "#!/bin/bash", "#! /usr/bin/env python3",
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
    "Subject: hello", "vim: set ft=text:", "https://example.test/some/long/path/index.html",
    "www.example.test", "=========", "/*******************", "# -*- coding: utf-8 -*-", "-- 42 --",
    "x" * 101, "", "   ",
    # the sysadmin run of 59d5feb: first lines of /usr/share/doc files that are not titles
    "[Unit]", "This package was downloaded from",
    "This package was debianized by Jamey Sharp <sharpone@debian.org> on",
    "This is the Debian GNU/Linux prepackaged version of the GNU assembler,",
    "fakeroot contains code under the following copyrights and license:",
    "// Copyright 2012 Google Inc. All Rights Reserved.", "# The default target of this Makefile is...",
    "/* io.c", "; comment", "-- a SQL comment", "% a TeX comment", "REM a batch comment",
    ".. highlight:: c", ":orphan:",
    "MAIN:=git-credential-libsecret", "scale=2", "-----BEGIN CERTIFICATE-----",
    '"""Base implementation of event loop.', "__all__ = ('Runner', 'run')",
    'r"""JSON (JavaScript Object Notation) <https://json.org> is a subset of',
    "package Generators::QMake;", "from datetime import tzinfo, timedelta, datetime",
    '<?xml version="1.0" encoding="UTF-8"?>',
])
def test_not_a_title(line):
    assert not reads_as_title(line)


@pytest.mark.parametrize("line", [
    "GNU GENERAL PUBLIC LICENSE", "Chapter 1: Introduction", "python3-defaults (3.11.2-1) unstable; urgency=high",
    "Copyright (c) The Regents of the University of California.", "Release notes for 2.0",
    "x" * 100, "This is the Debian prepackaged version of the GNU C Library version 2.23.",
    "Git v2.30.2 Release Notes", "XSLT support for libxml2 (XML toolkit from the GNOME project)",
])
def test_a_title(line):
    assert reads_as_title(line)


def test_header_block_named_by_its_field():
    dep5 = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n" \
           "Upstream-Contact: a@b.test\nUpstream-Name: zlib\n\nFiles: *\nName: not-this\n"
    assert plain_text_title(dep5, "copyright", 200) == "zlib"
    mail = "From: a@b.test\nSubject:  Re:  the   plan\nTo: c@d.test\n\nbody\n"
    assert plain_text_title(mail, "msg.txt", 200) == "Re: the plan"
    assert plain_text_title("Format: x\n\nName: after the block\n", "copyright", 200) == "copyright"
    assert plain_text_title("#!/bin/sh\necho hi\n", None, 200) == ""
    assert plain_text_title("#!/bin/sh\necho hi\n", "/docs/run.sh", 200) == "run.sh"


def test_source_and_config_files_are_named_by_file_name_or_python_docstring():
    assert plain_text_title("[Unit]\nDescription=x\n", "/d/foo.service", 200) == "foo.service"
    assert plain_text_title("all:: x\n", "/d/contrib/Makefile", 200) == "Makefile"
    assert plain_text_title("GNU GENERAL PUBLIC LICENSE\n", "/d/notes.conf", 200) == "notes.conf"
    assert plain_text_title("# c\nfrom x import y\n", "/d/tool.py", 200) == "tool.py"
    long_summary = '"""' + "word " * 30 + 'end.\n"""\n'
    assert plain_text_title(long_summary, "/d/tool.py", 200) == ("word " * 20).strip()
    assert plain_text_title('"""\n"""\nx = 1\n', "/d/tool.py", 200) == "tool.py"


def test_real_python_modules_use_their_docstring_summary():
    import asyncio.base_events
    import asyncio.runners

    src = open(asyncio.base_events.__file__, encoding="utf-8").read()  # '"""Base event loop.\n\n...'
    summary = asyncio.base_events.__doc__.strip().split("\n\n")[0]
    summary = " ".join(summary.split()).split(". ")[0].rstrip(".")
    assert plain_text_title(src, asyncio.base_events.__file__, 200) == summary
    assert not summary.startswith('"')
    src = open(asyncio.runners.__file__, encoding="utf-8").read()  # opens with __all__ = (...)
    assert asyncio.runners.__doc__ is None
    assert plain_text_title(src, asyncio.runners.__file__, 200) == "runners.py"


def _real_copyright_files() -> tuple[str, str]:
    """(a DEP-5 copyright file with Upstream-Name, one without) from this Debian system."""
    with_name = without = None
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            head = open(path, encoding="utf-8").read(4096)
        except (OSError, UnicodeDecodeError):
            continue
        if not head.startswith("Format: http"):
            continue
        block = head.split("\n\n", 1)[0]
        if "\nUpstream-Name:" in block:
            with_name = with_name or path
        else:
            without = without or path
        if with_name and without:
            return with_name, without
    pytest.fail("no Debian machine-readable copyright files with and without Upstream-Name in "
                "/usr/share/doc (the case comes from Debian)", pytrace=False)


def test_real_copyright_files_and_a_script_end_to_end(cli, tmp_path):
    named, unnamed = _real_copyright_files()
    tree = tmp_path / "tree"
    for i, src in enumerate((named, unnamed)):
        (tree / f"pkg{i}").mkdir(parents=True)
        shutil.copy(src, tree / f"pkg{i}" / "copyright")
    shutil.copy(base64.__file__, tree / "b64tool")          # a real script: "#! /usr/bin/env python3"
    cli.run("index", str(tree))
    titles = {}
    for word in ("Upstream", "b64encode"):
        for h in cli.search(word, "--limit", "10"):
            titles[h["path"]] = h["title"]
    upstream = next(line.split(":", 1)[1].strip() for line in open(named, encoding="utf-8")
                    if line.startswith("Upstream-Name:"))
    assert titles[str(tree / "pkg0" / "copyright")] == upstream
    assert titles[str(tree / "b64tool")] == "b64tool"
    for title in titles.values():
        assert not title.startswith(("Format:", "#!")), titles
