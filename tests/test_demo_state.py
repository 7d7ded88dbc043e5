"""The README's first command (a demo without a config) never writes the service's state dir."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexerd import config as config_mod

SERVICE_STATE = Path("/var/lib/indexerd")


@pytest.mark.xdist_group("real-service-paths")  # creates or checks /run/indexerd, /var/lib/indexerd
@pytest.mark.skipif(os.geteuid() != 0, reason="the case is root's (CI runs as root)")
@pytest.mark.skipif(Path(config_mod.DEFAULT_CONFIG_PATH).exists(), reason="a system config exists here")
def test_demo_as_root_keeps_its_state_out_of_the_services(tmp_path):
    home = tmp_path / "root-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "XDG_STATE_HOME")}
    env["HOME"] = str(home)
    service_state_before = SERVICE_STATE.exists()
    tree = os.path.dirname(asyncio.__file__)            # the README's demo tree

    def run(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", *args], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    p = run("index", tree)
    demo_state = home / ".local" / "state" / "indexerd"
    assert p.stdout.rstrip().endswith(f"(state dir {demo_state})"), p.stdout
    assert (demo_state / "state.sqlite3").is_file()
    hits = json.loads(run("ctl", "search", "event loop", "--json").stdout)  # the second half finds them
    assert hits and all(h["path"].startswith(tree) for h in hits)
    assert SERVICE_STATE.exists() == service_state_before   # never created, never written
    # with a config file (a configured root: the service's admin), /var/lib/indexerd stays the default
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'[[sources.filesystem]]\nname = "docs"\npath = "{tree}"\n')
    assert f"# effective state_dir = {SERVICE_STATE}\n" in run("check-config", "-c", str(cfg)).stdout
