//! `basalt admin`: administers a running node over its cluster port
//! (`cluster_listen`, default 127.0.0.1:8099; the client PB port does not
//! serve admin codes), as `riak admin` does a Riak node. Most commands
//! send one admin line (code 247: `member-status`, `cluster plan`,
//! `status`, `transfers`, ...) and print the node's answer; with the
//! global `--json` flag the line starts with the word `--json` and the
//! node answers with one JSON document holding the same facts. Bucket
//! types are [`crate::admin_btypes`], `aae fold` [`crate::aae_fold`],
//! `services` and `wait-for-service` [`crate::wait`], `diag`
//! [`crate::diag`], `backup` and `restore` [`crate::admin_backup`]. Each command is one call of `riak_pb`'s blocking
//! client through [`crate::admin_client`], whose reply is bounded by its
//! `MAX_REPLY`. An address where something else answers — a PB port
//! (Riak's unknown-code error), an HTTP port, anything that closes or
//! speaks another framing — is an error naming what answered.

use crate::admin_client::{line, AdminNode};

/// Arguments of `basalt admin`.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// Cluster address of the node (its cluster_listen / advertise_cluster).
    #[arg(long, default_value = "127.0.0.1:8099")]
    node: String,
    /// A certificate of the cluster CA (PEM) for a node whose cluster port
    /// has mutual TLS (cluster_certfile & co.): a node's, or a user's whose
    /// user holds basalt.admin once security is on (`basalt certs client`).
    #[arg(long, requires_all = ["key", "cacert"])]
    cert: Option<std::path::PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(long, requires_all = ["cert", "cacert"])]
    key: Option<std::path::PathBuf>,
    /// The cluster CA's certificate (PEM): the node is verified against it.
    #[arg(long, requires_all = ["cert", "key"])]
    cacert: Option<std::path::PathBuf>,
    /// Print what the command shows as one JSON document (the same facts
    /// as the text; a command that only reports a change prints
    /// `{"message": TEXT}`). Errors stay one line on stderr.
    #[arg(long = "json", global = true)]
    as_json: bool,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AdminCommand {
    /// Bucket types: create, activate, list, status, update.
    #[command(subcommand)]
    BucketType(crate::admin_btypes::BucketTypeCommand),
    /// Cluster membership, staged as `riak admin cluster`: join, leave,
    /// replace, force-replace, force-remove, plan, commit, clear.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// The node's statistics, one `name : value` line each (`riak admin
    /// status`; the same object as HTTP `/stats`).
    Status,
    /// The node's name and the services it runs (`riak admin services`).
    Services,
    /// Wait until the node serves SERVICE (`riak admin wait-for-service`):
    /// prints "SERVICE is not up: REASON" each second until it does, then
    /// "SERVICE is up". A node listens only once its vnodes are open.
    WaitForService {
        /// riak_kv, riak_pipe (MapReduce) or riak_api.
        #[arg(default_value = "riak_kv")]
        service: String,
        /// The node's name (`riak@127.0.0.1`): when given, the node at
        /// --node must have it.
        node_name: Option<String>,
        /// Give up after this many seconds (exit 1); Riak, and the
        /// default, wait forever.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Members, their status, ring share and whether they are up.
    MemberStatus,
    /// Mark an unreachable member down (`riak admin down`): it keeps its
    /// partitions but stops being the claimant, so cluster changes
    /// (force-remove, replace, joins) can go on without it; it is valid
    /// again as soon as it answers. Refused while the node asked still
    /// reaches it.
    Down {
        /// The member's node name.
        node: String,
    },
    /// Pending ownership transfers and the handoffs running on the node.
    RingStatus,
    /// Handoffs across the cluster (`riak admin transfers`): what each
    /// member waits to hand off (ownership transfers, vnodes held for
    /// another owner) and what runs now; members that do not answer are
    /// named.
    Transfers,
    /// Handoff views (`riak admin handoff`): summary, details, config.
    #[command(subcommand)]
    Handoff(HandoffCommand),
    /// Whether every member is up and holds the same cluster state
    /// (`riak admin ringready`): TRUE, or FALSE with why (exit 1).
    Ringready,
    /// Each vnode on the node: its role (primary, fallback, handing off,
    /// receiving), queue length and backend counters (`riak admin
    /// vnode-status`).
    VnodeStatus,
    /// The node's running configuration as TOML (what `--config` reads),
    /// settings named like a password, secret, token or cookie redacted.
    Config,
    /// What the node's data directory holds on disk, per entry (measured
    /// by the node, so it works against a remote node).
    DiskUsage,
    /// Show or set how many handoffs the node runs at once (Riak's
    /// transfer-limit; 0 pauses handoffs until raised; not kept across a
    /// restart, where `transfer_limit` in the config applies).
    TransferLimit {
        /// The new limit (0..=16); none prints the current one.
        limit: Option<usize>,
    },
    /// Replication to another cluster: status, fullsync.
    #[command(subcommand)]
    Repl(ReplCommand),
    /// Anti-entropy on the node: status, round, verify, rebuild, fold.
    #[command(subcommand)]
    Aae(AaeCommand),
    /// Security as Riak's (cluster-wide, spread with the gossip): enable,
    /// disable, status, add-user NAME [password=P] [groups=G,H],
    /// alter-user, del-user, add-group, del-group, grant PERMS on
    /// any|TYPE|TYPE/BUCKET to ROLE, revoke PERMS on SCOPE from ROLE,
    /// add-source USER|all CIDR trust|password|certificate, del-source,
    /// print-users, print-groups, print-grants, print-sources.
    Security {
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Write a support bundle into DIR (as `riak-debug`): the node's
    /// config (no secrets), stats, member, ring, transfer, vnode,
    /// anti-entropy, replication and security status, services, bucket
    /// types, the disk usage of its data directory and the tails of
    /// --log files, with a MANIFEST of what was collected and what failed.
    Diag(crate::diag::DiagArgs),
    /// Back up the whole cluster into DIR: every partition's objects from
    /// a snapshot of its owner's vnode (paced), the ring, bucket types,
    /// bucket props and security state (password hashes included), with
    /// a checksummed manifest written last.
    Backup(crate::admin_backup::BackupArgs),
    /// Restore a backup into this cluster (any node count, the same ring
    /// size): every file is checked first; refused for another ring size
    /// or a cluster holding objects (unless --force) before anything is
    /// written.
    Restore(crate::admin_backup::RestoreArgs),
}

#[derive(Debug, clap::Subcommand)]
enum HandoffCommand {
    /// Per member: handoffs running to or from it and, in parentheses,
    /// all known ones, by kind (ownership, hinted).
    Summary,
    /// One row per handoff running in the cluster.
    Details,
    /// The node's handoff settings (transfer limit, port, batch size).
    Config,
}

#[derive(Debug, clap::Subcommand)]
enum AaeCommand {
    /// The node's cached trees (memory, vnodes built, folds run) and its
    /// exchange counters.
    Status,
    /// Run every anti-entropy exchange this node leads now (one after the
    /// other, repairs paced as scheduled ones) and print the totals.
    Round,
    /// Check every local vnode's cached trees against a fresh fold (builds
    /// them where there are none): reads the whole store of the node.
    Verify,
    /// Rebuild the cached trees of every local vnode (or one partition)
    /// now, one at a time at `aae_rebuild_keys_per_sec`; refused while a
    /// rebuild runs or waits.
    Rebuild {
        /// Only this partition.
        #[arg(long)]
        partition: Option<u32>,
    },
    /// Run an anti-entropy fold query (Riak's aae_fold) over the cluster.
    #[command(subcommand)]
    Fold(crate::aae_fold::FoldCommand),
}

#[derive(Debug, clap::Subcommand)]
enum ReplCommand {
    /// Sinks (state, queue per priority, peers), counters and replication
    /// time of the node.
    Status,
    /// Run one full-sync check with the peer cluster now and print what
    /// it found and queued.
    Fullsync {
        /// all, day, hour, range or auto.
        #[arg(default_value = "auto")]
        check: String,
    },
    /// Add, remove, suspend or resume a sink cluster on this node (kept
    /// across restarts).
    #[command(subcommand)]
    Sink(SinkCommand),
    /// Drop every entry waiting in a sink's queue (a full-sync repairs
    /// them).
    ClearQueue {
        /// The sink's name.
        name: String,
    },
}

#[derive(Debug, clap::Subcommand)]
enum SinkCommand {
    /// Add a sink: refused unless a peer answers as a node of another
    /// Basalt cluster.
    Add {
        /// Its name (letters, digits, '_', '-').
        name: String,
        /// Cluster addresses of some of its nodes, comma-separated (the
        /// others are discovered).
        #[arg(long, value_delimiter = ',', required = true)]
        peers: Vec<String>,
        /// Which writes it takes: any, block_rt, bucket:NAME,
        /// prefix:PREFIX, type:TYPE.
        #[arg(long, default_value = "any")]
        filter: String,
    },
    /// Remove a sink and delete its queue.
    Remove {
        /// The sink's name.
        name: String,
    },
    /// Keep queueing for a sink but stop delivering.
    Suspend {
        /// The sink's name.
        name: String,
    },
    /// Deliver to a suspended sink again.
    Resume {
        /// The sink's name.
        name: String,
    },
}

#[derive(Debug, clap::Subcommand)]
enum ClusterCommand {
    /// Make the node (--node) join the cluster of TARGET: a member's cluster
    /// address, or its node name `name@host` (dialled at host:8099, the
    /// default cluster port).
    Join {
        /// Cluster address or node name of any member of the cluster to join.
        addr: String,
    },
    /// Stage the leave of NODE (default: the node addressed by --node).
    Leave {
        /// Node name.
        node: Option<String>,
    },
    /// Stage the replacement of OLD by NEW (Riak's `cluster replace`):
    /// NEW, a node that joined (`cluster join`, not committed yet), takes
    /// every partition of OLD by handoff; then OLD leaves.
    Replace {
        /// The member replaced (node name).
        old: String,
        /// The joining node that takes its partitions.
        new: String,
    },
    /// Stage a forced replacement (Riak's `cluster force-replace`): at
    /// commit NEW owns OLD's partitions at once, without handoff, and OLD
    /// is removed. OLD's copies are lost (read repair and anti-entropy
    /// restore them from the other replicas): for a node that is gone.
    ForceReplace {
        /// The member replaced (node name).
        old: String,
        /// The joining node that takes its partitions.
        new: String,
    },
    /// Stage a forced removal (Riak's `cluster force-remove`): at commit
    /// NODE is removed and its partitions go to the other members without
    /// handoff (its copies are lost, as with force-replace). Stop the
    /// node first and do not restart it on its data directory.
    ForceRemove {
        /// The member removed (node name).
        node: String,
    },
    /// Show the staged changes and the partition transfers they start.
    Plan,
    /// Apply the staged changes.
    Commit,
    /// Drop the staged changes.
    Clear,
}

/// The admin line of a command that sends one (`None` for the others).
fn line_of(command: &AdminCommand) -> anyhow::Result<Option<String>> {
    Ok(match command {
        AdminCommand::BucketType(_)
        | AdminCommand::Services
        | AdminCommand::WaitForService { .. }
        | AdminCommand::Diag(_)
        | AdminCommand::Backup(_)
        | AdminCommand::Restore(_)
        | AdminCommand::Aae(AaeCommand::Fold(_)) => None,
        AdminCommand::Status => Some("status".to_string()),
        AdminCommand::VnodeStatus => Some("vnode-status".to_string()),
        AdminCommand::Transfers => Some("transfers".to_string()),
        AdminCommand::Ringready => Some("ringready".to_string()),
        AdminCommand::Config => Some("config".to_string()),
        AdminCommand::DiskUsage => Some("disk-usage".to_string()),
        AdminCommand::Handoff(h) => Some(format!(
            "handoff {}",
            match h {
                HandoffCommand::Summary => "summary",
                HandoffCommand::Details => "details",
                HandoffCommand::Config => "config",
            }
        )),
        AdminCommand::MemberStatus => Some("member-status".to_string()),
        AdminCommand::Down { node } => Some(format!("down {node}")),
        AdminCommand::RingStatus => Some("ring-status".to_string()),
        AdminCommand::Security { args } => {
            if args
                .iter()
                .any(|a| a.is_empty() || a.contains(char::is_whitespace))
            {
                anyhow::bail!("security arguments cannot be empty or contain spaces");
            }
            let args: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .filter(|a| *a != "--json")
                .collect();
            Some(format!("security {}", args.join(" ")))
        }
        AdminCommand::TransferLimit { limit } => Some(match limit {
            Some(n) => format!("transfer-limit {n}"),
            None => "transfer-limit".to_string(),
        }),
        AdminCommand::Repl(ReplCommand::Status) => Some("repl-status".to_string()),
        AdminCommand::Repl(ReplCommand::Fullsync { check }) => {
            Some(format!("repl-fullsync {check}"))
        }
        AdminCommand::Repl(ReplCommand::ClearQueue { name }) => {
            Some(format!("repl-queue-clear {name}"))
        }
        AdminCommand::Repl(ReplCommand::Sink(c)) => Some(match c {
            SinkCommand::Add {
                name,
                peers,
                filter,
            } => {
                if filter.contains(char::is_whitespace) {
                    anyhow::bail!("a filter cannot contain spaces");
                }
                format!("repl-sink-add {name} {filter} {}", peers.join(","))
            }
            SinkCommand::Remove { name } => format!("repl-sink-remove {name}"),
            SinkCommand::Suspend { name } => format!("repl-sink-suspend {name}"),
            SinkCommand::Resume { name } => format!("repl-sink-resume {name}"),
        }),
        AdminCommand::Aae(AaeCommand::Status) => Some("aae-status".to_string()),
        AdminCommand::Aae(AaeCommand::Round) => Some("aae-round".to_string()),
        AdminCommand::Aae(AaeCommand::Verify) => Some("aae-verify".to_string()),
        AdminCommand::Aae(AaeCommand::Rebuild { partition: None }) => {
            Some("aae-rebuild".to_string())
        }
        AdminCommand::Aae(AaeCommand::Rebuild { partition: Some(p) }) => {
            Some(format!("aae-rebuild {p}"))
        }
        AdminCommand::Cluster(c) => Some(match c {
            ClusterCommand::Join { addr } => format!("join {addr}"),
            ClusterCommand::Leave { node: Some(n) } => format!("leave {n}"),
            ClusterCommand::Leave { node: None } => "leave".to_string(),
            ClusterCommand::Replace { old, new } => format!("replace {old} {new}"),
            ClusterCommand::ForceReplace { old, new } => format!("force-replace {old} {new}"),
            ClusterCommand::ForceRemove { node } => format!("force-remove {node}"),
            ClusterCommand::Plan => "plan".to_string(),
            ClusterCommand::Commit => "commit".to_string(),
            ClusterCommand::Clear => "clear".to_string(),
        }),
    })
}

/// Runs `basalt admin`; exit 1 when the node refuses the request.
pub fn run(args: AdminArgs) -> anyhow::Result<crate::Outcome> {
    let target = AdminNode::new(
        &args.node,
        args.cert.as_deref(),
        args.key.as_deref(),
        args.cacert.as_deref(),
    )?;
    let node = &target;
    let json = args.as_json
        || matches!(&args.command, AdminCommand::Security { args } if args.iter().any(|a| a == "--json"));
    if let Some(l) = line_of(&args.command)? {
        let text = match line(node, &l, json)? {
            Ok(text) => text,
            Err(msg) => {
                eprintln!("{msg}");
                return Ok(crate::Outcome::Code(1));
            }
        };
        if json {
            println!("{text}");
        } else {
            print!("{text}");
        }
        // ringready answers FALSE as data; Riak's exits non-zero then.
        let not_ready = matches!(args.command, AdminCommand::Ringready)
            && (text.starts_with("FALSE") || text.contains("\"ready\":false"));
        return Ok(if not_ready {
            crate::Outcome::Code(1)
        } else {
            crate::Outcome::Done
        });
    }
    match args.command {
        AdminCommand::BucketType(cmd) => crate::admin_btypes::run(node, cmd, json),
        AdminCommand::Services => crate::wait::services(node, json),
        AdminCommand::WaitForService {
            service,
            node_name,
            timeout,
        } => crate::wait::wait_for_service(
            node,
            &service,
            node_name.as_deref(),
            timeout.map(std::time::Duration::from_secs),
            json,
        ),
        AdminCommand::Aae(AaeCommand::Fold(cmd)) => crate::aae_fold::run(node, &cmd, json),
        AdminCommand::Diag(d) => crate::diag::run(node, &d, json),
        AdminCommand::Backup(b) => crate::admin_backup::backup(node, &b, json),
        AdminCommand::Restore(r) => crate::admin_backup::restore(node, &r, json),
        _ => Ok(crate::Outcome::Done),
    }
}
