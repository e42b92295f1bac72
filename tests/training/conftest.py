"""Fixtures shared by the training tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def split():
    """A small synthetic CIFAR-shaped split: 512 training, 128 validation and 128 test images."""
    from course_utils.training import data as cdata

    raw = cdata.synthetic_cifar(n_train=640, n_test=128, seed=0)
    return cdata.split_validation(raw, val_size=128, seed=0)
