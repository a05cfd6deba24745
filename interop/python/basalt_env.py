"""Shared by the Python interop tests: the node's addresses from the
environment interop/run.sh sets (BASALT_PB_ADDR, BASALT_HTTP_ADDR as
host:port) and a real Riak client over one protocol (`pbc` or `http`).
"""

import os

from riak import RiakClient

PB = os.environ.get("BASALT_PB_ADDR", "127.0.0.1:8087")
HTTP = os.environ.get("BASALT_HTTP_ADDR", "127.0.0.1:8098")


def client(protocol):
    """A RiakClient for the node over `protocol` (`pbc` or `http`)."""
    host, pb_port = PB.rsplit(":", 1)
    _, http_port = HTTP.rsplit(":", 1)
    return RiakClient(protocol=protocol, nodes=[{
        "host": host, "pb_port": int(pb_port), "http_port": int(http_port)}])
