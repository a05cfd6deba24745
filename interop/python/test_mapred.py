"""The real Python Riak client (riak 2.7.0, Python 3.6) against a running
Basalt node, over PB and over HTTP: MapReduce (JavaScript and Erlang
built-ins, bucket / key-filter / listed-key / 2i / typed-bucket inputs,
streamed and not), the client's 2i helpers (`bucket.get_index`,
`client.index(...).run()`), an Erlang source phase refused as Riak
refuses it, and a pre-commit hook set through the client.

Run by interop/run.sh with BASALT_PB_ADDR and BASALT_HTTP_ADDR
(host:port) pointing at the node, and the bucket type `py_typed` created.
Each check compares MapReduce results with what plain GETs of the same
objects give.
"""

import unittest
from contextlib import closing

from basalt_env import client
from riak import RiakError

COUNT = 30

SUM_N = "function(v) { return [JSON.parse(v.values[0].data).n]; }"



class MapReduceBase(object):
    protocol = None

    @classmethod
    def setUpClass(cls):
        cls.client = client(cls.protocol)
        cls.bucket_name = "py_mr_" + cls.protocol
        cls.bucket = cls.client.bucket(cls.bucket_name)
        for i in range(COUNT):
            o = cls.bucket.new("k%02d" % i, data={"n": i})
            o.add_index("n_int", i)
            o.add_index("parity_bin", "even" if i % 2 == 0 else "odd")
            o.store()
        # What plain GETs say, for every comparison below.
        cls.direct = {}
        for i in range(COUNT):
            key = "k%02d" % i
            cls.direct[key] = cls.bucket.get(key).data["n"]

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_whole_bucket_javascript(self):
        got = (self.client.add(self.bucket_name)
               .map(SUM_N)
               .reduce_sum()
               .run())
        self.assertEqual(got, [sum(self.direct.values())])

    def test_map_values_json_and_sort(self):
        got = (self.client.add(self.bucket_name)
               .map_values_json()
               .run())
        self.assertEqual(sorted(o["n"] for o in got),
                         sorted(self.direct.values()))
        got = (self.client.add(self.bucket_name)
               .map(SUM_N)
               .reduce_numeric_sort()
               .run())
        self.assertEqual(got, sorted(self.direct.values()))

    def test_erlang_builtins(self):
        got = (self.client.add(self.bucket_name)
               .reduce(["riak_kv_mapreduce", "reduce_count_inputs"])
               .run())
        self.assertEqual(got, [COUNT])
        got = (self.client.add(self.bucket_name, "k01")
               .add(self.bucket_name, "k02")
               .map(["riak_kv_mapreduce", "map_object_value"])
               .reduce(["riak_kv_mapreduce", "reduce_sort"])
               .run())
        self.assertEqual(len(got), 2)
        self.assertEqual(sorted(got), got)

    def test_key_filters(self):
        mr = self.client.add(self.bucket_name)
        mr.add_key_filter("tokenize", "k", 1)
        mr.add_key_filter("string_to_int")
        mr.add_key_filter("less_than", 10)
        got = mr.map(SUM_N).reduce_sum().run()
        want = sum(n for k, n in self.direct.items() if int(k[1:]) < 10)
        self.assertEqual(got, [want])

    def test_index_helpers(self):
        # The client's 2i helper (a 2i query) and its MapReduce form.
        keys = sorted(self.bucket.get_index("n_int", 5, 9))
        self.assertEqual(keys, ["k05", "k06", "k07", "k08", "k09"])
        links = self.client.index(self.bucket_name, "n_int", 5, 9).run()
        self.assertEqual(sorted(k for (_, k, _) in links), keys)
        got = (self.client.index(self.bucket_name, "parity_bin", "even")
               .map(SUM_N).reduce_sum().run())
        self.assertEqual(got, [sum(n for n in self.direct.values() if n % 2 == 0)])

    def test_streamed(self):
        mr = (self.client.add(self.bucket_name)
              .map(SUM_N, {"keep": True})
              .reduce_sum({"keep": True}))
        phases = {}
        with closing(mr.stream()) as results:
            for phase, data in results:
                phases.setdefault(phase, []).extend(data)
        self.assertEqual(sorted(phases[0]), sorted(self.direct.values()))
        self.assertEqual(phases[1], [sum(self.direct.values())])

    def test_typed_bucket(self):
        b = self.client.bucket_type("py_typed").bucket("t_" + self.protocol)
        for i in range(5):
            b.new("t%d" % i, data={"n": i * 10}).store()
        got = self.client.add(b).map(SUM_N).reduce_sum().run()
        self.assertEqual(got, [100])

    def test_javascript_error_is_raised(self):
        mr = self.client.add(self.bucket_name, "k01").map(
            "function(v) { throw new Error('py says no'); }")
        with self.assertRaises(RiakError) as cm:
            mr.run()
        self.assertIn("py says no", str(cm.exception))

    def test_erlang_source_map_is_refused_as_riak_refuses_it(self):
        # The client's own test_erlang_source_map_reduce: Riak with
        # allow_strfun off (its default; Basalt never compiles Erlang)
        # answers worker_startup_failed, which the client reports as
        # "May have tried erlang strfun when not allowed".
        src = """fun(Object, _KD, _A) ->
            Value = riak_object:get_value(Object),
            [Value]
        end."""
        mr = self.client.add(self.bucket_name, "k01").map(
            src, {"language": "erlang"})
        with self.assertRaises(RiakError) as cm:
            mr.run()
        self.assertTrue(cm.exception.value.startswith("May have tried"),
                        cm.exception.value)
        self.assertIn("worker_startup_failed", cm.exception.value)

    def test_precommit_hook(self):
        b = self.client.bucket("py_hook_" + self.protocol)
        b.set_property("precommit",
                       [{"mod": "basalt_hooks", "fun": "validate_json"}])
        self.assertEqual(b.get_properties()["precommit"],
                         [{"mod": "basalt_hooks", "fun": "validate_json"}])
        o = b.new("bad", encoded_data=b"{not json",
                  content_type="application/json")
        with self.assertRaises(RiakError) as cm:
            o.store()
        # PB carries the hook's reason; the HTTP client reports the 403.
        want = "Invalid JSON" if self.protocol == "pbc" else "403"
        self.assertIn(want, str(cm.exception))
        self.assertFalse(b.get("bad").exists)
        b.new("good", data={"ok": True}).store()
        self.assertEqual(b.get("good").data, {"ok": True})


class PbMapReduce(MapReduceBase, unittest.TestCase):
    protocol = "pbc"


class HttpMapReduce(MapReduceBase, unittest.TestCase):
    protocol = "http"


if __name__ == "__main__":
    unittest.main()
