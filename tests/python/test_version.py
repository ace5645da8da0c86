"""One version everywhere: VERSION (meson's project version, so sluiced --version),
sluice.__version__ (sluicectl --version, pyproject.toml's dynamic version) and the Debian
changelog's newest entry."""

from __future__ import annotations

import re
from pathlib import Path

from sluice import __version__

REPO = Path(__file__).resolve().parents[2]


def test_python_version_is_the_version_file() -> None:
    assert (REPO / "VERSION").read_text().strip() == __version__


def test_debian_changelog_has_the_version() -> None:
    changelog = REPO / "debian" / "changelog"
    if not changelog.exists():
        return
    first = changelog.read_text().splitlines()[0]
    m = re.match(r"sluice \(([^)-]+)(-[^)]*)?\)", first)
    assert m, first
    assert m.group(1) == __version__, first
