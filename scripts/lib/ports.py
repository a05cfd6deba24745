"""Loopback ports for the nodes that test and bench scripts start, chosen
below the kernel's ephemeral range.

A port that bind(("127.0.0.1", 0)) finds free comes from the ephemeral
range (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default),
where any outgoing connection can take it between the script choosing it
and the node binding it (a CI run failed so: "Address already in use").
The kernel never gives an outgoing connection a port below that range, so
a port chosen there stays free unless a process binds it on purpose. The
same rule as scripts/lib/ports.sh and crates/cli/tests/common/ports.rs.

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
    from ports import free_port
"""
import os
import random
import socket

_picked = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host="127.0.0.1"):
    """A port on host that is free now, below the ephemeral range (from
    10000) and not handed out before by this process; if that range starts
    below 11000, any free port the kernel gives."""
    low = _ephemeral_low()
    if low < 11000:
        s = socket.socket()
        try:
            s.bind((host, 0))
            return s.getsockname()[1]
        finally:
            s.close()
    start = random.randrange(10000, low)
    span = low - 10000
    for i in range(span):
        port = 10000 + (start - 10000 + i) % span
        if port in _picked:
            continue
        s = socket.socket()
        try:
            s.bind((host, port))
        except OSError:
            continue
        finally:
            s.close()
        _picked.add(port)
        return port
    raise OSError("no free port on %s in 10000..%d" % (host, low))
