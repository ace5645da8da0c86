"""Installing sluice as an operator would (docs/install.md): `make install` into a DESTDIR
and `make uninstall` leaving nothing, the installed programs' versions, the man pages
rendered without a warning, the systemd unit's paths, `pip install .` giving working
commands, and sluicectl's completion offering switch and port names from a running daemon.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, Daemon

VERSION = (REPO / "VERSION").read_text().strip()
PREFIX = "/opt/sluice-test"
MAN_PAGES = ["man8/sluiced.8", "man8/sluicectl.8", "man8/sluice-ofagent.8", "man8/sluice-gen.8",
             "man1/sluice-bench.1",
             "man1/sluice-placement.1", "man1/sluice-sockets.1"]


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess[str]:
    kw.setdefault("check", True)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def files_under(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if not p.is_dir())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory):
    """`make install PREFIX=/opt/sluice-test DESTDIR=...`; `make uninstall` at the end must
    leave no file behind."""
    destdir = tmp_path_factory.mktemp("destdir")
    r = run("make", "-C", REPO, "install", f"PREFIX={PREFIX}", f"DESTDIR={destdir}",
            check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    yield destdir / PREFIX.lstrip("/")
    r = run("make", "-C", REPO, "uninstall", f"DESTDIR={destdir}", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_under(destdir) == []
    shutil.rmtree(destdir)
    # Leave the build directory configured as `make build` left it.
    run("meson", "configure", REPO / "build", "-Dprefix=/usr/local", "-Dsysconfdir=etc")


def test_everything_is_installed(installed: Path) -> None:
    expected = ["sbin/sluiced", "bin/sluicectl", "bin/sluice-bench", "bin/sluice-gen",
                "bin/sluice-ofagent", "share/doc/sluice/openflow.md",
                "bin/sluice-placement", "bin/sluice-sockets",
                "libexec/sluice/sluice-hugepages", "lib/systemd/system/sluiced.service",
                "lib/sysusers.d/sluice.conf", "etc/sluice/sluiced.conf", "etc/default/sluiced",
                "share/bash-completion/completions/sluicectl",
                "share/zsh/vendor-completions/_sluicectl", "share/doc/sluice/install.md",
                "lib/python3/dist-packages/sluice/ctl.py",
                *(f"share/man/{m}" for m in MAN_PAGES)]
    missing = [e for e in expected if not (installed / e).exists()]
    assert missing == []


def test_versions_agree(installed: Path) -> None:
    r = run(installed / "sbin/sluiced", "--version")
    assert r.stdout.startswith(f"sluiced {VERSION} (DPDK ")
    env = {**os.environ, "PYTHONPATH": str(installed / "lib/python3/dist-packages")}
    r = run(installed / "bin/sluicectl", "--version", env=env)
    assert r.stdout.strip() == f"sluicectl {VERSION}"
    r = run(installed / "bin/sluice-bench", "--help", env=env)
    assert "sluice-bench" in r.stdout


def test_unit_names_the_installed_files(installed: Path) -> None:
    unit = (installed / "lib/systemd/system/sluiced.service").read_text()
    assert f"ExecStart={PREFIX}/sbin/sluiced " in unit
    assert f"--config {PREFIX}/etc/sluice/sluiced.conf" in unit
    assert f"ExecStartPre={PREFIX}/libexec/sluice/sluice-hugepages" in unit
    assert f"EnvironmentFile=-{PREFIX}/etc/default/sluiced" in unit
    for line in ("Type=notify", "RuntimeDirectory=sluice", "StateDirectory=sluice",
                 "Restart=on-failure"):
        assert line in unit.splitlines()


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_renders_without_warnings(installed: Path, page: str) -> None:
    path = installed / "share/man" / page
    env = {**os.environ, "LC_ALL": "C.UTF-8", "MANWIDTH": "80"}
    r = run("man", "--warnings=w", "-l", path, env=env)
    assert r.stderr == ""
    name = Path(page).stem
    assert re.search(rf"^NAME\n\s+{re.escape(name)} - ", r.stdout, re.M), r.stdout[:400]
    r = run("groff", "-man", "-ww", "-z", "-Tutf8", path, env=env)
    assert r.stderr == ""


def test_pip_install_gives_working_commands(tmp_path: Path) -> None:
    """`pip install .` in a fresh venv, as a user would (pip fetches setuptools for the
    build from the package index): the console entry points of pyproject.toml."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    src = tmp_path / "src"     # a copy: pip's build must not write into the checkout
    top_skip = {"build", ".venv", ".git", "bench", "tests"}
    shutil.copytree(REPO, src, ignore=lambda d, names: [
        n for n in names if (Path(d) == REPO and n in top_skip) or n == "__pycache__"
        or n.endswith(".egg-info")])
    r = run(venv / "bin/pip", "install", "-q",
            "--disable-pip-version-check", src, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert run(venv / "bin/sluicectl", "--version").stdout.strip() == f"sluicectl {VERSION}"
    r = run(venv / "bin/sluicectl", "--socket", tmp_path / "none.sock", "show", check=False)
    assert r.returncode == 3 and "no such socket" in r.stderr
    r = run(venv / "bin/sluice-bench", "--help")
    assert "compare" in r.stdout


def complete(script: Path, words: list[str], path_dir: Path) -> list[str]:
    """What bash completion offers for WORDS (the last one being completed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    prog = f"""
source {script}
COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}
COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}
_shtab_sluicectl sluicectl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = {**os.environ, "PATH": f"{path_dir}:{os.environ['PATH']}"}
    r = run("bash", "-c", prog, env=env)
    return sorted(w for w in r.stdout.split() if w)


def test_completion_offers_verbs_switches_and_ports(daemon: Daemon) -> None:
    script = REPO / "build" / "dist" / "completion" / "sluicectl"
    if not script.exists():
        pytest.skip("completion not built (shtab missing: scripts/setup.sh)")
    bindir = REPO / "bin"
    daemon.call("add-switch", name="br0", mode="learn")
    daemon.call("add-switch", name="br1", mode="patch")
    daemon.call("add-port", switch="br0", name="p0", spec="null:")
    daemon.call("add-port", switch="br0", name="p1", spec="null:")
    daemon.call("add-port", switch="br1", name="q0", spec="null:")
    sock = str(daemon.socket)
    assert {"add-switch", "del-port", "set-port", "show", "stats"} <= set(
        complete(script, ["sluicectl", ""], bindir))
    assert complete(script, ["sluicectl", "--socket", sock, "del-switch", ""],
                    bindir) == ["br0", "br1"]
    assert complete(script, ["sluicectl", "--socket", sock, "del-port", "br0", ""],
                    bindir) == ["p0", "p1"]
    assert complete(script, ["sluicectl", "--socket", sock, "set-port", "br1", "q"],
                    bindir) == ["q0"]
    assert complete(script, ["sluicectl", "--socket", sock, "stats", "b"],
                    bindir) == ["br0", "br1"]
