"""Typed extraction on an embedded model (issue 28, point 6): ``output_type=Person`` on ReAct.

Twelve short texts, six zh and six en (``benchmarks/data/typed_people.jsonl``), each naming a
person, an age and a city; half ("held") were never looked at while the typed-output code was
written. Prints, per split: runs that gave a valid ``Person``, fields exactly right, runs with
all three right, the corrections sent back (``output_retries``) and seconds per text.

    python benchmarks/typed_extraction.py [--model local-1.5b] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pydantic import BaseModel

from tao import ReActAgent
from tao.events import Error
from tao.models.resolve import resolve_model

DATA = Path(__file__).parent / "data" / "typed_people.jsonl"


class Person(BaseModel):
    name: str
    age: int
    city: str


def task_of(text: str) -> str:
    zh = any("\u4e00" <= c <= "\u9fff" for c in text)
    return ("从这段话里提取这个人的姓名、年龄和所在城市：" if zh else
            "Extract the person's name, age and city from this text: ") + text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="local-1.5b")
    ap.add_argument("--out")
    args = ap.parse_args()
    model = resolve_model(args.model)
    rows = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        events: list = []
        start = time.perf_counter()
        result = ReActAgent(model, output_type=Person).run(task_of(item["text"]),
                                                            sinks=[events.append])
        got = result.output.model_dump() if result.output is not None else {}
        rows.append({"split": item["split"], "status": result.status, "got": got,
                     "fields": sum(got.get(k) == v for k, v in item["want"].items()),
                     "retries": sum(1 for e in events if type(e) is Error and e.recoverable),
                     "s": time.perf_counter() - start})
    print(f"model {model.name}")
    print("| split | valid | fields exact | all three | corrections | s / text |")
    print("|---|---|---|---|---|---|")
    for split in ("dev", "held"):
        part = [r for r in rows if r["split"] == split]
        print(f"| {split} | {sum(r['status'] == 'done' for r in part)}/{len(part)} | "
              f"{sum(r['fields'] for r in part)}/{3 * len(part)} | "
              f"{sum(r['fields'] == 3 for r in part)}/{len(part)} | "
              f"{sum(r['retries'] for r in part)} | {sum(r['s'] for r in part) / len(part):.1f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
