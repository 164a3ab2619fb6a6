"""A build killed at any rename leaves a whole site; the next build makes the right one.

The state: catalog A swept and built. Then catalog B (one GPU's bandwidth
edited) is built and killed at a rename: of the sweep's commit, of the render
cache's stores, of publishing and its cleanup. "Killed" is an exception raised
from that rename on (nothing after it renames anything), and, for a few points,
a real SIGKILL of a subprocess build. After each:

- the published site is, byte for byte, A's site or B's (never a mix, never missing);
- a build of A gives A's site (the sweep does not take B's half-committed rows
  for A's), and a build of B gives B's; ``verify`` passes on each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backpressure.generator import manifest
from backpressure.generator.cli.main import main
from backpressure.generator.site.publish import tree as site_tree

from tests.tiny_catalog import make_tiny_catalog

BANDWIDTH = "bandwidth_bytes_per_s: 1_008_000_000_000"


class Killed(BaseException):
    """The process stops here (BaseException: nothing catches it as an error)."""


class Renames:
    """Counts renames (os.rename, os.replace, the atomic exchange); kills from ``kill_at`` on."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.n = 0
        self.kill_at = kill_at
        self.names: list[str] = []
        self.marks: dict[str, int] = {}

    def wrap(self, real, name):
        def counted(*args, **kwargs):
            self.n += 1
            self.names.append(name)
            if self.kill_at is not None and self.n >= self.kill_at:
                raise Killed(f"killed at rename {self.n} ({name})")
            return real(*args, **kwargs)

        return counted

    def mark(self, real, name):
        def marked(*args, **kwargs):
            self.marks[f"{name} start"] = self.n
            out = real(*args, **kwargs)
            self.marks[f"{name} end"] = self.n
            return out

        return marked

    def install(self, mp: pytest.MonkeyPatch) -> None:
        mp.setattr(os, "rename", self.wrap(os.rename, "rename"))
        mp.setattr(os, "replace", self.wrap(os.replace, "replace"))
        mp.setattr(site_tree, "exchange", self.wrap(site_tree.exchange, "exchange"))
        mp.setattr(manifest, "commit", self.mark(manifest.commit, "sweep commit"))
        mp.setattr(site_tree, "publish", self.mark(site_tree.publish, "publish"))


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def build(catalog: Path, root: Path) -> int:
    return main(["build", "--catalog", str(catalog), "--out", str(root / "site")])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Catalogs A and B, the state after building A, and clean builds of both."""
    base = tmp_path_factory.mktemp("faults")
    cat_a = make_tiny_catalog(base / "a")
    cat_b = make_tiny_catalog(base / "b")
    gpu = cat_b / "gpus" / "rtx-4090.yaml"
    gpu.write_text(gpu.read_text().replace(BANDWIDTH, "bandwidth_bytes_per_s: 1_300_000_000_000"))
    refs = {}
    for name, cat in (("a", cat_a), ("b", cat_b)):
        assert build(cat, base / f"clean-{name}") == 0
        refs[name] = tree(base / f"clean-{name}" / "site")
    assert refs["a"] != refs["b"]
    state = base / "state"
    assert build(cat_a, state) == 0
    return base, cat_a, cat_b, state, refs


def fresh(world, dest: Path) -> Path:
    """A copy of the state after building A (hard links kept)."""
    subprocess.run(["cp", "-a", str(world[3]), str(dest)], check=True)
    return dest


def _sampled(names: list[str], start: int, stop: int) -> list[int]:
    """Rename numbers ``start`` to ``stop - 1``, a run of one operation sampled.

    Publishing ends in a loop that moves each replaced file out of the way, one
    rename per file (dozens): a kill in its first, second, middle and last
    iteration stands for a kill in any, and each point costs two builds.
    """
    keep: list[int] = []
    n = start
    while n < stop:
        end = n
        while end + 1 < stop and names[end] == names[n - 1]:
            end += 1  # names[i - 1] is rename number i
        run = range(n, end + 1)
        keep += sorted({run[0], run[min(1, len(run) - 1)], run[len(run) // 2], run[-1]})
        n = end + 1
    return keep


@pytest.fixture(scope="module")
def dry(world, tmp_path_factory):
    """Every rename of the sweep's commit and of publishing, one amid the cache's stores."""
    root = fresh(world, tmp_path_factory.mktemp("dry") / "state")
    count = Renames()
    with pytest.MonkeyPatch.context() as mp:
        count.install(mp)
        assert build(world[2], root) == 0
    m = count.marks
    sweep = list(range(m["sweep commit start"] + 1, m["sweep commit end"] + 1))
    publish = _sampled(count.names, m["publish start"] + 1, count.n + 1)
    middle = (m["sweep commit end"] + m["publish start"]) // 2
    assert len(sweep) >= 3, count.names  # results, curves, inputs (changed) and the manifest
    assert "exchange" in count.names[m["publish start"] :]
    swap = m["publish start"] + count.names[m["publish start"] :].index("exchange") + 1
    named = {"sweep": m["sweep commit start"] + 2, "swap": swap, "after swap": swap + 1}
    return [*sweep, middle, *publish], named


def check_rerun(world, root: Path, capsys) -> None:
    """After a kill during B's build: A or B is published, and running B again gives B."""
    _base, _cat_a, cat_b, _state, refs = world
    assert tree(root / "site") in (refs["a"], refs["b"]), "the site is neither A's nor B's"
    assert build(cat_b, root) == 0
    assert tree(root / "site") == refs["b"]
    assert main(["verify", str(root / "site"), "--catalog", str(cat_b)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def check_after(world, root: Path, capsys) -> None:
    """As :func:`check_rerun`, after building A first: either catalog recovers the state."""
    _base, cat_a, cat_b, _state, refs = world
    site = tree(root / "site")
    assert site in (refs["a"], refs["b"]), "the published site is neither A's nor B's"
    assert build(cat_a, root) == 0
    assert tree(root / "site") == refs["a"]
    assert main(["verify", str(root / "site"), "--catalog", str(cat_a)]) == 0
    assert build(cat_b, root) == 0
    assert tree(root / "site") == refs["b"]
    assert main(["verify", str(root / "site"), "--catalog", str(cat_b)]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
def test_killed_at_every_rename_of_sweep_and_publish(world, dry, tmp_path, monkeypatch, capsys):
    points, _named = dry
    assert len(points) >= 8
    for n in points:
        root = fresh(world, tmp_path / f"kill-{n}")
        with monkeypatch.context() as mp:
            Renames(kill_at=n).install(mp)
            with pytest.raises(Killed):
                build(world[2], root)
        # every point: the rerun a user makes; both directions at the named points below
        check_rerun(world, root, capsys)


# The in-process kill at the swap is the SIGKILL test's "swap" too: it runs with -m slow.
@pytest.mark.parametrize("where", ["sweep", pytest.param("swap", marks=pytest.mark.slow)])
def test_killed_at_a_rename(world, dry, tmp_path, monkeypatch, capsys, where):
    points, named = dry
    assert named[where] in points
    root = fresh(world, tmp_path / "kill")
    with monkeypatch.context() as mp:
        Renames(kill_at=named[where]).install(mp)
        with pytest.raises(Killed):
            build(world[2], root)
    check_after(world, root, capsys)


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    n = [0]
    at = int(sys.argv[1])

    def wrap(real):
        def counted(*args, **kwargs):
            n[0] += 1
            if n[0] == at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return counted

    os.rename, os.replace = wrap(os.rename), wrap(os.replace)
    from backpressure.generator.site.publish import tree
    tree.exchange = wrap(tree.exchange)
    from backpressure.generator.cli.main import main
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("sweep", marks=pytest.mark.slow),
        "swap",
        pytest.param("after swap", marks=pytest.mark.slow),
    ],
)
def test_a_real_sigkill(world, dry, tmp_path, capsys, where):
    _points, named = dry
    root = fresh(world, tmp_path / "sigkill")
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    args = ["build", "--catalog", str(world[2]), "--out", str(root / "site")]
    done = subprocess.run(
        [sys.executable, str(script), str(named[where]), *args], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-500:]
    check_after(world, root, capsys)
