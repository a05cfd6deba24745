// Riak's JavaScript built-ins (the `Riak` object of riak_kv's
// mapred_builtins.js, re-written for Basalt from their documented
// behaviour) and the entry points Basalt's VMs call (`__basalt_*`). Loaded
// into every VM before the files of `mapred.js_source_dir`.

var Riak = (function () {
  function isNotFound(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v) &&
      Object.prototype.hasOwnProperty.call(v, "not_found");
  }
  function firstData(value) {
    var vs = value && value.values;
    if (!Array.isArray(vs) || vs.length === 0) {
      throw new Error("not a Riak object (no values): " + JSON.stringify(value));
    }
    return vs[0].data;
  }
  return {
    getClassName: function (obj) {
      return Object.prototype.toString.call(obj).slice(8, -1);
    },
    isNotFound: isNotFound,
    filterNotFound: function (values) {
      return values.filter(function (v) { return !isNotFound(v); });
    },
    // A not-found input passes through unchanged (as Riak's).
    mapValues: function (value, keyData, arg) {
      if (isNotFound(value)) { return [value]; }
      var data = firstData(value);
      return Array.isArray(data) ? data : [data];
    },
    mapValuesJson: function (value, keyData, arg) {
      if (isNotFound(value)) { return [value]; }
      return Riak.mapValues(value, keyData, arg).map(function (d) {
        return JSON.parse(d);
      });
    },
    // The JSON value when every field of `arg` ({field: value}) matches.
    mapByFields: function (value, keyData, fields) {
      if (isNotFound(value)) { return []; }
      var o = JSON.parse(firstData(value));
      for (var f in fields) {
        if (o[f] !== fields[f]) { return []; }
      }
      return [o];
    },
    reduceSum: function (values, arg) {
      return [Riak.filterNotFound(values).reduce(function (a, b) { return a + b; }, 0)];
    },
    reduceMin: function (values, arg) {
      var vs = Riak.filterNotFound(values);
      if (vs.length === 0) { return []; }
      return [vs.reduce(function (a, b) { return a < b ? a : b; })];
    },
    reduceMax: function (values, arg) {
      var vs = Riak.filterNotFound(values);
      if (vs.length === 0) { return []; }
      return [vs.reduce(function (a, b) { return a > b ? a : b; })];
    },
    // `arg`: the source of a comparator, as Array.prototype.sort takes;
    // as in Riak, an arg that is not one (riakc's `none` arrives as
    // "none") sorts by the default order.
    reduceSort: function (values, arg) {
      if (typeof arg === "string" && arg.length > 0) {
        var cmp;
        try { cmp = (0, eval)("(" + arg + ")"); } catch (e) { cmp = undefined; }
        if (typeof cmp === "function") { return values.sort(cmp); }
      }
      return values.sort();
    },
    reduceNumericSort: function (values, arg) {
      return values.sort(function (a, b) { return a - b; });
    },
    // The first `arg` values (Riak's own had an off-by-one; clients work
    // around it by sending this very function as source).
    reduceLimit: function (values, arg) {
      return values.slice(0, arg);
    },
    reduceSlice: function (values, arg) {
      return values.slice(arg[0], arg[1]);
    }
  };
})();

var __basalt = (function () {
  var cache = new Map();
  var CACHE_MAX = 256;
  function lookup(name) {
    var parts = name.split(".");
    var f = globalThis;
    for (var i = 0; i < parts.length; i++) {
      if (f === undefined || f === null) { break; }
      f = f[parts[i]];
    }
    if (typeof f !== "function") {
      throw new Error("no JavaScript function named " + name);
    }
    return f;
  }
  function fn(kind, spec) {
    var key = kind + "\u0000" + spec;
    var f = cache.get(key);
    if (f !== undefined) { return f; }
    if (kind === "source") {
      f = (0, eval)("(" + spec + ")");
      if (typeof f !== "function") {
        throw new Error("the source is not a function: " + spec.slice(0, 200));
      }
    } else {
      f = lookup(spec);
    }
    if (cache.size >= CACHE_MAX) { cache.clear(); }
    cache.set(key, f);
    return f;
  }
  function wrap(e) {
    if (e instanceof Error) { return e; }
    // QuickJS throws null when it runs out of memory while raising its
    // own "out of memory" error (seen in CI); a script's own `throw null`
    // is reported the same way.
    if (e === null) { return new Error("out of memory (or a thrown null)"); }
    var text;
    try { text = JSON.stringify(e); } catch (x) { text = String(e); }
    return new Error(text === undefined ? String(e) : text);
  }
  function out(r, what) {
    if (!Array.isArray(r)) {
      throw new Error(what + " function must return a list, got " + JSON.stringify(r));
    }
    return r;
  }
  return {
    map: function (kind, spec, inputsJson, argJson) {
      var f = fn(kind, spec);
      var inputs = JSON.parse(inputsJson);
      var arg = JSON.parse(argJson);
      var res = [];
      for (var i = 0; i < inputs.length; i++) {
        try {
          res.push(out(f(inputs[i][0], inputs[i][1], arg), "a map"));
        } catch (e) {
          throw wrap(e);
        }
      }
      return JSON.stringify(res);
    },
    reduce: function (kind, spec, valuesJson, argJson) {
      var f = fn(kind, spec);
      var r;
      try {
        r = out(f(JSON.parse(valuesJson), JSON.parse(argJson)), "a reduce");
      } catch (e) {
        throw wrap(e);
      }
      return JSON.stringify(r);
    },
    // The first value's data comes as its own string (not inside the
    // JSON), and goes back only if the hook changed it: a large value
    // crosses no JSON codec.
    hook: function (kind, spec, objectJson, data) {
      var f = fn(kind, spec);
      var o = JSON.parse(objectJson);
      if (Array.isArray(o.values) && o.values.length > 0) {
        o.values[0].data = data;
      }
      var r;
      try {
        r = f(o);
      } catch (e) {
        throw wrap(e);
      }
      if (r !== null && typeof r === "object" && Array.isArray(r.values) &&
          r.values.length > 0 && r.values[0] !== null &&
          typeof r.values[0] === "object" && r.values[0].data === data) {
        r.values[0].data = null;
        r.__basalt_same_data = true;
      }
      var s = JSON.stringify(r);
      if (s === undefined) {
        throw new Error("a hook must return the object or {\"fail\": reason}");
      }
      return s;
    }
  };
})();
