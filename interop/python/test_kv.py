"""The real Python Riak client (riak 2.7.0, Python 3.6) against a running
Basalt node, over PB and over HTTP: the plain KV surface a new user tries
first — store, fetch, delete, conditional fetch by vclock, siblings in an
allow_mult bucket type and resolving them, bucket props (set, read,
reset), bucket-type props, 2i exact and range queries with paging and
return_terms, list keys and list buckets, ping and server info.

Run by interop/run.sh's Python stage with BASALT_PB_ADDR and
BASALT_HTTP_ADDR (host:port) and the bucket type `py_mult`
(allow_mult true) created on that node.
"""

import unittest

from basalt_env import client




class KvBase(object):
    protocol = None

    @classmethod
    def setUpClass(cls):
        cls.client = client(cls.protocol)
        cls.name = "py_kv_" + cls.protocol

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_ping_and_server_info(self):
        self.assertTrue(self.client.ping())
        self.assertTrue(self.client.is_alive())

    def test_client_id(self):
        # As the client's own test_uses_client_id_if_given: over PB a new
        # connection's client id is four zero bytes, as Riak's (Riak
        # keeps vnode clocks; the id is only echoed back).
        if self.protocol == "pbc":
            self.assertEqual(self.client.client_id, "\0\0\0\0")

    def test_store_fetch_delete(self):
        b = self.client.bucket(self.name)
        o = b.new("k1", data={"a": 1})
        o.store()
        got = b.get("k1")
        self.assertTrue(got.exists)
        self.assertEqual(got.data, {"a": 1})
        self.assertIsNotNone(got.vclock)
        got.data = {"a": 2}
        got.store()
        self.assertEqual(b.get("k1").data, {"a": 2})
        b.delete("k1")
        self.assertFalse(b.get("k1").exists)
        # Binary values keep their bytes.
        raw = b.new("bin", encoded_data=b"\x00\xff\x10", content_type="application/octet-stream")
        raw.store()
        self.assertEqual(b.get("bin").encoded_data, b"\x00\xff\x10")

    def test_siblings_and_resolution(self):
        b = self.client.bucket_type("py_mult").bucket(self.name)
        b.new("s", data="one").store()
        # A second write without the first's clock: a sibling.
        b.new("s", data="two").store()
        got = b.get("s")
        self.assertEqual(sorted(s.data for s in got.siblings), ["one", "two"])
        # Resolve: keep one, store with the fetched clock.
        got.siblings = [s for s in got.siblings if s.data == "two"]
        got.store()
        again = b.get("s")
        self.assertEqual([s.data for s in again.siblings], ["two"])

    def test_bucket_props_and_type_props(self):
        b = self.client.bucket(self.name + "_props")
        b.set_properties({"n_val": 2, "allow_mult": True})
        props = b.get_properties()
        self.assertEqual(props["n_val"], 2)
        self.assertTrue(props["allow_mult"])
        b.clear_properties()
        self.assertEqual(b.get_properties()["n_val"], 3)
        tprops = self.client.bucket_type("py_mult").get_properties()
        self.assertTrue(tprops["allow_mult"])

    def test_2i_with_paging_and_terms(self):
        b = self.client.bucket(self.name + "_2i")
        for i in range(7):
            o = b.new("i%d" % i, data=i)
            o.add_index("n_int", i)
            o.add_index("tag_bin", "t%d" % (i % 2))
            o.store()
        self.assertEqual(sorted(b.get_index("tag_bin", "t1")), ["i1", "i3", "i5"])
        keys, page = [], b.get_index("n_int", 1, 5, max_results=2)
        while True:
            self.assertLessEqual(len(page.results), 2)
            keys.extend(page.results)
            if not page.has_next_page():
                break
            page = page.next_page()
        self.assertEqual(keys, ["i1", "i2", "i3", "i4", "i5"])
        terms = b.get_index("n_int", 2, 3, return_terms=True)
        self.assertEqual(sorted(terms.results), [(2, "i2"), (3, "i3")])

    def test_list_keys_and_buckets(self):
        b = self.client.bucket(self.name + "_list")
        for i in range(5):
            b.new("l%d" % i, data=i).store()
        self.assertEqual(sorted(b.get_keys()), ["l%d" % i for i in range(5)])
        streamed = [k for chunk in b.stream_keys() for k in chunk]
        self.assertEqual(sorted(streamed), ["l%d" % i for i in range(5)])
        names = [x.name for x in self.client.get_buckets()]
        self.assertIn(self.name + "_list", names)


class KvPb(KvBase, unittest.TestCase):
    protocol = "pbc"


class KvHttp(KvBase, unittest.TestCase):
    protocol = "http"


if __name__ == "__main__":
    unittest.main()
