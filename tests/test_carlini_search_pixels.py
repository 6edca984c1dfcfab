"""How many pixels Carlini's assignment search fits (``search_pixels``): the "auto" default is the setting the README's
published-size rows were measured with — inside at the old fixed 1,024, Fashion-MNIST and 32×32 photograph crops ran
past 40 CPU-minutes — and it reaches the attack from the Python API, the registry and the CLI alike."""

import pytest

from reconguard.attacks.instahide import CarliniAttack
from reconguard.attacks.instahide.carlini_options import AUTO_SEARCH_PIXELS, searched_pixels
from reconguard.attacks.registry import pick_options
from reconguard.cli.main import build_parser
from reconguard.errors import ParameterError


def test_auto_searches_the_measured_subset_per_mode():
    assert searched_pixels("auto", "inside", labelled=True) == 256
    assert searched_pixels("auto", "inside", labelled=False) == 256
    assert searched_pixels("auto", "cross", labelled=True) == 1024
    assert searched_pixels("auto", "cross", labelled=False) == 512
    assert searched_pixels(300, "inside", labelled=True) == 300
    assert searched_pixels(None, "cross", labelled=False) is None
    assert set(AUTO_SEARCH_PIXELS) == {"inside", "cross", "label-free"}


def test_the_label_free_size_check_counts_the_auto_subset():
    """The refusal of a too-large label-free search prices the pixels it will fit: 512 of 3,072, not all of them."""
    atk = CarliniAttack(6, 100, mode="cross", max_free_work=1e12)
    free = atk.grid.free_work(100, 5000, 512)
    assert free <= 1e12 < atk.grid.free_work(100, 5000, 3072)
    assert atk.check_free_search(100, 5000, 3072)
    assert not CarliniAttack(6, 100, mode="cross", search_pixels=None).check_free_search(100, 5000, 3072, similarity=True)


@pytest.mark.parametrize("value", ["many", 0, -3, 2.5, True])
def test_a_bad_search_pixels_is_a_clear_error(value):
    with pytest.raises(ParameterError, match="search_pixels must be 'auto', None"):
        CarliniAttack(4, 10, search_pixels=value)


def test_the_cli_passes_search_pixels_to_the_attack():
    parser = build_parser()
    base = ["instahide", "attack", "carlini", "--challenge", "c"]
    for given, expected in (([], "auto"), (["--search-pixels", "all"], None), (["--search-pixels", "384"], 384)):
        args = parser.parse_args(base + given)
        assert pick_options("carlini", vars(args))["search_pixels"] == expected
    for bad in ("0", "lots"):
        with pytest.raises(SystemExit):
            parser.parse_args(base + ["--search-pixels", bad])
