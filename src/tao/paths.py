"""Where tao keeps what a user makes, decided once for every room that writes there."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Where tao keeps what a user makes - the audit log, the run journal, long-term memory, the
    chat's history: ``$TAO_DATA_DIR``, else ``$XDG_DATA_HOME/tao``, else ``~/.local/share/tao``
    (made when first written). The one place this is decided."""
    if os.environ.get("TAO_DATA_DIR"):
        return Path(os.environ["TAO_DATA_DIR"])
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "tao"
