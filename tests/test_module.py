import pytest

from nmtbench.training.module import cosine_schedule, inverse_sqrt_schedule


def test_inverse_sqrt_warms_up_linearly_then_decays():
    factor = inverse_sqrt_schedule(4)
    assert [factor(step) for step in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(15) == pytest.approx(0.5)  # sqrt(4 / 16)
    assert inverse_sqrt_schedule(0)(10) == 1.0


def test_cosine_warms_up_then_reaches_zero_at_the_last_step():
    factor = cosine_schedule(2, 10)
    assert [factor(0), factor(1)] == [0.5, 1.0]
    assert factor(5) == pytest.approx(0.5)  # half way from step 2 to step 10
    assert factor(9) == pytest.approx(0.0) and factor(20) == pytest.approx(0.0)
