"""Where the project's own files are: one place, so no module counts parent folders."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
GOLDENS = ROOT / "goldens"
MKDOCS_YML = ROOT / "mkdocs.yml"
WEB_RIG = ROOT / "web" / "rig"  # the rig builder's browser code, shipped as assets/rig/
