"""The systemd unit (systemd/indexerd.service) against the daemon it starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "systemd" / "indexerd.service"


def unit_settings(path: Path = UNIT) -> dict[str, list[str]]:
    """``Key`` -> every value it is given in the unit (systemd.syntax(7): later lines add)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_a_bad_config_is_not_restarted(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('state_dir = "%s"\nlog_levle = "info"\n' % (tmp_path / "state"))
    p = subprocess.run([sys.executable, "-m", "indexerd.cli", "run", "-c", str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "log_levle" in p.stderr, (p.returncode, p.stderr)
    settings = unit_settings()
    assert settings["Restart"] == ["on-failure"]
    prevented = " ".join(settings.get("RestartPreventExitStatus", [])).split()
    assert str(p.returncode) in prevented      # no restart loop up to the start limit
    assert "4" not in prevented                # another instance holding the state dir: retried
