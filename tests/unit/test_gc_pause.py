"""bench/analysis/gc_pause.py: the collector off inside, as it was outside, nested or on an error."""

from __future__ import annotations

import gc

import pytest

from bench.analysis.gc_pause import gc_paused


def test_the_collector_is_off_inside_and_as_it_was_afterwards():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested (the report command around the report's builder)
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves the outer one's state
    assert gc.isenabled()


def test_an_error_inside_still_restores_the_collector():
    with pytest.raises(RuntimeError, match="boom"), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_off_before_stays_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
