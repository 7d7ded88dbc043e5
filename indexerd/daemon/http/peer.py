"""Which local user is at the other end of a loopback TCP connection, and whether that user may
use the daemon as its control socket allows.

A loopback listener is reachable by every user of the machine, while the control socket is a
file only its owner, root and its group may open.  :class:`PeerCheck` gives the listener the
same rule: the connection's peer is looked up in the kernel's socket table, and a user who
could not open the control socket is refused.

Outside contract relied on (Linux ``proc(5)``, ``/proc/net/tcp`` and ``/proc/net/tcp6``): one
line per socket of this network namespace after a header line; field 1 is the local address,
field 2 the remote address (``HEX_ADDRESS:HEX_PORT``, the address as 32-bit words in host byte
order), field 7 the owner's uid.  The client's socket is the line whose local address is the
connection's remote address and whose remote port is the listener's port.
"""

from __future__ import annotations

import grp
import ipaddress
import os
import pwd
import socket
import struct
import threading
import time

#: the kernel's socket tables read, IPv4 then IPv6
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
#: how long a user's membership of the access group is reused (seconds)
MEMBERSHIP_TTL_SECONDS = 60.0


def _address(hex_address: str) -> str:
    """``0100007F`` -> ``127.0.0.1``; 32 hex digits -> an IPv6 address (IPv4-mapped ones as
    IPv4)."""
    if len(hex_address) == 8:
        return socket.inet_ntop(socket.AF_INET, struct.pack("=I", int(hex_address, 16)))
    words = [int(hex_address[i:i + 8], 16) for i in range(0, 32, 8)]
    return _plain(socket.inet_ntop(socket.AF_INET6, struct.pack("=4I", *words)))


def _plain(address: str) -> str:
    """An address as compared here: IPv4-mapped IPv6 as IPv4, IPv6 compressed."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def peer_uid(remote_address: str, remote_port: int, server_port: int,
             tables: tuple[str, ...] = TCP_TABLES) -> int | None:
    """The uid owning the client socket ``remote_address:remote_port`` connected to this
    machine's port ``server_port``; None when no such socket is in ``tables`` (another network
    namespace, a connection already closed, no ``/proc``)."""
    want = (_plain(remote_address), remote_port)
    for path in tables:
        try:
            with open(path, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) < 8:
                        continue
                    local, _, lport = fields[1].partition(":")
                    _raddr, _, rport = fields[2].partition(":")
                    if int(lport, 16) != want[1] or int(rport, 16) != server_port:
                        continue
                    if _address(local) == want[0]:
                        return int(fields[7])
        except OSError:
            continue
    return None


class PeerCheck:
    """Who may use a loopback listener without a token: the daemon's own user, root, and the
    members of ``gid`` (the group of the control socket file, whose mode is 0660).

    Args:
        gid: the access group's id.
        own_uid: the daemon's effective uid (default: this process's).
    """

    def __init__(self, gid: int, own_uid: int | None = None) -> None:
        self.gid = gid
        self.own_uid = os.geteuid() if own_uid is None else own_uid
        self._members: dict[int, tuple[float, bool]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def can_tell(tables: tuple[str, ...] = TCP_TABLES) -> bool:
        """The socket tables can be read (a unit with ``ProcSubset=pid`` hides them)."""
        return any(os.access(path, os.R_OK) for path in tables)

    def group_name(self) -> str:
        """The access group's name (its number when it has none)."""
        try:
            return grp.getgrgid(self.gid).gr_name
        except KeyError:
            return str(self.gid)

    def allows(self, uid: int) -> bool:
        """``uid`` may use the daemon (see the class docstring)."""
        if uid in (0, self.own_uid):
            return True
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(uid)
            if cached is not None and now - cached[0] < MEMBERSHIP_TTL_SECONDS:
                return cached[1]
        member = self._member(uid)
        with self._lock:
            self._members[uid] = (now, member)
        return member

    def _member(self, uid: int) -> bool:
        try:
            user = pwd.getpwuid(uid)
        except KeyError:
            return False
        if user.pw_gid == self.gid:
            return True
        try:
            return user.pw_name in grp.getgrgid(self.gid).gr_mem
        except KeyError:
            return False

    def deny(self, environ: dict) -> str | None:
        """None when the WSGI request ``environ`` comes from a user :meth:`allows`, else why
        not (a message for the 401 answer).  Reads ``REMOTE_ADDR``, ``REMOTE_PORT`` and
        ``SERVER_PORT`` (waitress sets all three)."""
        try:
            remote_port, server_port = int(environ["REMOTE_PORT"]), int(environ["SERVER_PORT"])
            remote = str(environ["REMOTE_ADDR"])
        except (KeyError, ValueError):
            return "this listener cannot tell which local user is asking"
        uid = peer_uid(remote, remote_port, server_port)
        if uid is None:
            return "this listener cannot tell which local user is asking"
        if self.allows(uid):
            return None
        return (f"uid {uid} may not use this daemon: without a token, its listener answers only "
                f"the users who may use its control socket (uid {self.own_uid}, root and the "
                f"members of group {self.group_name()})")
