"""The real Python Riak client (riak 2.7.0, Python 3.6) against a running
Basalt node: Riak data types over PB and over HTTP — counters, sets (a
remove sends the fetched context), maps (counter, register, set, flag and
nested map fields; removing a field), HyperLogLogs — and the client's own
refusal of a plain object in a data-type bucket.

Run by interop/run.sh's Python stage with BASALT_PB_ADDR and
BASALT_HTTP_ADDR (host:port). It needs the bucket types `counters`, `sets`,
`maps` and `hlls` (datatype counter, set, map, hll) on that node; without
them every test is skipped, saying so.
"""

import time
import unittest

from basalt_env import client
from riak import RiakError, RiakObject

TYPES = {"counters": "counter", "sets": "set", "maps": "map", "hlls": "hll"}



class DatatypesBase(object):
    protocol = None

    @classmethod
    def setUpClass(cls):
        cls.client = client(cls.protocol)
        for name, dt in TYPES.items():
            try:
                props = cls.client.bucket_type(name).get_properties()
            except RiakError as e:
                cls.client.close()
                raise unittest.SkipTest(
                    "bucket type %r missing on the node (%s): create it with "
                    "datatype %r" % (name, e, dt))
            if props.get("datatype") != dt:
                cls.client.close()
                raise unittest.SkipTest(
                    "bucket type %r has datatype %r, not %r"
                    % (name, props.get("datatype"), dt))
        cls.run_id = "%s_%d" % (cls.protocol, int(time.time() * 1000))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def bucket(self, btype):
        return self.client.bucket_type(btype).bucket("py_dt_" + self.run_id)

    def test_counter(self):
        b = self.bucket("counters")
        c = b.new("c")
        c.increment(5)
        c.store()
        c = b.get("c")
        c.decrement(2)
        c.store()
        self.assertEqual(b.get("c").value, 3)

    def test_set_add_and_remove_with_context(self):
        b = self.bucket("sets")
        s = b.new("s")
        for e in ("a", "b", "c"):
            s.add(e)
        s.store()
        s = b.get("s")
        self.assertEqual(s.value, frozenset(["a", "b", "c"]))
        self.assertIsNotNone(s.context)
        s.discard("a")
        s.store()
        self.assertEqual(b.get("s").value, frozenset(["b", "c"]))

    def test_map_fields_and_field_removal(self):
        b = self.bucket("maps")
        m = b.new("m")
        m.counters["visits"].increment(2)
        m.registers["name"].assign("ann")
        m.sets["tags"].add("x")
        m.flags["vip"].enable()
        m.maps["addr"].registers["city"].assign("oslo")
        m.store()
        m = b.get("m")
        self.assertEqual(m.counters["visits"].value, 2)
        self.assertEqual(m.registers["name"].value, "ann")
        self.assertEqual(m.sets["tags"].value, frozenset(["x"]))
        self.assertTrue(m.flags["vip"].value)
        self.assertEqual(m.maps["addr"].registers["city"].value, "oslo")
        del m.sets["tags"]
        m.counters["visits"].increment(1)
        m.store()
        m = b.get("m")
        self.assertNotIn("tags", m.sets)
        self.assertEqual(m.counters["visits"].value, 3)

    def test_hll(self):
        b = self.bucket("hlls")
        h = b.new("h")
        for i in range(100):
            h.add("e%d" % i)
        h.store()
        est = b.get("h").value
        self.assertTrue(95 <= est <= 105, est)

    def test_plain_object_refused_in_a_datatype_bucket(self):
        b = self.bucket("sets")
        o = RiakObject(self.client, b, "plain")
        o.content_type = "application/json"
        o.data = {"a": 1}
        with self.assertRaises(RiakError) as e:
            o.store()
        if self.protocol == "pbc":  # HTTP errors carry only the status (400)
            self.assertIn("datatype", str(e.exception))


class PbDatatypes(DatatypesBase, unittest.TestCase):
    protocol = "pbc"


class HttpDatatypes(DatatypesBase, unittest.TestCase):
    protocol = "http"


if __name__ == "__main__":
    unittest.main()
