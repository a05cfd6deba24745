"""The real Python client (riak 2.7.0) against a node with security on:
STARTTLS with the node certificate from `basalt certs node`, verified
against the CA from `basalt certs ca`, AuthReq with a password, then
put / get / delete; refused: a wrong password (user `wrong_py`), a user
granted riak_kv.get only trying a put (`getonly`), a user whose only
source is 10.0.0.0/8 connecting from 127.0.0.1 (`faraway`). The same
over HTTPS with basic auth (the client's `SecurityCreds` with the HTTP
protocol). The good user is still served after the refusals.

interop/run.sh's security stage sets BASALT_SECURE_PB_ADDR and
BASALT_SECURE_HTTPS_ADDR (host:port) and BASALT_SECURE_CA (the CA's PEM
file) after `basalt admin security` made those users (see security_stage
there): `interop` (password `interop-pw`, a password source on
127.0.0.1/32, get/put/delete on any), `getonly` (`getonly-pw`, get on
any), `faraway` (`faraway-pw`, a source on 10.0.0.0/8 only),
`wrong_py`, `wrong_https` (each client's wrong passwords on their own
user: failed logins lock a user out from an address for a cool-down).
Without them the tests skip (so the plain Python stage skips this
file).
"""

import os
import unittest

from riak import RiakClient
from riak.security import SecurityCreds

ADDR = os.environ.get("BASALT_SECURE_PB_ADDR")
HTTPS_ADDR = os.environ.get("BASALT_SECURE_HTTPS_ADDR")
CA = os.environ.get("BASALT_SECURE_CA")
# The node's certificates are ECDSA (rcgen); riak 2.7.0's default cipher
# list names RSA suites only.
CIPHERS = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"


def client(password, user="interop"):
    host, port = ADDR.rsplit(":", 1)
    creds = SecurityCreds(username=user, password=password,
                          cacert_file=CA, ciphers=CIPHERS)
    return RiakClient(protocol="pbc", credentials=creds,
                      nodes=[{"host": host, "pb_port": int(port)}])


def https_client(password, user="interop"):
    """The HTTP transport with credentials: HTTPS and basic auth."""
    host, port = HTTPS_ADDR.rsplit(":", 1)
    creds = SecurityCreds(username=user, password=password,
                          cacert_file=CA, ciphers=CIPHERS)
    return RiakClient(protocol="http", credentials=creds,
                      nodes=[{"host": host, "http_port": int(port)}])


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
        c = client("not-the-password", user="wrong_py")
        try:
            with self.assertRaises(Exception) as e:
                c.bucket("secure_py").get("k")
            self.assertIn("Could not authorize", str(e.exception))
        finally:
            c.close()

    def test_user_without_grant_refused(self):
        c = client("getonly-pw", user="getonly")
        try:
            b = c.bucket("secure_py")
            self.assertFalse(b.get("nokey").exists)
            with self.assertRaises(Exception) as e:
                b.new("getonly", data="v", content_type="text/plain").store()
            self.assertIn("Permission denied", str(e.exception))
            self.assertIn("riak_kv.put", str(e.exception))
        finally:
            c.close()

    def test_address_without_source_refused(self):
        c = client("faraway-pw", user="faraway")
        try:
            with self.assertRaises(Exception) as e:
                c.bucket("secure_py").get("k")
            self.assertIn("Could not authorize", str(e.exception))
        finally:
            c.close()

    def test_zz_good_user_served_after_refusals(self):
        c = client("interop-pw")
        try:
            b = c.bucket("secure_py")
            b.new("after", data="still", content_type="text/plain").store()
            self.assertEqual(b.get("after").encoded_data, b"still")
        finally:
            c.close()


@unittest.skipUnless(ADDR and CA and HTTPS_ADDR,
                     "BASALT_SECURE_HTTPS_ADDR / BASALT_SECURE_CA not set "
                     "(interop/run.sh's security stage sets them)")
class HttpsSecurityTest(unittest.TestCase):
    def test_https_basic_auth_kv(self):
        c = https_client("interop-pw")
        try:
            b = c.bucket("secure_https")
            o = b.new("k", data={"over": "https"})
            o.store()
            got = b.get("k")
            self.assertTrue(got.exists)
            self.assertEqual(got.data, {"over": "https"})
            o2 = b.new("k2", data="two", content_type="text/plain")
            o2.store(return_body=True)
            self.assertEqual(b.get("k2").encoded_data, b"two")
            got.delete()
            self.assertFalse(b.get("k").exists)
            self.assertTrue(c.ping())
        finally:
            c.close()

    def test_https_wrong_password_refused_then_cooled_down(self):
        c = https_client("not-the-password", user="wrong_https")
        try:
            with self.assertRaises(Exception) as e:
                c.bucket("secure_https").get("k")
            self.assertIn("401", str(e.exception))
            # Five failures in a row lock the user out from this address
            # (1 s, doubling): the node answers 429 at once, without
            # hashing the password.
            statuses = []
            for _ in range(20):
                with self.assertRaises(Exception) as e:
                    c.bucket("secure_https").get("k")
                statuses.append("429" if "429" in str(e.exception) else
                                "401" if "401" in str(e.exception) else
                                str(e.exception))
                if statuses[-1] == "429":
                    break
            self.assertEqual(statuses[-1], "429", statuses)
            self.assertTrue(set(statuses[:-1]) <= {"401"}, statuses)
        finally:
            c.close()
        # Another user from the same address is still served.
        good = https_client("interop-pw")
        try:
            self.assertTrue(good.ping())
            self.assertFalse(good.bucket("secure_https").get("nokey").exists)
        finally:
            good.close()

    def test_https_user_without_grant_refused(self):
        c = https_client("getonly-pw", user="getonly")
        try:
            b = c.bucket("secure_https")
            self.assertFalse(b.get("nokey").exists)
            with self.assertRaises(Exception) as e:
                b.new("getonly", data="v", content_type="text/plain").store()
            self.assertIn("403", str(e.exception))
        finally:
            c.close()

    def test_https_address_without_source_refused(self):
        c = https_client("faraway-pw", user="faraway")
        try:
            with self.assertRaises(Exception) as e:
                c.bucket("secure_https").get("k")
            self.assertIn("401", str(e.exception))
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
