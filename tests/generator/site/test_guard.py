"""A build touches only what it made: no other directory is moved, emptied or written into.

And one build per output at a time: a second one is refused while the first holds the lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from backpressure.generator.cli.main import main
from backpressure.generator.site.build import build_site
from backpressure.generator.site.publish import guard
from backpressure.generator.site.publish.assemble import SITE_MARKER, SiteError

from tests.generator.fixtures import write_fixture


@pytest.fixture(scope="module")
def seed(tmp_path_factory, cat):
    """A render cache holding the scenario pages (seconds to run), copied where a test builds."""
    base = tmp_path_factory.mktemp("seed")
    write_fixture(base / "sweep", cat=cat)
    build_site(base / "sweep", base / "site")
    return base / "site.cache"


@pytest.fixture
def sweep(tmp_path, cat):
    write_fixture(tmp_path / "sweep", cat=cat)
    return tmp_path / "sweep"


def seeded(seed: Path, tmp_path: Path) -> None:
    subprocess.run(["cp", "-a", str(seed), str(tmp_path / "site.cache")], check=True)


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def build(capsys, sweep: Path, out: Path) -> tuple[int, str]:
    code = main(["build", "--results", str(sweep), "--out", str(out)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("suffix", ["", ".old", ".tmp"])
def test_a_directory_that_is_not_a_build_is_refused(tmp_path, sweep, capsys, suffix):
    theirs = tmp_path / f"site{suffix}"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("years of work")
    before = tree(theirs)
    code, err = build(capsys, sweep, tmp_path / "site")
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"{theirs} exists and is not a site this program built" in err
    assert tree(theirs) == before
    if suffix:
        assert not (tmp_path / "site").exists()


def test_a_file_in_the_way_is_refused(tmp_path, sweep, capsys):
    (tmp_path / "site").write_text("notes")
    code, err = build(capsys, sweep, tmp_path / "site")
    assert code == 2
    assert "is a file" in err  # click refuses it before the build looks
    assert err.count("\n") == 1
    assert (tmp_path / "site").read_text() == "notes"
    with pytest.raises(SiteError, match="is not a site this program built"):
        build_site(sweep, tmp_path / "site")


def test_a_cache_that_is_not_ours_is_refused(tmp_path, sweep, capsys):
    cache = tmp_path / "site.cache"
    cache.mkdir()
    (cache / "photos").mkdir()
    (cache / "photos" / "a.jpg").write_bytes(b"\xff\xd8")
    code, err = build(capsys, sweep, tmp_path / "site")
    assert code == 2
    assert "is not a render cache" in err
    assert (cache / "photos" / "a.jpg").read_bytes() == b"\xff\xd8"


def test_a_sweep_directory_that_is_not_ours_is_refused(tmp_path, capsys):
    theirs = tmp_path / "site.sweep"
    theirs.mkdir()
    (theirs / "results.csv").write_text("my,own,data\n")
    (theirs / "analysis.ipynb").write_text("{}")
    code = main(["build", "--out", str(tmp_path / "site")])
    err = capsys.readouterr().err
    assert code == 2
    assert "is not a sweep this program wrote" in err
    assert (theirs / "results.csv").read_text() == "my,own,data\n"


def test_empty_absent_and_earlier_builds_are_fine(tmp_path, sweep, capsys, seed):
    seeded(seed, tmp_path)
    (tmp_path / "site").mkdir()  # empty: fine
    assert build(capsys, sweep, tmp_path / "site")[0] == 0
    assert (tmp_path / "site" / SITE_MARKER).is_file()
    assert build(capsys, sweep, tmp_path / "site")[0] == 0  # an earlier build: fine
    assert (tmp_path / "site.old" / SITE_MARKER).is_file()
    assert build(capsys, sweep, tmp_path / "site")[0] == 0  # and again, from site.old
    assert not (tmp_path / "site.tmp").exists()


def test_a_second_build_is_refused_while_one_runs(tmp_path, sweep, capsys, seed):
    seeded(seed, tmp_path)
    out = tmp_path / "site"
    fd = os.open(tmp_path / "site.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another build, as far as this one can tell
    try:
        with pytest.raises(SiteError, match="another build is writing"):
            build_site(sweep, out)
        code, err = build(capsys, sweep, out)
        assert code == 2
        assert "another build is writing" in err
        assert "wait for it to finish" in err
    finally:
        os.close(fd)
    assert not out.exists()
    assert build(capsys, sweep, out)[0] == 0  # the lock went with its holder


def test_the_lock_is_reentrant_within_one_build(tmp_path):
    with guard.build_lock(tmp_path / "site"), guard.build_lock(tmp_path / "site"):
        pass


@pytest.mark.parametrize(
    ("err", "text"),
    [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system")],
)
def test_a_full_or_read_only_disk_is_one_line_and_the_site_stays(
    tmp_path, sweep, capsys, monkeypatch, err, text, seed
):
    seeded(seed, tmp_path)
    out = tmp_path / "site"
    assert build(capsys, sweep, out)[0] == 0
    before = tree(out)
    from backpressure.generator.site.publish import cache

    real = os.fdopen

    class Failing:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()

        def write(self, data):
            raise OSError(err, os.strerror(err))

    monkeypatch.setattr(cache.os, "fdopen", lambda fd, mode: Failing(real(fd, mode)))
    write_fixture(tmp_path / "sweep", combos=[("rtx-4090", "llama-3.1-8b", "q4_k_m", 4096)])
    code, out_err = build(capsys, sweep, out)
    assert code == 2
    assert out_err.count("\n") == 1, out_err
    assert text in out_err
    assert "the previous site, if any, is unchanged" in out_err
    assert tree(out) == before


def test_any_command_meeting_an_unwritable_place_says_one_line(tmp_path, capsys):
    from tests.tiny_catalog import make_tiny_catalog

    catalog = make_tiny_catalog(tmp_path)
    code = main(["sweep", "--catalog", str(catalog), "--out", "/proc/backpressure/sweep"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]  # (after the sweep's progress line)
    assert last.startswith("backpressure: error: /proc/backpressure"), err
    assert err.count("error:") == 1


def test_a_sweep_from_before_the_marker_is_taken_as_ours(tmp_path):
    # Only the names a sweep writes: replacing them loses nothing (CI caches such a folder).
    old = tmp_path / "site.sweep"
    old.mkdir()
    for name in ("results.csv", "curves.jsonl", "inputs.json", "results.csv.tmp"):
        (old / name).write_text("x")
    guard.check_sweep_dir(old)
    (old / "notes.txt").write_text("mine")
    with pytest.raises(SiteError, match="is not a sweep this program wrote"):
        guard.check_sweep_dir(old)
