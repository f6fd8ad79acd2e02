"""course_lib.positional (numpy reference, torch twins) and the exercises of notebook 03."""
import numpy as np
import pytest
import torch

from autograder.exercises import positional as exercises
from course_lib import positional as pe
from course_lib.gradcheck import numerical_gradient, rel_error
from exercise_bank import mistake_verdicts


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_sinusoidal_encoding_follows_eq_11():
    P = pe.sinusoidal_encoding([1, 2], 4)  # omega_0 = 1, omega_1 = 10000^(-2/4) = 0.01
    want = [[np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)],
            [np.sin(2), np.cos(2), np.sin(0.02), np.cos(0.02)]]
    np.testing.assert_allclose(P, want, rtol=1e-14)


def test_encoding_rows_are_unique_and_bounded():
    P = pe.sinusoidal_encoding(np.arange(1, 401), 512)
    assert P.shape == (400, 512) and np.abs(P).max() <= 1.0
    distances = np.linalg.norm(P[:, None] - P[None], axis=-1) + np.eye(400)
    assert distances.min() > 1e-3  # every position gets its own vector


@pytest.mark.parametrize("d_model", [2, 8, 64])
def test_rotation_shifts_the_encoding_for_every_t(d_model):
    t = np.arange(0, 120)
    P = pe.sinusoidal_encoding(t, d_model)
    for m in (0, 1, 7, 50):
        A = pe.rotation_matrix(m, d_model)
        np.testing.assert_allclose(P[: len(t) - m] @ A.T, P[m:], atol=1e-10)
        np.testing.assert_allclose(A @ A.T, np.eye(d_model), atol=1e-12)


def test_rotations_compose_and_invert():
    A = pe.rotation_matrix
    np.testing.assert_allclose(A(3, 16) @ A(4, 16), A(7, 16), atol=1e-12)
    np.testing.assert_allclose(A(5, 16).T, A(-5, 16), atol=1e-12)


def test_odd_d_model_is_refused():
    with pytest.raises(ValueError):
        pe.sinusoidal_encoding([1], 5)


def test_rope_rotates_each_row_by_R_t_the_transpose_of_A_t(rng):
    x, pos = rng.normal(size=(2, 3, 6, 8)), np.array([0, 4, 9, 2, 30, 5])
    out = pe.apply_rope(x, pos)
    for t in range(6):
        R = pe.rotation_matrix(pos[t], 8).T  # RoPE's R(t) = A(t)^T = A(-t)
        np.testing.assert_allclose(out[..., t, :], x[..., t, :] @ R.T, atol=1e-12)


def test_rope_turns_by_plus_m_theta_as_in_the_paper():
    """Su et al.: pair (x_1, x_2) at position m becomes (x_1 cos m.theta - x_2 sin m.theta,
    x_1 sin m.theta + x_2 cos m.theta); with d = 2, theta = 1."""
    m = 0.3
    got = pe.apply_rope(np.array([[1.0, 0.0], [0.0, 1.0]]), [m, m])
    np.testing.assert_allclose(got, [[np.cos(m), np.sin(m)], [-np.sin(m), np.cos(m)]], atol=1e-15)


def test_rope_scores_depend_only_on_the_offset(rng):
    q, k = rng.normal(size=16), rng.normal(size=16)
    score = lambda m, n: pe.apply_rope(q[None], [m])[0] @ pe.apply_rope(k[None], [n])[0]
    for offset in (0, 3, -5):
        values = [score(m, m + offset) for m in (0, 7, 100, 1234)]
        np.testing.assert_allclose(values, values[0], rtol=1e-9)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3


def test_rope_backward_is_the_inverse_rotation(rng):
    x, pos, dout = rng.normal(size=(5, 8)), np.arange(5) * 3, rng.normal(size=(5, 8))
    numeric = numerical_gradient(lambda z: np.sum(pe.apply_rope(z, pos) * dout), x)
    assert rel_error(pe.apply_rope(dout, -pos), numeric) < 1e-8


def test_torch_twins_match_numpy(rng):
    pos = np.array([0, 3, 17, 400, 9999])
    got = pe.sinusoidal_encoding_torch(torch.tensor(pos, dtype=torch.float64), 32)
    np.testing.assert_allclose(got.numpy(), pe.sinusoidal_encoding(pos, 32), atol=1e-10)
    x = rng.normal(size=(2, 5, 32))
    got = pe.apply_rope_torch(torch.tensor(x), torch.tensor(pos))
    np.testing.assert_allclose(got.numpy(), pe.apply_rope(x, pos), atol=1e-10)


def test_rope_torch_gradient_is_the_inverse_rotation(rng):
    x = torch.tensor(rng.normal(size=(4, 8)), requires_grad=True)
    pos, dout = torch.arange(4), rng.normal(size=(4, 8))
    pe.apply_rope_torch(x, pos).backward(torch.tensor(dout))
    np.testing.assert_allclose(x.grad.numpy(), pe.apply_rope(dout, -np.arange(4)), atol=1e-12)


@pytest.mark.parametrize("position", ["none", "sinusoidal", "learned", "rope"])
def test_position_probe_interface(position):
    torch.manual_seed(0)
    model = pe.PositionProbe(vocab_size=7, d_model=8, position=position, max_len=16)
    idx = torch.randint(0, 7, (3, 10))
    targets = idx.clone()
    targets[:, 0] = -1
    logits, loss = model(idx, targets)
    assert logits.shape == (3, 10, 7) and loss.ndim == 0 and torch.isfinite(loss)
    assert model(idx)[1] is None


@pytest.mark.parametrize("position", ["none", "sinusoidal", "rope"])
def test_only_positions_let_the_model_see_order(position):
    """The last token attends to all three; without positions their order cannot matter."""
    torch.manual_seed(0)
    model = pe.PositionProbe(vocab_size=5, d_model=8, position=position)
    a, b = model(torch.tensor([[1, 2, 3]]))[0], model(torch.tensor([[2, 1, 3]]))[0]
    assert torch.allclose(a[0, 2], b[0, 2], atol=1e-6) == (position == "none")


@pytest.mark.parametrize("exercise_id, name, verdict", list(mistake_verdicts(exercises.EXERCISES)),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_mistake_loses_points_and_is_named(exercise_id, name, verdict):
    assert verdict.points < verdict.max_points
    assert any(name in message for message in verdict.messages)


def test_at_least_six_named_mistakes():
    assert sum(len(ex.mistakes) for ex in exercises.EXERCISES) >= 6
