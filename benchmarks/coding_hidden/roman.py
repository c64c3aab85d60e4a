"""Hidden judge of the roman task: the agent never sees this file."""
import pytest

import roman


@pytest.mark.parametrize("n,s", [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"),
                                 (90, "XC"), (400, "CD"), (1994, "MCMXCIV"), (3999, "MMMCMXCIX")])
def test_both_ways(n, s):
    assert roman.to_roman(n) == s
    assert roman.from_roman(s) == n


@pytest.mark.parametrize("n", [0, -1, 4000])
def test_out_of_range(n):
    with pytest.raises(ValueError):
        roman.to_roman(n)


@pytest.mark.parametrize("s", ["", "ABC", "IIII"])
def test_not_valid(s):
    with pytest.raises(ValueError):
        roman.from_roman(s)
