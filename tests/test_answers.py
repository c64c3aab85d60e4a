"""The number an answer states (``tao.answers.stated_number``), read the same way by ``tao eval``
and by ``Vote``: its last number, passing over figures it only repeats from the question."""

from __future__ import annotations

import pytest

from tao.agents.vote import answer_key
from tao.answers import last_number, stated_number
from tao.evals import is_correct

COOKIES = "A recipe uses 300 g of flour for 12 cookies. How much flour is needed for 36 cookies?"
WORKERS = "One worker packs 45 boxes an hour. How many hours do two workers need for 630 boxes?"


@pytest.mark.parametrize(("question", "answer", "number"), [
    (COOKIES, "900 grams of flour are needed for 36 cookies", 900),
    (WORKERS, "two workers need 7 hours to pack 630 boxes together.", 7),
    (COOKIES, "36 cookies need 900 g.", 900),  # the answer last: as before
    (COOKIES, "For 36 cookies: 36", 36),  # every number from the question: the last one
    ("一辆车 3 小时行驶 180 公里，5 小时行驶多少公里？", "5 小时行驶 300 公里", 300),
    ("小明有 1,200 元，花了 450 元，还剩多少？", "还剩 750 元（1,200 - 450）", 750),
])
def test_the_stated_number_passes_over_figures_repeated_from_the_question(question, answer, number):
    assert stated_number(answer, question) == number
    assert is_correct(answer, number, question=question)


def test_without_the_question_it_is_the_last_number():
    answer = "900 grams of flour are needed for 36 cookies"
    assert stated_number(answer) == last_number(answer) == 36
    assert stated_number("no number here", COOKIES) is None


def test_a_wrong_answer_stays_wrong():
    assert not is_correct("The area is 450 square centimeters.", 144,
                          question="A rectangle has a perimeter of 50 cm and a width of 9 cm.")


def test_a_vote_counts_answers_that_state_the_same_number_together():
    assert answer_key("900 grams for 36 cookies", COOKIES) == answer_key("900", COOKIES)
    assert answer_key("900 grams for 36 cookies") != answer_key("900")  # the question unknown


def test_vote_groups_runs_by_the_number_they_state_not_the_question_figure_they_end_on():
    from tao import ReActAgent, ScriptedModel, Vote

    model = ScriptedModel(["36 cookies", "900 grams of flour are needed for 36 cookies", "900 g"])
    result = Vote(ReActAgent(model), n=3).run(COOKIES)
    assert result.answer == "900 grams of flour are needed for 36 cookies"
