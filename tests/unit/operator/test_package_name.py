"""The folder operator/ must not shadow the standard library's module of the same name."""

import operator

import odradek_operator


def test_import_operator_is_the_standard_library():
    assert operator.add(2, 3) == 5
    assert "site-packages" not in operator.__file__
    assert not operator.__file__.endswith("operator/__init__.py")


def test_the_operator_package_has_its_own_name():
    assert odradek_operator.__name__ == "odradek_operator"
