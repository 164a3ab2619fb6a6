"""The same inputs give the same site, byte for byte, wherever it is built.

Pagefind's directory walk meets files in the order the filesystem lists them,
which differs between ext4 and tmpfs: the build feeds it pages in sorted order.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from backpressure.generator.site.build import build_site

from tests.generator.fixtures import write_fixture

SHM = Path("/dev/shm")


def files(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


@pytest.mark.skipif(not SHM.is_dir(), reason="no tmpfs at /dev/shm")
def test_a_site_built_on_ext4_and_on_tmpfs_is_the_same(tmp_path, cat):
    write_fixture(tmp_path / "sweep", cat=cat)
    build_site(tmp_path / "sweep", tmp_path / "disk" / "site")
    other = Path(tempfile.mkdtemp(dir=SHM))
    try:
        build_site(tmp_path / "sweep", other / "site")
        a, b = files(tmp_path / "disk" / "site"), files(other / "site")
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert sorted(a) == sorted(b)
    assert [f for f in a if a[f] != b[f]] == []
    assert any(f.startswith("pagefind/") for f in a)
