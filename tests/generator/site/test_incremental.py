"""Incremental builds: only what an edit affects is rendered; the rest keeps bytes and inode."""

from __future__ import annotations

import dataclasses
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.paths import TEMPLATES
from backpressure.generator.records import ResultRow
from backpressure.generator.site import scenarios as site_scenarios
from backpressure.generator.site import search as site_search
from backpressure.generator.site.build import BuildReport, build_site
from backpressure.generator.site.pages import page_path
from backpressure.generator.site.publish import assemble
from backpressure.generator.site.publish.cache import RenderCache

from tests.generator.fixtures import COMBOS, _curves, make_rows, write_fixture, write_sweep

GPU = "rtx-4090"
BANDWIDTH = "bandwidth_bytes_per_s: 1_008_000_000_000"


@dataclass
class Project:
    """A catalog copy, its fixture sweep, and the site built from them."""

    root: Path
    catalog: Path
    sweep: Path
    out: Path
    rows: list[ResultRow]
    first: BuildReport
    seed: Path | None = None
    rows_before: list[ResultRow] | None = None

    def build(self, **kwargs: object) -> BuildReport:
        return build_site(self.sweep, self.out, self.catalog, **kwargs)  # type: ignore[arg-type]

    def edit_gpu(self, old: str, new: str) -> Catalog:
        """Edit the GPU's YAML and re-sweep (the fixture stands in for the sweep)."""
        path = self.catalog / "gpus" / f"{GPU}.yaml"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
        cat = load_catalog(self.catalog)
        self.rows_before, self.rows = self.rows, write_fixture(self.sweep, cat=cat)
        return cat

    def clean(self, out: Path) -> BuildReport:
        """The same inputs built from scratch into ``out``."""
        assert self.seed is not None
        return clean_build(self.sweep, out, self.catalog, self.seed)


def _copy_catalog(cat: Catalog, dst: Path) -> Path:
    shutil.copytree(cat.root, dst, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return dst


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory, cat: Catalog) -> Path:
    """A render cache holding only the scenario pages (a second each), copied into each test's."""
    root = tmp_path_factory.mktemp("seed") / "site.cache"
    site_scenarios.scenario_contexts(cat.root / "scenarios", RenderCache(root))
    return root


def clean_build(sweep: Path, out: Path, catalog: Path, seed: Path) -> BuildReport:
    """A build from scratch (bar the scenario runs)."""
    shutil.copytree(seed, out.with_name(out.name + ".cache"))
    return build_site(sweep, out, catalog)


@pytest.fixture
def project(tmp_path: Path, cat: Catalog, seed: Path) -> Project:
    catalog = _copy_catalog(cat, tmp_path / "catalog")
    rows = write_fixture(tmp_path / "sweep", cat=load_catalog(catalog))
    first = clean_build(tmp_path / "sweep", tmp_path / "site", catalog, seed)
    project = Project(tmp_path, catalog, tmp_path / "sweep", tmp_path / "site", rows, first)
    project.seed = seed
    return project


