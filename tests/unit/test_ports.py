"""Rendezvous ports come from below the kernel's ephemeral range (bench/run/launch/ports.py), where
no outgoing connection (a gloo rank's, say) can take them between the choice and the bind."""

from __future__ import annotations

import socket

from bench.run.launch import ports


def test_a_free_port_lies_below_the_ephemeral_range_and_binds():
    start = ports.ephemeral_start()
    chosen = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < start for port in chosen)
    assert len(chosen) > 1  # random, not one port every launch of the host would race for
    port = chosen.pop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_not_chosen(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert not ports.is_free(busy)
        monkeypatch.setattr(ports, "LOWEST", busy)
        monkeypatch.setattr(ports, "ephemeral_start", lambda: busy + 2)
        assert ports.free_port() == busy + 1


def test_without_room_below_the_range_any_free_port_serves(monkeypatch):
    monkeypatch.setattr(ports, "ephemeral_start", lambda: ports.LOWEST)
    assert ports.is_free(ports.free_port())
