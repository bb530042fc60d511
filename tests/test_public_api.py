"""Every name the package promises resolves to a real object."""

import adaptune


def test_every_public_name_resolves():
    for name in adaptune.__all__:
        assert getattr(adaptune, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        adaptune.nope  # noqa: B018
