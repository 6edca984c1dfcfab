import pytest
import torch


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)

