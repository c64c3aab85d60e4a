"""The terminal approver's dialogue (what ``tao run/code/chat`` ask on a terminal), driven through
its read/write hooks: the batch listed together, then y / n + reason / e + JSON for each call."""

from __future__ import annotations

import asyncio

from tao.guard import ApprovalRequest, TerminalApprover, digest


def requests(*commands):
    return [ApprovalRequest(f"c{i}", "shell", {"command": c}, "the tool requires approval",
                            digest("shell", {"command": c})) for i, c in enumerate(commands)]


def dialogue(answers, lang="en", batch=("ls", "rm -rf build", "sudo reboot")):
    shown: list[str] = []
    replies = iter(answers)

    def read(prompt):
        shown.append(prompt)
        try:
            return next(replies)
        except StopIteration:
            raise EOFError from None

    approver = TerminalApprover(lang, read=read, write=shown.append)
    return asyncio.run(approver.decide(requests(*batch))), shown


def test_a_batch_is_listed_together_then_each_call_is_decided():
    decisions, shown = dialogue(["y", "e", "[1]", '{"command": "rm -ri build"}', "n", "not today"])
    assert [d.verdict for d in decisions] == ["approved", "edited", "rejected"]
    assert decisions[1].arguments == {"command": "rm -ri build"}
    assert decisions[2].reason == "not today"
    assert shown[0] == "Approval needed for 3 tool call(s):"
    assert [s.strip()[:3] for s in shown[1:4]] == ["[1]", "[2]", "[3]"]  # listed before any question
    assert shown[4] == "[1] shell: approve? [y]es / [n]o / [e]dit: "
    assert any(s.startswith("Not a JSON object") for s in shown)  # "[1]" asked again


def test_chinese_prompts_and_end_of_input_rejects():
    decisions, shown = dialogue(["是", "?"], lang="zh", batch=("ls", "rm x"))
    assert shown[0] == "有 2 个工具调用需要批准："
    assert decisions[0].verdict == "approved"
    assert decisions[1].verdict == "rejected" and "标准输入不是终端" in decisions[1].reason


def test_two_runs_asking_at_once_take_turns_at_the_terminal():
    """Two sub-agents of one plan, each with a gated call: the second batch is listed only after
    the first is answered, never in the middle of its questions."""
    shown: list[str] = []

    def read(prompt):
        shown.append(prompt)
        import time

        time.sleep(0.05)  # a person typing: the other batch would list itself now
        return "y"

    async def both():
        one, two = (TerminalApprover("en", read=read, write=shown.append) for _ in range(2))
        return await asyncio.gather(one.decide(requests("ls", "pwd")), two.decide(requests("id")))

    first, second = asyncio.run(both())
    assert [d.verdict for d in first + second] == ["approved"] * 3
    headers = [i for i, s in enumerate(shown) if s.startswith("Approval needed")]
    assert headers == [0, 5] and shown[3:5] == ["[1] shell: approve? [y]es / [n]o / [e]dit: ",
                                                "[2] shell: approve? [y]es / [n]o / [e]dit: "]
