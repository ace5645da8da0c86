"""sluice-bench: the benchmark harness."""

from __future__ import annotations

import shutil
from pathlib import Path


def program(repo: Path, built: str, name: str) -> Path:
    """A program of sluice's: REPO/BUILT as `make build` leaves it in a checkout; when
    there is none there (sluice-bench installed by a package or `pip install`), NAME on
    PATH (docs/install.md); the checkout's path when neither is found, so that the error
    names where it was looked for."""
    path = repo / built
    if path.exists():
        return path
    found = shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin")
    return Path(found) if found else path