def snapshot(site: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a site: inode and bytes."""
    return {
        p.relative_to(site).as_posix(): (p.stat().st_ino, p.read_bytes())
        for p in sorted(site.rglob("*"))
        if p.is_file()
    }


def assert_same_bytes(a: Path, b: Path) -> None:
    sa, sb = snapshot(a), snapshot(b)
    assert sorted(sa) == sorted(sb)
    different = [f for f in sa if sa[f][1] != sb[f][1]]
    assert different == []


def test_first_build_renders_every_page(project):
    assert sorted(project.first.rendered) == sorted(r.config_id for r in project.rows if r.fits)
    assert len(project.first.changed) == project.first.files
    assert project.first.removed == ()


def test_no_change_rebuild_rewrites_nothing(project):
    before = snapshot(project.out)
    again = project.build()
    assert again.rendered == ()
    assert again.changed == ()
    assert again.removed == ()
    after = snapshot(project.out)
    assert after == before  # same bytes, and the same files (inodes): nothing rewritten
    third = project.build()  # now the workspace is the tree from two builds ago
    assert (third.rendered, third.changed, third.removed) == ((), (), ())
    assert snapshot(project.out) == before


def _expected_renders(project: Project, cat: Catalog) -> set[str]:
    """Pages (configs that fit) whose row changed, that name the edited GPU (or a rig of it),
    or whose sibling links moved: a sibling that started or stopped fitting."""
    assert project.rows_before is not None
    old = {r.config_id: r for r in project.rows_before}
    new = {r.config_id: r for r in project.rows}
    devices = {GPU} | {rid for rid, rig in cat.rigs.items() if rig.gpu == GPU}
    direct = {cid for cid, r in new.items() if r != old.get(cid) or r.gpu in devices}
    flipped = {cid for cid, r in new.items() if cid in old and old[cid].fits != r.fits}

    def siblings(r: ResultRow) -> bool:
        return any(
            o.config_id in flipped
            and o.model == r.model
            and (
                o.gpu == r.gpu
                or (o.quant, o.context, o.kv_dtype) == (r.quant, r.context, r.kv_dtype)
            )
            for o in new.values()
        )

    return {cid for cid, r in new.items() if r.fits and (cid in direct or siblings(r))}


def test_one_gpu_edit_rerenders_only_what_it_affects(project, tmp_path):
    before = snapshot(project.out)
    cat = project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")
    report = project.build()

    expected = _expected_renders(project, cat)
    assert set(report.rendered) == expected
    assert 0 < len(expected) < len(project.rows)
    assert {r.gpu for r in project.rows if r.config_id not in expected} >= {
        "h100-sxm",
        "m2-ultra-192gb",
        "epyc-9654-768gb",
    }

    after = snapshot(project.out)
    changed = {f for f in after if f not in before or after[f][1] != before[f][1]}
    assert changed == set(report.changed)
    # Everything not reported changed is the very same file as before.
    for f in set(after) - changed:
        assert after[f] == before[f], f
    config_pages = {page_path(r.permalink) for r in project.rows}
    hubs = {f for f in changed if f.endswith(".html") and f not in config_pages}
    models = {r.model for r in project.rows if r.gpu in (GPU, f"2x-{GPU}")}
    allowed = {"index.html", "gpu/index.html", f"gpu/{GPU}/index.html", f"gpu/2x-{GPU}/index.html"}
    allowed |= {f"model/{m}/index.html" for m in models}
    allowed |= {f"gpu/{d}/{m}/index.html" for d in (GPU, f"2x-{GPU}") for m in models}
    # The LLM scenario runs on this GPU: its page and the scenario index move too.
    scenario = "scenario/llm-7b-q4-24gb/index.html"
    allowed |= {"scenario/index.html", scenario}
    # Published serving runs on this GPU are replayed on the accuracy page.
    allowed.add("accuracy/index.html")
    # The rig builder states the size of this GPU's data file, which moved with it.
    allowed.add("rig/index.html")
    assert f"gpu/{GPU}/index.html" in hubs  # the spec table shows the bandwidth
    assert scenario in hubs
    assert hubs <= allowed
    for untouched in (
        "methodology/index.html",
        "gpu/h100-sxm/index.html",
        "scenario/app-postgres/index.html",
        "rig/data/gpu/h100-sxm.json",
    ):
        assert after[untouched] == before[untouched]
    assert f"rig/data/gpu/{GPU}.json" in changed  # the builder's data follows the catalog

    # And the result is exactly what a build from scratch gives.
    clean = project.clean(tmp_path / "clean")
    assert len(clean.rendered) == sum(r.fits for r in project.rows)
    assert_same_bytes(project.out, tmp_path / "clean")


def test_removed_config_and_device_leave_the_site(project, tmp_path):
    keep = [c for c in COMBOS if c[0] != "epyc-9654-768gb"]
    rows = write_fixture(project.sweep, keep, load_catalog(project.catalog))
    report = project.build()
    assert report.rendered == ()
    gone = [r for r in project.rows if r.gpu == "epyc-9654-768gb"]
    assert gone
    for r in gone:
        assert r.permalink + "index.html" in report.removed
        assert not (project.out / r.permalink).exists()
    assert "gpu/epyc-9654-768gb/index.html" in report.removed
    assert len(rows) == len(project.rows) - len(gone)
    project.clean(tmp_path / "clean")
    assert_same_bytes(project.out, tmp_path / "clean")


def test_template_change_rerenders_every_config(project, tmp_path):
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    base = project.build(templates=templates)
    assert base.rendered == ()  # a copy of the same templates is the same version
    page = templates / "config.html.j2"
    page.write_text(page.read_text() + "<!-- edited -->\n")
    report = project.build(templates=templates)
    assert sorted(report.rendered) == sorted(r.config_id for r in project.rows if r.fits)
    for r in (r for r in project.rows if r.fits):
        assert r.permalink + "index.html" in report.changed
        assert "<!-- edited -->" in (project.out / r.permalink / "index.html").read_text()


def _edit_code(monkeypatch: pytest.MonkeyPatch, rel: str) -> None:
    """Make every key see ``rel`` (a project source file) as edited."""
    from backpressure.generator import keys

    real = keys.read_bytes
    edited = keys.ROOT / rel
    assert edited.is_file()
    monkeypatch.setattr(
        keys, "read_bytes", lambda p: real(p) + (b"\n# edited\n" if p == edited else b"")
    )


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[object]]:
    """Scenario runs and mkdocs builds from here on (mkdocs runs when a hub page changed)."""
    runs: list[str] = []
    builds: list[object] = []
    run, build = site_scenarios._context, assemble.mkdocs_build

    def counting(loaded: Any, capacity: Any = None) -> dict[str, Any]:
        runs.append(loaded.scenario.id)
        return run(loaded, capacity)

    def counted(*args: Path) -> None:
        builds.append(args)
        build(*args)

    monkeypatch.setattr(site_scenarios, "_context", counting)
    monkeypatch.setattr(assemble, "mkdocs_build", counted)
    return runs, builds


def test_an_edit_to_page_code_rerenders_every_config_and_nothing_else(project, monkeypatch):
    # The config pages' code is derived from the imports of the module that
    # renders them; chart_pack.py was once missing from a hand-kept list.
    runs, builds = _count_runs(monkeypatch)
    _edit_code(monkeypatch, "generator/site/chart_pack.py")
    report = project.build()
    assert sorted(report.rendered) == sorted(r.config_id for r in project.rows if r.fits)
    # The scenario pages' cached contexts hold packed charts too: they are made
    # again. No hub page's text moved, so mkdocs is not run again.
    assert sorted(runs) == ["app-postgres", "llm-7b-q4-24gb"]
    assert builds == []
    assert report.changed == ()  # the edit is a comment: every page keeps its bytes


def test_an_edit_to_scenario_code_reruns_every_scenario(project, monkeypatch):
    # The scenario runs' code is derived from the imports of the module that runs them.
    runs, _ = _count_runs(monkeypatch)
    _edit_code(monkeypatch, "engine/sim/loop.py")
    report = project.build()
    assert sorted(runs) == ["app-postgres", "llm-7b-q4-24gb"]
    assert report.changed == ()
    runs.clear()
    project.build()  # and once run, recalled
    assert runs == []


def test_an_edit_to_code_no_page_uses_renders_nothing(project, monkeypatch):
    runs, builds = _count_runs(monkeypatch)
    _edit_code(monkeypatch, "generator/cli/estimate.py")
    report = project.build()
    assert (report.rendered, report.changed, runs, builds) == ((), (), [], [])


def test_full_rerenders_everything_and_changes_nothing(project):
    before = snapshot(project.out)
    report = project.build(full=True)
    assert len(report.rendered) == sum(r.fits for r in project.rows)
    assert report.changed == ()  # new files, same bytes
    after = snapshot(project.out)
    assert {f: b for f, (_i, b) in after.items()} == {f: b for f, (_i, b) in before.items()}


def test_failed_build_leaves_the_site_and_the_cache_usable(project, tmp_path, monkeypatch):
    before = snapshot(project.out)
    project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")

    def broken(site_dir: Path, output: Path | None = None, glob: str | None = None) -> None:
        raise assemble.SiteError("pagefind failed: simulated")

    # Fails late: after the changed pages were rendered into the workspace.
    monkeypatch.setattr(site_search, "index", broken)
    with pytest.raises(assemble.SiteError, match="simulated"):
        project.build()
    assert snapshot(project.out) == before
    assert not (project.root / "site.tmp").exists()

    monkeypatch.undo()
    report = project.build()
    assert report.rendered == ()  # the failed build's renders are in the cache already
    project.clean(tmp_path / "clean")
    assert_same_bytes(project.out, tmp_path / "clean")


def test_evil_permalink_fails_and_nothing_escapes(project):
    before = snapshot(project.out)
    rows = make_rows(cat=load_catalog(project.catalog))
    evil = [dataclasses.replace(rows[0], permalink="../../escaped/"), *rows[1:]]
    write_sweep(project.sweep, evil, [_curves(r) for r in rows])
    with pytest.raises(assemble.SiteError, match="outside the site"):
        project.build()
    assert snapshot(project.out) == before
    assert not (project.root / "escaped").exists()
    assert not (project.root.parent / "escaped").exists()


def test_a_damaged_workspace_is_repaired(project, tmp_path):
    project.build()  # the first site is now the kept workspace, site.old
    old = project.root / "site.old"
    assert old.is_dir()
    page = next(old.rglob("gpu/*/*/*/*/index.html"))
    page.unlink()
    page.write_text("stale")  # a file with other bytes under the same name
    (old / "stray.html").write_text("<p>left behind</p>")
    (old / "api" / "models.json").unlink()
    (old / "api" / "models.json").mkdir()  # a directory where a file belongs
    (old / "link.html").symlink_to(old / "index.html")
    shutil.rmtree(old / "methodology")
    (old / "methodology").write_text("a file where a directory belongs")
    report = project.build()
    assert report.changed == ()  # the published site it replaces was intact
    project.clean(tmp_path / "clean")
    assert_same_bytes(project.out, tmp_path / "clean")


def test_only_the_scenario_on_the_edited_gpu_runs_again(project, monkeypatch):
    runs: list[str] = []
    real = site_scenarios._context

    def counting(loaded: Any, capacity: Any = None) -> dict[str, Any]:
        runs.append(loaded.scenario.id)
        return real(loaded, capacity)

    monkeypatch.setattr(site_scenarios, "_context", counting)
    project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")
    project.build()
    assert runs == ["llm-7b-q4-24gb"]  # on the RTX 4090; app-postgres is recalled
    runs.clear()
    project.build()
    assert runs == []


def test_check_links_checks_each_page(tmp_path):
    files = {"index.html", "gpu/a/index.html", "gpu/b/index.html", "assets/x.css"}
    pages = [
        ("gpu/a/index.html", ["../../assets/x.css", "../../gpu/a/", "badge.svg"]),
        ("gpu/b/index.html", ["../../assets/x.css", "../../assets/y.css", "../../../x"]),
    ]
    bad = assemble.check_links(pages, files)
    assert bad == [
        "gpu/a/index.html: badge.svg",
        "gpu/b/index.html: ../../assets/y.css",
        "gpu/b/index.html: ../../../x",
    ]


def test_a_directory_that_is_not_a_cache_is_left_alone(tmp_path, cat):
    write_fixture(tmp_path / "sweep", cat=cat)
    (tmp_path / "site.cache").mkdir()
    (tmp_path / "site.cache" / "mine.txt").write_text("keep me")
    with pytest.raises(assemble.SiteError, match="not a render cache"):
        build_site(tmp_path / "sweep", tmp_path / "site")
    assert (tmp_path / "site.cache" / "mine.txt").read_text() == "keep me"


def test_cache_files_are_read_only(project):
    page = project.out / project.rows[0].permalink / "index.html"
    assert not page.stat().st_mode & 0o222
    assert re.search(r"<html", page.read_text())


def test_losing_the_cache_costs_renders_not_correctness(project):
    before = snapshot(project.out)
    (project.root / "site.cache" / "index.json").write_text("not json")
    report = project.build()
    assert len(report.rendered) == sum(r.fits for r in project.rows)
    assert report.changed == ()
    assert snapshot(project.out) == before  # same bytes, so the same stored files
    # (moved away first: the last build's trash remover may still be deleting in there)
    (project.root / "site.cache").rename(project.root / "lost-cache")
    report = project.build()
    assert len(report.rendered) == sum(r.fits for r in project.rows)
    assert report.changed == ()
    after = snapshot(project.out)
    assert {f: b for f, (_i, b) in after.items()} == {f: b for f, (_i, b) in before.items()}


def test_mkdocs_runs_only_when_a_hub_page_changes(project, monkeypatch):
    calls = []
    real = assemble.mkdocs_build

    def counted(*args: Path) -> None:
        calls.append(args)
        real(*args)

    monkeypatch.setattr(assemble, "mkdocs_build", counted)
    project.build()
    assert calls == []  # no hub page changed: mkdocs' last output is reused
    project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")
    project.build()
    assert len(calls) == 1


def test_obsolete_files_are_deleted_after_the_build(project):
    import time

    project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")
    project.build()
    project.edit_gpu("1_200_000_000_000", "1_300_000_000_000")
    project.build()  # frees what the first edit made obsolete
    cache = project.root / "site.cache"
    deadline = time.monotonic() + 30  # a detached process deletes them
    while any(p.name.startswith("trash") for p in cache.iterdir()):
        assert time.monotonic() < deadline, sorted(p.name for p in cache.iterdir())
        time.sleep(0.1)
    stored = {p.name for p in (cache / "files").rglob("*") if p.is_file()}
    published = {p.stat().st_ino for p in project.out.rglob("*") if p.is_file()}
    cached = {p.stat().st_ino for p in (cache / "files").rglob("*") if p.is_file()}
    assert published <= cached  # every published file is a stored one
    assert len(stored) == len(cached)


def test_scenario_pages_follow_the_catalog_given(tmp_path: Path, cat: Catalog) -> None:
    # The LLM scenario runs on an RTX 4090 from the catalog being built, not
    # from the bundled one: halve its bandwidth and the run must change.
    root = _copy_catalog(cat, tmp_path / "catalog")
    gpu = root / "gpus" / "rtx-4090.yaml"
    text = gpu.read_text(encoding="utf-8")
    old = re.search(r"^bandwidth_bytes_per_s: ([\d_]+)$", text, flags=re.MULTILINE)
    assert old is not None
    slower = int(old.group(1).replace("_", "")) // 2
    gpu.write_text(text.replace(old.group(0), f"bandwidth_bytes_per_s: {slower}"), encoding="utf-8")
    ours = {
        c["id"]: c
        for c in site_scenarios.scenario_contexts(root / "scenarios", cat=load_catalog(root))
    }
    bundled = {
        c["id"]: c for c in site_scenarios.scenario_contexts(cat.root / "scenarios", cat=cat)
    }
    assert ours["llm-7b-q4-24gb"]["report"] != bundled["llm-7b-q4-24gb"]["report"]
    assert ours["app-postgres"] == bundled["app-postgres"]


def test_search_indexes_hubs_and_gpu_x_model_pages_never_config_pages(project, monkeypatch):
    # One bundle, fed the hubs, the GPU x model pages and the docs: a config page
    # is one click from its GPU x model page, and indexing each cost a file per page.
    fed: list[tuple[str, list[str]]] = []
    real = site_search.index

    def counting(site_dir: Path, pages: list[str], output: Path) -> None:
        fed.append((output.name, pages))
        real(site_dir, pages, output)

    monkeypatch.setattr(site_search, "index", counting)
    project.edit_gpu(BANDWIDTH, "bandwidth_bytes_per_s: 1_200_000_000_000")
    report = project.build()
    assert [name for name, _ in fed] == [site_search.DIR]
    pages = fed[0][1]
    assert not [p for p in pages if site_search.is_config(p)]
    assert {f"gpu/{r.gpu}/{r.model}/index.html" for r in project.rows} <= set(pages)
    assert {f"model/{r.model}/index.html" for r in project.rows} <= set(pages)
    assert not any(f.startswith("pagefind-configs/") for f in snapshot(project.out))
    assert report.rendered  # the pages themselves did change
