"""Sweep workers die with the build that started them (a real SIGKILL, no cleanup)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "backpressure")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux")


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is left


def _wait_for(cond, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_workers_exit_when_the_build_is_killed(tmp_path):
    # The bundled catalog has enough configs for the sweep to start its workers.
    proc = subprocess.Popen(
        [CLI, "sweep", "--out", str(tmp_path / "s"), "--jobs", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        assert _wait_for(lambda: len(_children(proc.pid)) >= 2, 60), "no workers started"
        workers = _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait_for(lambda: not any(_alive(w) for w in workers), 20), [
            w for w in workers if _alive(w)
        ]
    finally:
        if proc.poll() is None:
            proc.kill()
        for w in workers:  # whatever is left of them, by id
            if _alive(w):
                os.kill(w, signal.SIGKILL)
