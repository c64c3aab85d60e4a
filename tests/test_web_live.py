"""``tao.web.live.LiveRun``, the buffer every SSE client reads: however the events and the
reconnects interleave, a client that reconnects with the last ``seq`` it got ends up with every
event exactly once, in order - and so do many clients at once."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tao.web.live import LiveRun


def event(seq: int) -> dict:
    return {"type": "token", "run_id": "r", "seq": seq, "ts": 0.0, "text": f"t{seq}"}


async def client(run: LiveRun, cuts: list[int]) -> list[int]:
    """Follow the run, dropping the connection after ``cuts[i]`` items on the i-th one."""
    got: list[int] = []
    hop = 0
    while True:
        n = 0
        budget = cuts[hop % len(cuts)] if cuts else None
        async for item in run.follow(got[-1] if got else 0):
            got.append(item.seq)
            n += 1
            if budget is not None and n >= budget:
                break
        else:
            return got  # the run ended: follow() returned
        hop += 1
        assert hop < 1000, f"reconnecting never ends: got {got[-12:]}"  # a resent event loops


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), pauses=st.lists(st.integers(0, 3), min_size=1, max_size=40),
       clients=st.lists(st.lists(st.integers(1, 5), max_size=6), min_size=1, max_size=5))
def test_every_client_gets_every_event_once_however_it_reconnects(n, pauses, clients) -> None:
    async def main() -> list[list[int]]:
        run = LiveRun("r", "react", "m", "task", status="running")
        watchers = [asyncio.ensure_future(client(run, cuts)) for cuts in clients]
        for seq in range(1, n + 1):
            for _ in range(pauses[seq % len(pauses)]):
                await asyncio.sleep(0)  # let the clients run (and reconnect) in between
            run.add(event(seq))
        run.finish("done")
        return await asyncio.wait_for(asyncio.gather(*watchers), 10)

    for got in asyncio.run(main()):
        assert got == list(range(1, n + 1))


def test_the_key_is_out_of_the_buffer_however_it_is_written() -> None:
    run = LiveRun("r", "react", "m", "task", secrets=('k"ey\\1',))
    run.add({"type": "final_answer", "seq": 1, "text": 'it is k"ey\\1', "turn": 1})
    assert 'k\\"ey' not in run.items[0].data and "***" in run.items[0].data
    assert run.events() == [{"type": "final_answer", "seq": 1, "text": "it is ***", "turn": 1}]
