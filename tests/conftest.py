import pytest
import torch


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def fashion_root():
    """Fashion-MNIST's folder (Debian's dataset-fashion-mnist; `make test` installs it where apt is available), or a
    skip that says how to install it."""
    from reconguard.data.files import FASHION_ROOT

    if not (FASHION_ROOT / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    return FASHION_ROOT
