"""A free TCP port on 127.0.0.1 for a rendezvous or a process group's store, chosen below the
kernel's ephemeral range.

A port the kernel hands out (bind to port 0) comes from the ephemeral range, and once released it
can be taken by any outgoing connection before the rendezvous binds it: on a host where other
ranks open gloo connections all the time, the agent then cannot host its store and every rank
fails with "The connection to the C10d store has failed". Ports below the range are never handed
to outgoing connections, so only another explicit choice could collide; they are picked at random
and checked free first.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Below Linux's default ephemeral range (32768-60999) and above the well-known services.
LOWEST, DEFAULT_EPHEMERAL_START = 20000, 32768
ATTEMPTS = 64


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux), or the default elsewhere."""
    try:
        return int(PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_START


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free now, outside the ephemeral range where there is room for one (else any free port)."""
    top = ephemeral_start()
    if top - 1 > LOWEST:
        for port in random.sample(range(LOWEST, top), min(ATTEMPTS, top - LOWEST)):
            if is_free(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
