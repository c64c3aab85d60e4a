from .base import Agent, Result, detect_language
from .react import ReActAgent

__all__ = ["Agent", "Result", "ReActAgent", "detect_language"]
