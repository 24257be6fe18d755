"""Debian's bubblewrap (`bwrap`) for the code-interpreter tests: found on PATH, or installed with apt-get.

`ensure_bwrap()` returns the path of `bwrap`. When it is missing and this session is root, it installs the
`bubblewrap` package first (waiting up to ten minutes for apt's lock, which other sessions may hold; after a
failed install it runs `apt-get update` once and tries again). It then checks that bwrap can really make a
sandbox here (new namespaces, no network): a machine where it cannot is `BubblewrapUnavailable`, naming why.
"""

from __future__ import annotations

import os
import shutil
import subprocess

DEBIAN_PACKAGE = "bubblewrap"


class BubblewrapUnavailable(RuntimeError):
    """No bwrap here and none can be installed, or it cannot make a sandbox on this machine."""


def find_bwrap() -> str | None:
    return shutil.which(os.environ.get("BWRAP") or "bwrap")


def install_bwrap() -> str:
    if os.geteuid() != 0:
        raise BubblewrapUnavailable("bwrap is not installed and this session is not root: apt-get install bubblewrap")
    cmd = ["apt-get", "install", "-y", "-o", "DPkg::Lock::Timeout=600", DEBIAN_PACKAGE]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if run.returncode != 0:
        update = subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env, timeout=600)
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if run.returncode != 0:
            raise BubblewrapUnavailable(
                f"apt-get install bubblewrap failed:\n{update.stderr[-800:]}{run.stderr[-2000:]}"
            )
    found = find_bwrap()
    if found is None:
        raise BubblewrapUnavailable("apt-get installed bubblewrap but no bwrap is on PATH")
    return found


def ensure_bwrap() -> str:
    """The path of a bwrap that works here (installed first when missing and root)."""
    bwrap = find_bwrap() or install_bwrap()
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        raise BubblewrapUnavailable(f"bwrap cannot make a sandbox on this machine: {probe.stderr.strip()}")
    return bwrap
