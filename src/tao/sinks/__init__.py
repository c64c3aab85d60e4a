"""Sinks: whatever shows or stores a run reads the same event stream.

``ConsoleSink`` (rich, imported only when one is made) and ``JsonlTrace`` / ``read_trace``.
"""

from .console import ConsoleSink
from .jsonl import JsonlTrace, read_trace

__all__ = ["ConsoleSink", "JsonlTrace", "read_trace"]
