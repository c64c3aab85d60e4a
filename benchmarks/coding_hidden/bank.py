"""Hidden judge of the bank task: the agent never sees this file."""
import pytest

from bank import Account


def test_open_and_owner():
    a = Account("Li", 10)
    assert a.owner == "Li"
    assert a.balance == 10
    assert Account("Wang").balance == 0


def test_deposit_withdraw():
    a = Account("Li")
    a.deposit(50)
    a.withdraw(20)
    assert a.balance == 30


def test_not_enough():
    a = Account("Li", 5)
    with pytest.raises(ValueError):
        a.withdraw(6)
    assert a.balance == 5


@pytest.mark.parametrize("amount", [0, -3])
def test_not_positive(amount):
    a = Account("Li", 5)
    with pytest.raises(ValueError):
        a.deposit(amount)
    with pytest.raises(ValueError):
        a.withdraw(amount)
    assert a.balance == 5
