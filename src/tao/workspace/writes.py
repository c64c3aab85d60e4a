"""What a write would lose, or only repeat: the guards ``write_file`` and ``append_file`` apply
before anything reaches the disk.

A small model writes a module one function per ``write_file``, so each write replaces the one
before (the issue 27 filer's module ended up holding only its ``__main__`` block); told to
append instead, it appends the whole file again below itself, or the same lines twice; and it
writes an unchanged file over and over (2026-12-07). Each guard reads the file's old text and
the new content, and says which of these it is; ``tools`` turns that into a refusal or a note.
Python and JavaScript are read (``defs``); other files only as text.
"""

from __future__ import annotations

from .defs import defined, kind_of, used


def dropped(name: str, old: str, new: str) -> list[str]:
    """The functions and classes ``old`` defines that ``new`` no longer does (file ``name``)."""
    kind = kind_of(name)
    if kind is None or not old:
        return []
    kept = set(defined(new, kind))
    return [n for n in defined(old, kind) if n not in kept]


def still_called(name: str, new: str, gone: list[str]) -> list[str]:
    """What ``new`` calls of the definitions it drops: an addition sent as a rewrite
    (``primes_up_to`` written over the ``is_prime`` it calls). Writing it would lose work and
    leave a file that fails, so ``write_file`` refuses it, with the way to add it."""
    kind = kind_of(name)
    return used(new, kind, gone) if kind and gone else []


def repeated(name: str, old: str, content: str) -> bool:
    """Whether appending ``content`` adds only definitions the file holds word for word: the
    1.5B appended what a refused rewrite held after it had written the file whole - two copies
    of each function, and every later ``edit_file`` "occurs 2 times"."""
    kind = kind_of(name)
    text = content.strip()
    return bool(kind and text and old and defined(text, kind) and text in old)


def after_resent(old: str, content: str) -> tuple[str, bool]:
    """``content`` less the whole file it starts with, and whether it did: asked to add a main
    block, the 1.5B sent the module again with the block below it."""
    text = old.strip()
    body = content.lstrip()
    if not text or not body.startswith(text):
        return content, False
    rest = body[len(text):].lstrip("\n")
    return (rest, True) if rest.strip() else (content, False)
