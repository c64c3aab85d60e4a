"""``tao index DIR``: make a directory of documents searchable by agents (``search_docs``).

    tao index docs/                        # new and changed files; removed ones forgotten
    tao index docs/ --query "年假有几天？"   # and show the best passages with their file:line
    tao run "How many vacation days do I get?" --docs docs/    # the agent searches and cites

Markdown, text, HTML and PDF files are chunked with overlap and stored with their ``file:line``
in ``<data dir>/docs/`` (one SQLite file per directory; see ``tao.memory.rag``). Exit status: 0,
1 when some file could not be read (the others are indexed; each is named with why), 2 when DIR
is not a directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import safe_json
from .common import app, fail


def open_index(directory: Path, rebuild: bool = False):
    """The directory's index, brought up to date; (index, what was done). Exit 2 for a DIR that
    is not a directory."""
    from ..memory.rag import DocIndex

    if not directory.is_dir():
        raise fail(f"error: {directory} is not a directory", 2)
    index = DocIndex.for_dir(directory)
    return index, index.update(rebuild=rebuild)


@app.command("index")
def index_command(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The documents to index.")],
    query: Annotated[str | None, typer.Option(
        "--query", "-q", help="Then show the passages that best match this query.")] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=20, help="Passages to show.")] = 5,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Index every file again.")] = False,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print what was done as JSON.")] = False,
) -> None:
    """Index DIR's Markdown, text, HTML and PDF files for search_docs and tao run --docs."""
    index, done = open_index(directory, rebuild)
    try:
        hits = index.search(query, k=k) if query else []
        if json_output:
            typer.echo(safe_json.dumps({**done, "index": str(index.path), "hits": [
                {"source": h.source, "score": h.score, "text": h.text} for h in hits]}))
        else:
            typer.echo(f"{directory}: {done['files']} file(s) indexed ({done['chunks']} chunks), "
                       f"{done['unchanged']} unchanged, {done['removed']} removed -> {index.path}")
            for rel, why in done["failed"].items():
                typer.echo(f"  not indexed: {rel}: {why}", err=True)
            for h in hits:
                typer.echo(f"\n[{h.source}] ({h.score:.2f})\n{h.text}")
    finally:
        index.close()
    raise typer.Exit(1 if done["failed"] else 0)


__all__ = ["index_command", "open_index"]
