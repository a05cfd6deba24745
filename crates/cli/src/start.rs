//! `basalt start`: runs a node (the PB, HTTP and cluster listeners of `basalt-server`) until
//! SIGTERM or SIGINT, then shuts down gracefully. Logging starts once the
//! config is read, in its `log_format`.

use anyhow::Context;
use basalt_server::config::{Config, DEFAULT_CONFIG};
use std::path::PathBuf;

/// Arguments of `basalt start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// TOML config file (see --print-default-config); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the default config file and exit.
    #[arg(long)]
    print_default_config: bool,
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// PB listen address (default 127.0.0.1:8087).
    #[arg(long)]
    pb_listen: Option<String>,
    /// PB address advertised to the other nodes of a cluster (default: the
    /// bound --pb-listen address; set it when binding 0.0.0.0).
    #[arg(long)]
    advertise_pb: Option<String>,
    /// HTTP listen address (default 127.0.0.1:8098; "" disables HTTP).
    #[arg(long)]
    http_listen: Option<String>,
    /// Cluster and admin listen address (default 127.0.0.1:8099): other
    /// nodes and `basalt admin` talk to the node here.
    #[arg(long)]
    cluster_listen: Option<String>,
    /// Cluster address advertised to the other nodes (default: the bound
    /// --cluster-listen address; set it when binding 0.0.0.0).
    #[arg(long)]
    advertise_cluster: Option<String>,
    /// Node name.
    #[arg(long)]
    node_name: Option<String>,
    /// Backend of every vnode.
    #[arg(long)]
    backend: Option<String>,
    /// Ring size (partitions).
    #[arg(long)]
    ring_size: Option<u32>,
}

/// Runs the node.
pub fn run(args: StartArgs) -> anyhow::Result<crate::Outcome> {
    if args.print_default_config {
        print!("{DEFAULT_CONFIG}");
        return Ok(crate::Outcome::Done);
    }
    let mut config = match &args.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Config::from_toml(&text)?
        }
        None => Config::default(),
    };
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    }
    if let Some(a) = args.pb_listen {
        config.pb_listen = a;
    }
    if let Some(a) = args.advertise_pb {
        config.advertise_pb = a;
    }
    if let Some(a) = args.http_listen {
        config.http_listen = a;
    }
    if let Some(a) = args.cluster_listen {
        config.cluster_listen = a;
    }
    if let Some(a) = args.advertise_cluster {
        config.advertise_cluster = a;
    }
    if let Some(n) = args.node_name {
        config.node_name = n;
    }
    if let Some(b) = args.backend {
        config.backend = b;
    }
    if let Some(r) = args.ring_size {
        config.ring_size = r;
    }
    config.validate()?;
    crate::init_logging(config.log_format);
    let rt = basalt_server::runtime(&config).context("building the runtime")?;
    rt.block_on(async move {
        let shutdown = async {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot watch SIGTERM");
                        std::future::pending::<()>().await;
                        return;
                    }
                };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
            }
        };
        basalt_server::run(config, shutdown).await
    })?;
    Ok(crate::Outcome::Done)
}
