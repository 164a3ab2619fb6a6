"""``backpressure build``: thin command over build_site, sweeping only when asked."""

from __future__ import annotations

from backpressure.generator.cli.build import build_command
from backpressure.generator.site import hosting
from click.testing import CliRunner

from tests.generator.fixtures import write_fixture


def test_build_reuses_results(tmp_path, cat, monkeypatch):
    write_fixture(tmp_path / "sweep", cat=cat)
    out = tmp_path / "site"
    argv = ["--results", str(tmp_path / "sweep"), "--out", str(out)]
    res = CliRunner().invoke(build_command, argv)
    assert res.exit_code == 0, res.output
    assert "11 configs" in res.output
    assert (out / "index.html").is_file()
    # The size line counts what was published, against what GitHub Pages takes.
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    files = sum(1 for p in out.rglob("*") if p.is_file())
    assert f"size: {total / 1e9:.3f} GB in {files:,} files" in res.stdout
    assert "under the 1 GB GitHub Pages publishes" in res.stdout
    assert "warning" not in res.stderr
    # Over the limit the site is still built and published here, with a warning.
    monkeypatch.setattr(hosting, "PAGES_MAX_BYTES", total // 2)
    res = CliRunner().invoke(build_command, argv)
    assert res.exit_code == 0, res.output
    assert "100.0 % over the 1 GB GitHub Pages publishes" in res.stdout
    assert res.stderr.startswith("backpressure: warning: too large for GitHub Pages: size: ")


def test_build_runs_the_sweep_when_no_results(tmp_path, cat, monkeypatch):
    from backpressure.generator.sweep import run

    calls = []

    def fake_sweep(catalog_dir, out_dir, jobs, progress=None):
        calls.append((catalog_dir, out_dir, jobs))
        rows = write_fixture(out_dir, cat=cat)
        for done in range(len(rows) + 1):
            progress(done, len(rows))
        return run.SweepStats(len(rows), len(rows), 0, sum(r.fits for r in rows))

    monkeypatch.setattr(run, "run_sweep", fake_sweep)
    monkeypatch.setattr(run, "default_jobs", lambda: 7)
    out = tmp_path / "site"
    res = CliRunner().invoke(build_command, ["--out", str(out), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    assert calls == [(None, tmp_path / "site.sweep", 2)]
    assert (out / "api" / "models.json").is_file()
    # The sweep's progress goes to stderr (a line at the end at least, off a terminal).
    assert "sweep: 11/11 configs" in res.stderr
    assert "sweep: 11 configs" in res.stderr
    # Without --jobs the sweep takes every core, as `backpressure sweep` does.
    res = CliRunner().invoke(build_command, ["--out", str(out)])
    assert res.exit_code == 0, res.output
    assert calls[-1][2] == 7


def test_build_failure_is_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(
        build_command, ["--results", str(tmp_path / "empty"), "--out", str(tmp_path / "site")]
    )
    assert res.exit_code == 2
    lines = res.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("backpressure: error: ")
    assert "previous site" in lines[0]
    assert not (tmp_path / "site").exists()


def test_rebuild_renders_nothing_unless_full(tmp_path, cat):
    rows = write_fixture(tmp_path / "sweep", cat=cat)
    paged = sum(r.fits for r in rows)  # only configs that fit have a page to render
    assert 0 < paged < 11
    args = ["--results", str(tmp_path / "sweep"), "--out", str(tmp_path / "site")]
    first = CliRunner().invoke(build_command, args)
    assert f"11 configs ({paged} rendered)" in first.output, first.output
    again = CliRunner().invoke(build_command, args)
    assert again.exit_code == 0, again.output
    assert "11 configs (0 rendered)" in again.output
    assert "(0 changed, 0 removed)" in again.output
    full = CliRunner().invoke(build_command, [*args, "--full"])
    assert f"11 configs ({paged} rendered)" in full.output
    assert "(0 changed, 0 removed)" in full.output


def test_build_with_a_relative_out_from_another_directory(tmp_path, cat, monkeypatch):
    # mkdocs resolves relative paths against mkdocs.yml: the build must not hand
    # it a path relative to the working directory.
    write_fixture(tmp_path / "sweep", cat=cat)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(build_command, ["--results", "sweep", "--out", "rel/site"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "rel" / "site" / "index.html").is_file()
    assert (tmp_path / "rel" / "site.cache").is_dir()
