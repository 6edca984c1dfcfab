import pytest
import torch


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


# Under `make test` (pytest-xdist, --dist loadgroup) a file whose module-scoped fixture is expensive keeps all its
# tests on one worker (the fixture is built once); every other test is handed out on its own, which balances the two
# workers (test_faults.py alone is ~4 minutes of tests, each cheap to set up).
GROUPED = {"test_attacks_psi", "test_audit", "test_audit_budget", "test_defenses", "test_fisher", "test_gaussian_linear",
           "test_gradient_matching", "test_instahide", "test_instahide_attacks", "test_instahide_training",
           "test_inversion", "test_stats", "test_user_images"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module in GROUPED:
            item.add_marker(pytest.mark.xdist_group(module))
