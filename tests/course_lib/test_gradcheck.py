"""course_lib.gradcheck: central differences, in place but restored, and the error report."""
import numpy as np

from course_lib.gradcheck import grad_check, numerical_gradient, rel_error


def _f(x):
    return float(np.sum(np.sin(3 * x)) + 0.5 * np.sum(x) ** 2)


def _grad_f(x):
    return 3 * np.cos(3 * x) + np.sum(x)


def test_numerical_gradient_matches_analytic_on_any_shape():
    x = np.random.default_rng(0).standard_normal((3, 2, 4))
    assert rel_error(numerical_gradient(_f, x), _grad_f(x)) < 1e-9


def test_numerical_gradient_restores_x_and_works_on_views():
    base = np.random.default_rng(1).standard_normal((4, 6))
    x = base[:, ::2]  # not contiguous: perturbing a flattened copy would change nothing
    before = x.copy()
    grad = numerical_gradient(_f, x)
    assert np.array_equal(x, before)
    assert rel_error(grad, _grad_f(x)) < 1e-9


def test_grad_check_passes_a_right_gradient_and_flags_a_wrong_one(capsys):
    x = np.random.default_rng(2).standard_normal(5)
    assert grad_check(_f, x, _grad_f(x), name="x") < 1e-8
    assert "ok" in capsys.readouterr().out
    assert grad_check(_f, x, 2 * _grad_f(x), name="x") > 0.1
    assert "MISMATCH" in capsys.readouterr().out


def test_rel_error_is_scale_free():
    a = np.array([1.0, 2.0, 3.0])
    assert rel_error(a, a) == 0.0
    assert np.isclose(rel_error(1e6 * a, 1e6 * (a + 1e-3)), rel_error(a, a + 1e-3))
