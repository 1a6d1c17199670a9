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


def test_what_the_pause_made_and_kept_is_old_afterwards():
    """Re-enabled, the collector does not traverse everything made in the pause as its youngest
    generation at the next allocation (54 ms at the end of a 10,000-record report): it is in the
    oldest one, with the allocation count back to zero."""
    with gc_paused():
        kept = [[index] for index in range(2000)]
    assert gc.get_count()[0] < 2000
    assert any(obj is kept[0] for obj in gc.get_objects(generation=2))
    assert not any(obj is kept[0] for obj in gc.get_objects(generation=0))
    assert gc.get_freeze_count() == 0  # nothing left frozen: cyclic garbage among them is still collected
