"""The listener's connections, bounded against slow clients (slowloris): a request must arrive
whole within :data:`REQUEST_SECONDS` of its first byte (or of the connection), and at the
connection limit a new client takes the place of the connection that has waited longest.

waitress closes a connection only after ``channel_timeout`` seconds *without any byte*, so a
client that drips one header line every 15 s keeps its connection for ever, and about 200 of
them (waitress's connection limit) stop the listener accepting: ``/healthz`` fell silent for as
long as they dripped (issue 29's attack run).  Here:

- every connection not being answered carries the time its pending request began
  (:class:`BoundedChannel`); the server's maintenance, every second, closes those older than
  :data:`REQUEST_SECONDS` (Apache's ``mod_reqtimeout`` and nginx's ``client_header_timeout``
  bound the same time);
- at the limit, the connection that waited longest for its request (or sat idle longest
  between requests) is closed so the listener keeps accepting; a connection whose request is
  being answered is never closed.

Outside contract relied on (waitress 3.0, ``waitress/server.py`` and ``waitress/channel.py``):
``BaseWSGIServer.channel_class`` is instantiated per accepted connection;
``BaseWSGIServer.maintenance(now)`` runs every ``cleanup_interval`` seconds from the loop
thread and ``active_channels`` holds the open channels; a channel with ``will_close`` set is
closed by the loop at its next turn; ``HTTPChannel.request`` is the request being read (None
between requests) and ``requests`` those read and not yet answered; ``time.time()`` clocks.
"""

from __future__ import annotations

import logging
import time

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger("indexerd.daemon.http.server")

#: a request (line, headers and body) must arrive within this of its first byte (seconds)
REQUEST_SECONDS = 10.0
#: how often the deadlines are checked (seconds; waitress's ``cleanup_interval``)
CHECK_INTERVAL_SECONDS = 1
#: at most one "connection limit" line in this long (seconds)
LIMIT_LOG_INTERVAL_SECONDS = 60.0


class BoundedChannel(HTTPChannel):
    """A waitress channel that knows since when it waits for its pending request.

    ``request_began``: ``time.time()`` of the connection (no byte yet) or of the first byte of
    the request being read; None while no request is pending (being answered, or idle between
    requests, which waitress's ``channel_timeout`` bounds).
    """

    def __init__(self, server, sock, addr, adj, map=None) -> None:
        super().__init__(server, sock, addr, adj, map=map)
        self.request_began: float | None = self.creation_time

    def received(self, data: bytes) -> bool:
        if data and self.request is None and self.request_began is None:
            self.request_began = time.time()
        result = super().received(data)
        if self.request is None:
            self.request_began = None
        return result


class BoundedServer(TcpWSGIServer):
    """waitress's TCP server with :class:`BoundedChannel` connections, the request deadline
    and the eviction at the connection limit (see the module docstring)."""

    channel_class = BoundedChannel
    _limit_logged = 0.0

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        cutoff = now - REQUEST_SECONDS
        for channel in list(self.active_channels.values()):
            began = getattr(channel, "request_began", None)
            if began is not None and began < cutoff and not channel.requests:
                channel.will_close = True

    def readable(self) -> bool:
        if self.accepting and len(self._map) >= self.adj.connection_limit:
            self._evict_one()
        return super().readable()

    def _evict_one(self) -> None:
        """Mark the connection that waited longest for its request to close (none while one
        marked is still open: the loop closes it at its next turn)."""
        waiting = []
        for channel in self.active_channels.values():
            if channel.will_close:
                return
            if channel.requests:
                continue
            began = getattr(channel, "request_began", None)
            waiting.append((began if began is not None else channel.last_activity, channel))
        if not waiting:
            return
        since, victim = min(waiting, key=lambda pair: pair[0])
        victim.will_close = True
        now = time.time()
        if now - self._limit_logged >= LIMIT_LOG_INTERVAL_SECONDS:
            self._limit_logged = now
            log.warning("HTTP listener at its limit of %d connections: closing the one that "
                        "waited longest for its request (%.0f s, from %s)",
                        self.adj.connection_limit, now - since, victim.addr[0] if victim.addr else "?")


def create_bounded_server(app, **kw) -> TcpWSGIServer | MultiSocketServer:
    """waitress's ``create_server`` for TCP addresses, with :class:`BoundedServer`: ``kw`` are
    waitress adjustments (``host``, ``port``, ``threads``, ``connection_limit`` ...);
    ``cleanup_interval`` is :data:`CHECK_INTERVAL_SECONDS`.

    Raises:
        OSError: an address cannot be bound.
    """
    adj = Adjustments(cleanup_interval=CHECK_INTERVAL_SECONDS, **kw)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    socket_map: dict = {}
    servers: list[BoundedServer] = []
    try:
        for info in adj.listen:
            servers.append(BoundedServer(app, socket_map, dispatcher=dispatcher, adj=adj,
                                         sockinfo=info))
    except OSError:
        for server in servers:
            server.close()
        dispatcher.shutdown()
        raise
    if len(servers) == 1:
        return servers[0]
    return MultiSocketServer(socket_map, adj, [(s.effective_host, s.effective_port) for s in servers],
                             dispatcher, servers[-1].log_info)
