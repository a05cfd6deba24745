"""Shared by the Python interop tests: the node's addresses from the
environment interop/run.sh sets (BASALT_PB_ADDR, BASALT_HTTP_ADDR as
host:port) and a real Riak client over one protocol (`pbc` or `http`).

With BASALT_USER, BASALT_PASSWORD and BASALT_CACERT (the security stage
runs the KV suites so) the client connects with the client's own
`SecurityCreds`: STARTTLS + AuthReq over PB, HTTPS with basic auth over
HTTP (BASALT_HTTP_ADDR is then the node's https_listen).
"""

import os

from riak import RiakClient
from riak.security import SecurityCreds

PB = os.environ.get("BASALT_PB_ADDR", "127.0.0.1:8087")
HTTP = os.environ.get("BASALT_HTTP_ADDR", "127.0.0.1:8098")
USER = os.environ.get("BASALT_USER")
# The ECDSA suites of the certificates `basalt certs` makes.
CIPHERS = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"


def client(protocol):
    """A RiakClient for the node over `protocol` (`pbc` or `http`)."""
    host, pb_port = PB.rsplit(":", 1)
    _, http_port = HTTP.rsplit(":", 1)
    creds = None
    if USER:
        creds = SecurityCreds(username=USER,
                              password=os.environ["BASALT_PASSWORD"],
                              cacert_file=os.environ["BASALT_CACERT"],
                              ciphers=CIPHERS)
    return RiakClient(protocol=protocol, credentials=creds, nodes=[{
        "host": host, "pb_port": int(pb_port), "http_port": int(http_port)}])
