"""Exceptions for mistakes of the library's *user* (bad config, missing model, bad checksum).

What the model or a tool does wrong is never raised: it becomes an observation and the loop
goes on.
"""


class TaoError(Exception):
    """Base class of every exception tao raises on purpose."""


class ModelError(TaoError):
    """A model call failed for good (not retried, or retries exhausted)."""


class ModelConfigError(ModelError):
    """The endpoint refused us for a reason retrying cannot fix: bad key (401/403), unknown model
    or URL (404), a request it cannot accept (400)."""


class ScriptExhausted(ModelError):
    """A ScriptedModel was asked for more replies than it was given."""


class LocalModelError(TaoError):
    """The embedded model cannot be assembled or loaded (missing packages, checksum mismatch)."""


class ModelCrashed(ModelError):
    """The process that runs the embedded model died while answering (a fault in llama.cpp's
    native code, or killed). The run that was waiting ends with this; the next call starts a
    new process, so a server or an evaluation goes on."""
