"""The daemon's control commands as a table: every command ``indexerd ctl`` sends has a handler,
each kind's verb asks for a pass of that kind, an unknown command is refused naming it."""

from __future__ import annotations

import pytest

from indexerd.core.errors import ConfigError
from indexerd.daemon import commands, reads
from indexerd.sources.registry import KINDS



def test_every_command_has_a_handler() -> None:
    verbs = {k.verb for k in KINDS.values()}
    assert set(commands.COMMANDS) == {"status", "reload", "reindex", "forget"} | verbs | set(reads.HANDLERS)
    assert set(reads.HANDLERS) == {"search", "report", "changed", "explain"}
    for verb in verbs:
        assert commands.COMMANDS[verb].keywords == {"kind": next(k.name for k in KINDS.values() if k.verb == verb)}


def test_the_verb_of_a_kind_registered_later_is_answered() -> None:
    import jsonl_kind
    from indexerd.sources import registry

    assert commands.handler_of("ingest") is None
    jsonl_kind.register()
    try:
        assert commands.handler_of("ingest").keywords == {"kind": "jsonl"}
    finally:
        registry.unregister("jsonl")
    assert commands.handler_of("ingest") is None


def test_an_unknown_command_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"^unknown control command 'rm -rf'$"):
        commands.handle(object(), {"cmd": "rm -rf"})
    with pytest.raises(ConfigError, match=r"^unknown control command None$"):
        commands.handle(object(), {})
