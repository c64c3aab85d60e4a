from .base import Agent, Result, detect_language
from .codeact import CodeActAgent
from .react import ReActAgent

__all__ = ["Agent", "CodeActAgent", "Result", "ReActAgent", "detect_language"]
