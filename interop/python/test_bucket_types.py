"""Bucket-type props with the real Python Riak client (riak 2.7.0), over
PB and over HTTP, modelled on the client's own riak/tests/test_btypes.py
(`test_btype_get_props`, `test_btype_set_props`,
`test_btype_set_props_immutable`; our code, the same calls): read a
type's props, change one, read it back (also through the other protocol),
then send back everything that was read (`set_properties(oldprops)`, which
over HTTP includes `name` and `active`: the client wants exactly 204) and
find the type as it was; a data-type type's `datatype` cannot change.

Run by interop/run.sh's Python stage with BASALT_PB_ADDR and
BASALT_HTTP_ADDR and the bucket types `no_siblings` (allow_mult false, as
the client's suite names it) and `maps` created on that node.
"""

import unittest

from riak import RiakError

from basalt_env import client


class BucketTypeBase(object):
    protocol = None
    other = None

    @classmethod
    def setUpClass(cls):
        cls.client = client(cls.protocol)
        cls.other_client = client(cls.other)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.other_client.close()

    def test_btype_get_props(self):
        with self.assertRaises(ValueError):
            self.client.bucket_type("default").get_properties()
        props = self.client.bucket_type("no_siblings").get_properties()
        self.assertIsInstance(props, dict)
        self.assertEqual(3, props["n_val"])
        self.assertFalse(props["allow_mult"])

    def test_btype_set_props(self):
        defbtype = self.client.bucket_type("default")
        btype = self.client.bucket_type("no_siblings")
        with self.assertRaises(ValueError):
            defbtype.set_properties({"allow_mult": True})
        oldprops = btype.get_properties()
        try:
            btype.set_properties({"allow_mult": True})
            newprops = btype.get_properties()
            self.assertIsInstance(newprops, dict)
            self.assertTrue(newprops["allow_mult"])
            # The same type seen through the other protocol.
            self.assertTrue(self.other_client.bucket_type("no_siblings")
                            .get_properties()["allow_mult"])
            if "claimant" in oldprops:  # as the client's test: HTTP only
                del oldprops["claimant"]
        finally:
            # Everything read, sent back unchanged (over HTTP with `name`
            # and `active`).
            btype.set_properties(oldprops)
        self.assertEqual(oldprops, btype.get_properties())
        self.assertFalse(self.other_client.bucket_type("no_siblings")
                         .get_properties()["allow_mult"])

    def test_btype_set_one_prop_and_read_it_back(self):
        btype = self.client.bucket_type("no_siblings")
        old = btype.get_property("notfound_ok")
        try:
            btype.set_property("notfound_ok", not old)
            self.assertEqual(not old, btype.get_property("notfound_ok"))
            self.assertEqual(not old, self.other_client.bucket_type(
                "no_siblings").get_property("notfound_ok"))
        finally:
            btype.set_property("notfound_ok", old)
        self.assertEqual(old, btype.get_property("notfound_ok"))

    def test_btype_set_props_immutable(self):
        btype = self.client.bucket_type("maps")
        with self.assertRaises(RiakError):
            btype.set_property("datatype", "counter")
        self.assertEqual("map", btype.get_property("datatype"))


class BucketTypePb(BucketTypeBase, unittest.TestCase):
    protocol = "pbc"
    other = "http"


class BucketTypeHttp(BucketTypeBase, unittest.TestCase):
    protocol = "http"
    other = "pbc"


if __name__ == "__main__":
    unittest.main()
