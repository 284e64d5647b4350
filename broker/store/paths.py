"""Where `hashbroker serve` keeps its data when no `--data-dir` is given.

platformdirs' `user_data_dir` rules, written with the standard library so the broker keeps its
dependency list (and its import time) small.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_NAME = "hashbroker"
NULL_DATA_DIR = ":memory:"
"""The `--data-dir` value that keeps nothing: the broker runs with a `NullStore`."""


def default_data_dir(app: str = APP_NAME) -> Path:
    """Per-user data directory: $XDG_DATA_HOME/hashbroker (default ~/.local/share/hashbroker) on
    Linux and other Unixes, ~/Library/Application Support/hashbroker on macOS,
    %LOCALAPPDATA%\\hashbroker on Windows."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / app
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / app
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base_path = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base_path / app
