//! A config that was valid stays valid: the default config file of the build
//! before the server-house change (commit fd4c700, kept as a fixture) loads
//! and means today's defaults, and a node opens on it; a `[repl]` section
//! with sinks and filters loads as before; a sink filter that does not
//! parse still stops the node at start with a message naming the sink (the
//! filter is replication's to parse now, not the config loader's).

use basalt_server::config::Config;
use basalt_server::Node;

const FD4C700_DEFAULT: &str = include_str!("fixtures/default-config-fd4c700.toml");

#[test]
fn the_previous_default_config_loads_as_todays_defaults() {
    let c = Config::from_toml(FD4C700_DEFAULT).unwrap_or_else(|e| panic!("{e}"));
    // Defaults changed since, which the old file spells out: the hook VMs
    // (2 then, 16 now: issue 56 item 5).
    assert_eq!(c.mapred.hook_js_vm_count, 2);
    let mut now = Config::default();
    assert_eq!(now.mapred.hook_js_vm_count, 16);
    now.mapred.hook_js_vm_count = 2;
    assert_eq!(c, now);
    // And a node opens on it (memory backend, a scratch directory, ports
    // chosen by the OS: the rest as the file says).
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = Config {
        data_dir: dir.path().to_path_buf(),
        backend: "memory".into(),
        pb_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        cluster_listen: "127.0.0.1:0".into(),
        ..c
    };
    let node = Node::open(c).unwrap_or_else(|e| panic!("{e}"));
    node.close();
}

fn with_sink(filter: &str) -> String {
    format!(
        "{FD4C700_DEFAULT}\n[[repl.sink]]\nname = \"dr\"\npeers = [\"10.0.0.9:8099\"]\nfilter = \"{filter}\"\n"
    )
}

#[test]
fn repl_sinks_and_filters_load_as_before() {
    for filter in ["any", "block_rt", "bucket:b", "prefix:p", "type:t"] {
        let c = Config::from_toml(&with_sink(filter)).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(c.repl.all_sinks().len(), 1);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let node = Node::open(Config {
            repl: c.repl,
            ..Config::ephemeral(dir.path())
        })
        .unwrap_or_else(|e| panic!("{filter}: {e}"));
        node.close();
    }
}

#[test]
fn a_bad_sink_filter_stops_the_node_and_names_the_sink() {
    let c = Config::from_toml(&with_sink("all")).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let err = match Node::open(Config {
        repl: c.repl,
        ..Config::ephemeral(dir.path())
    }) {
        Ok(node) => {
            node.close();
            panic!("a node opened with sink filter \"all\"")
        }
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("repl sink dr") && err.contains("bad repl filter \"all\""),
        "{err}"
    );
}
