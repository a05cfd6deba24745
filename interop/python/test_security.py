"""The real Python client (riak 2.7.0) against a node with security on:
STARTTLS with the node certificate from `basalt certs node`, verified
against the CA from `basalt certs ca`, AuthReq with a password, then
put / get / delete; a wrong password is refused.

interop/run.sh's security stage sets BASALT_SECURE_PB_ADDR (host:port) and
BASALT_SECURE_CA (the CA's PEM file) after `basalt admin security` made
the user `interop` (password `interop-pw`, a password source on
127.0.0.1/32, get/put/delete on any). Without them the tests skip (so the
plain Python stage skips this file).
"""

import os
import unittest

from riak import RiakClient
from riak.security import SecurityCreds

ADDR = os.environ.get("BASALT_SECURE_PB_ADDR")
CA = os.environ.get("BASALT_SECURE_CA")
# The node's certificates are ECDSA (rcgen); riak 2.7.0's default cipher
# list names RSA suites only.
CIPHERS = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"


def client(password):
    host, port = ADDR.rsplit(":", 1)
    creds = SecurityCreds(username="interop", password=password,
                          cacert_file=CA, ciphers=CIPHERS)
    return RiakClient(protocol="pbc", credentials=creds,
                      nodes=[{"host": host, "pb_port": int(port)}])


@unittest.skipUnless(ADDR and CA, "BASALT_SECURE_PB_ADDR / BASALT_SECURE_CA "
                     "not set (interop/run.sh's security stage sets them)")
class SecurityTest(unittest.TestCase):
    def test_tls_password_put_get_delete(self):
        c = client("interop-pw")
        try:
            b = c.bucket("secure_py")
            o = b.new("k", data="v1", content_type="text/plain")
            o.store()
            got = b.get("k")
            self.assertTrue(got.exists)
            self.assertEqual(got.encoded_data, b"v1")
            got.delete()
            self.assertFalse(b.get("k").exists)
        finally:
            c.close()

    def test_wrong_password_refused(self):
        c = client("not-the-password")
        try:
            with self.assertRaises(Exception) as e:
                c.bucket("secure_py").get("k")
            self.assertIn("Could not authorize", str(e.exception))
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
