#!/usr/bin/env python3
"""A floor for ``ctl search`` through the daemon (bench/RESULTS.md, 2026-12-01 20:27 UTC): the
same control-socket request with nothing but the standard library -- tomllib for the two
locating keys, one JSON line over the socket, the hits printed; no argparse, no config
validation, no logging.  Not a client to use: a measurement of what the client's start-up costs.

  bench/ctl_floor_client.py CONFIG QUERY
"""
import sys, json, socket, tomllib
cfg = tomllib.load(open(sys.argv[1], "rb"))
s = socket.socket(socket.AF_UNIX); s.connect(cfg["control_socket"])
s.sendall(json.dumps({"cmd": "search", "query": sys.argv[2], "limit": 20, "since": None, "state_dir": cfg["state_dir"]}).encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    c = s.recv(65536)
    if not c: break
    buf += c
r = json.loads(buf)
for h in r["hits"]:
    print(f"{h['rank']:3}. {h['title']}\n     {h.get('path') or h['url']}\n     {h['snippet']}")
