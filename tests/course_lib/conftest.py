"""Fixtures shared by the course_lib tests."""
import pytest
import torch


@pytest.fixture(params=[1, 2])
def threads(request):
    """torch's CPU threads for the test, 1 and then 2; as they were again afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)
