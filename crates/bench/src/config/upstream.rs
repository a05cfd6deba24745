//! What basho_bench has that basalt bench does not run, with why: its
//! drivers ([`UPSTREAM_DRIVERS`], named by the error of `driver`) and the
//! keys of those drivers and of options not implemented
//! ([`UPSTREAM_KEYS`], named with their reason in a warning instead of
//! the unknown-key one). The operations of implemented drivers that are
//! not run are in `ops` (`unsupported_op`). Every key of basho_bench's
//! `examples/` is either read, ignored (`raw`), or here; `docs/bench.md`
//! has the table.

/// basho_bench's drivers that basalt bench does not implement, each with
/// why (the error of `driver` says it).
pub const UPSTREAM_DRIVERS: &[(&str, &str)] = &[
    (
        "2i",
        "its puts and 2i queries over PB, HTTP and MapReduce on distributed Erlang \
         nodes are not implemented; the riakc_pb driver's update_with2i, query_postcode \
         and query_dob and the nhs driver run 2i over PB",
    ),
    (
        "bitcask",
        "it opens a bitcask store inside the Erlang VM; basalt_embedded opens a store \
         in this process ({basalt_backend, bitcask})",
    ),
    (
        "eleveldb",
        "it opens LevelDB stores inside the Erlang VM; basalt_embedded opens stores in \
         this process (basalt_backend, basalt_stores)",
    ),
    (
        "innostore",
        "it opens an InnoDB store inside the Erlang VM; basalt_embedded opens Basalt's \
         stores in this process",
    ),
    (
        "ets",
        "it writes an ETS table inside the Erlang VM; basalt_embedded with \
         {basalt_backend, memory} is the in-process equivalent",
    ),
    (
        "dets",
        "it writes a DETS file inside the Erlang VM; basalt_embedded opens Basalt's \
         stores in this process",
    ),
    (
        "kv_backend",
        "it calls a riak_kv backend module inside the Erlang VM; basalt_embedded calls \
         Basalt's backends (basalt_backend)",
    ),
    (
        "shortcut",
        "it writes riak_kv backends directly inside the Erlang VM; basalt_embedded \
         writes Basalt's backends (basalt_backend)",
    ),
    (
        "nullfile",
        "it writes values to local files; not implemented (null measures the harness)",
    ),
    (
        "cassandra",
        "it benchmarks Cassandra (Thrift), not a Riak node",
    ),
    (
        "cassandra_cql",
        "it benchmarks Cassandra (CQL), not a Riak node",
    ),
    ("hibari", "it benchmarks Hibari, not a Riak node"),
    (
        "carbon",
        "it sends metrics to Graphite's carbon, not to a Riak node",
    ),
    (
        "cs",
        "it benchmarks Riak CS's S3 API, which Basalt does not serve",
    ),
    (
        "cs2",
        "it benchmarks Riak CS's S3 API, which Basalt does not serve",
    ),
    (
        "riakclient",
        "it uses Riak's internal Erlang client over distributed Erlang; use riakc_pb \
         (PB) or http_raw (HTTP)",
    ),
    (
        "riakc_java",
        "it runs the Java client in a JVM node; use riakc_pb, the same PB operations",
    ),
    (
        "http",
        "basho_bench's generic HTTP driver (targets, headers and values templates) is \
         not implemented; http_raw runs Riak's HTTP API",
    ),
    (
        "cluster",
        "it drives other basho_bench nodes over distributed Erlang; run one basalt \
         bench per load machine",
    ),
];

/// basho_bench keys that basalt bench does not read, with why: the keys of
/// drivers it does not implement and of options it does not have.
pub const UPSTREAM_KEYS: &[(&[&str], &str)] = &[
    (
        &["pb_replies", "nodes", "cookie", "enforce_keyrange"],
        "the 2i driver's, which is not implemented",
    ),
    (
        &["bitcask_dir", "bitcask_flags"],
        "the bitcask driver's, which is not implemented",
    ),
    (
        &["carbon_batch_size", "carbon_keep_connect"],
        "the carbon driver's, which is not implemented",
    ),
    (
        &[
            "cassandra_hosts",
            "cassandra_port",
            "cassandra_keyspace",
            "cassandra_consistencylevel",
            "cassandra_ips",
            "cassandra_columnfamily",
            "cassandra_column",
            "cassandra_composite_partition_column",
            "cassandra_composite_row_column",
            "cassandra_range_query_num_rows",
            "cassandra_read_consistency",
            "cassandra_write_consistency",
        ],
        "the cassandra drivers', which are not implemented",
    ),
    (
        &["cluster_actors"],
        "the cluster driver's, which is not implemented",
    ),
    (
        &[
            "cs_access_key",
            "cs_secret_key",
            "cs_bucket",
            "cs_disconnect_frequency",
            "cs_raw_ip",
            "cs_raw_port",
            "cs_http_proxy_host",
            "cs_http_proxy_port",
            "cs_request_timeout",
            "cs_measurement_units",
            "cs_display_name",
            "cs2_host_base",
            "cs2_port",
            "cs2_hosts",
            "cs2_user_count",
            "cs2_user_prefix",
            "cs2_bucket_prefix",
        ],
        "the Riak CS drivers', which are not implemented",
    ),
    (
        &["eleveldb_dir", "eleveldb_num_instances"],
        "the eleveldb driver's, which is not implemented (basalt_data_dir, basalt_stores)",
    ),
    (
        &[
            "hibari_table",
            "hibari_client_type",
            "hibari_server_tcp_port",
            "hibari_server_service",
            "hibari_servers",
            "hibari_native_1node",
            "hibari_native_my_sname",
            "hibari_native_ticktime",
            "hibari_native_cookie",
        ],
        "the hibari driver's, which is not implemented",
    ),
    (
        &["generators", "values", "headers", "targets"],
        "the generic http driver's, which is not implemented",
    ),
    (
        &["http_search_generator"],
        "the http_raw driver's search op, which is not implemented",
    ),
    (
        &["http_raw_append_headers"],
        "extra HTTP headers are not sent by basalt bench's http_raw driver",
    ),
    (
        &["innostore_config"],
        "the innostore driver's, which is not implemented",
    ),
    (
        &["be_backend_mod", "be_config", "be_disable_uses_r_object"],
        "the kv_backend driver's, which is not implemented (basalt_backend)",
    ),
    (
        &[
            "riakc_java_nodes",
            "riakc_java_transport",
            "riakc_java_pbc_buffer",
            "riakc_java_replies",
        ],
        "the riakc_java driver's, which is not implemented",
    ),
    (
        &[
            "riakclient_nodes",
            "riakclient_mynode",
            "riakclient_replies",
        ],
        "the riakclient driver's, which is not implemented",
    ),
    (
        &[
            "shortcut_backend",
            "shortcut_backend_flags",
            "shortcut_data_dir",
            "shortcut_ring_creation_size",
            "shortcut_n_val",
            "shortcut_bucket",
            "shortcut_store_riak_object",
        ],
        "the shortcut driver's, which is not implemented",
    ),
];

/// Why basalt bench does not read `key`, if it is one of [`UPSTREAM_KEYS`].
pub fn upstream_key(key: &str) -> Option<&'static str> {
    UPSTREAM_KEYS
        .iter()
        .find(|(keys, _)| keys.contains(&key))
        .map(|(_, why)| *why)
}
