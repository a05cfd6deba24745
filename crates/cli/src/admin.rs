//! `basalt admin --node ADDR bucket-type ...`: manages the bucket types of a
//! running node over its cluster port (`cluster_listen`, default
//! 127.0.0.1:8099; the client PB port does not serve admin codes), like
//! `riak admin bucket-type`;
//! `basalt admin --node ADDR cluster ...|member-status|ring-status` sends a
//! cluster command line (admin code 247) and prints the node's answer;
//! `aae fold` is in [`crate::aae_fold`]; `services` and `wait-for-service`
//! in [`crate::wait`].
//! create, activate, list and status use Basalt's private admin codes
//! (240–246); update is Riak's `RpbSetBucketTypeReq` (32). Codes are
//! `riak_pb::code` and `riak_pb::code::basalt`; each command is one call of
//! `riak_pb`'s blocking client through [`crate::admin_client`], whose reply
//! is bounded by its `MAX_REPLY`. An address where something else answers —
//! a PB port (Riak's unknown-code error), an HTTP port, anything that closes
//! or speaks another framing — is an error naming what answered.

use crate::admin_client::{call, AdminNode};
use anyhow::Context;
use basalt_server::api::pb::btypes::{BasaltBucketTypeListResp, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use prost::Message;
use riak_pb::code::{self, basalt as bt};

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
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AdminCommand {
    /// Bucket types: create, activate, list, status, update.
    #[command(subcommand)]
    BucketType(BucketTypeCommand),
    /// Cluster membership, staged as `riak admin cluster`: join, leave,
    /// plan, commit, clear.
    #[command(subcommand)]
    Cluster(ClusterCommand),
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
    /// Pending ownership transfers and the handoffs running on the node.
    RingStatus,
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
    /// Show the staged changes and the partition transfers they start.
    Plan,
    /// Apply the staged changes.
    Commit,
    /// Drop the staged changes.
    Clear,
}

#[derive(Debug, clap::Subcommand)]
enum BucketTypeCommand {
    /// Create a type: `create NAME '{"props":{"n_val":3,"allow_mult":true}}'`.
    Create {
        /// Type name.
        name: String,
        /// `{"props":{...}}` (default `{"props":{}}`).
        json: Option<String>,
    },
    /// Activate a created type.
    Activate {
        /// Type name.
        name: String,
    },
    /// List the types and whether they are active.
    List,
    /// Status and props of one type.
    Status {
        /// Type name.
        name: String,
    },
    /// Update the props of a type: `update NAME '{"props":{...}}'`.
    Update {
        /// Type name.
        name: String,
        /// `{"props":{...}}`.
        json: String,
    },
}

fn props(json: Option<&str>) -> anyhow::Result<riak_pb::RpbBucketProps> {
    btypes::props_from_json(json.unwrap_or(r#"{"props":{}}"#))
        .map_err(|e| anyhow::anyhow!("bad bucket type props: {e}"))
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
    let line = match &args.command {
        AdminCommand::BucketType(_) => None,
        AdminCommand::Services => return crate::wait::services(node),
        AdminCommand::WaitForService {
            service,
            node_name,
            timeout,
        } => {
            return crate::wait::wait_for_service(
                node,
                service,
                node_name.as_deref(),
                timeout.map(std::time::Duration::from_secs),
            )
        }
        AdminCommand::MemberStatus => Some("member-status".to_string()),
        AdminCommand::RingStatus => Some("ring-status".to_string()),
        AdminCommand::Security { args } => {
            if args
                .iter()
                .any(|a| a.is_empty() || a.contains(char::is_whitespace))
            {
                anyhow::bail!("security arguments cannot be empty or contain spaces");
            }
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
        AdminCommand::Aae(AaeCommand::Fold(cmd)) => return crate::aae_fold::run(node, cmd),
        AdminCommand::Cluster(c) => Some(match c {
            ClusterCommand::Join { addr } => format!("join {addr}"),
            ClusterCommand::Leave { node: Some(n) } => format!("leave {n}"),
            ClusterCommand::Leave { node: None } => "leave".to_string(),
            ClusterCommand::Plan => "plan".to_string(),
            ClusterCommand::Commit => "commit".to_string(),
            ClusterCommand::Clear => "clear".to_string(),
        }),
    };
    if let Some(line) = line {
        return match call(node, bt::ADMIN_CLUSTER_REQ, line.as_bytes())? {
            Ok((_, body)) => {
                print!("{}", String::from_utf8_lossy(&body));
                Ok(crate::Outcome::Done)
            }
            Err(msg) => {
                eprintln!("{msg}");
                Ok(crate::Outcome::Code(1))
            }
        };
    }
    let AdminCommand::BucketType(cmd) = args.command else {
        return Ok(crate::Outcome::Done);
    };
    let req = |name: &str, props: Option<riak_pb::RpbBucketProps>| {
        BasaltBucketTypeReq {
            r#type: name.as_bytes().to_vec(),
            props,
        }
        .encode_to_vec()
    };
    let (reply, ok_text) = match &cmd {
        BucketTypeCommand::Create { name, json } => {
            let p = props(json.as_deref())?;
            (
                call(node, bt::ADMIN_TYPE_CREATE_REQ, &req(name, Some(p)))?,
                format!("{name} has been created and may be activated"),
            )
        }
        BucketTypeCommand::Activate { name } => (
            call(node, bt::ADMIN_TYPE_ACTIVATE_REQ, &req(name, None))?,
            format!("{name} has been activated"),
        ),
        BucketTypeCommand::Update { name, json } => {
            let p = props(Some(json))?;
            let body = riak_pb::RpbSetBucketTypeReq {
                r#type: name.as_bytes().to_vec(),
                props: p,
            }
            .encode_to_vec();
            (
                call(node, code::SET_BUCKET_TYPE_REQ, &body)?,
                format!("{name} updated"),
            )
        }
        BucketTypeCommand::List => (call(node, bt::ADMIN_TYPE_LIST_REQ, &[])?, String::new()),
        BucketTypeCommand::Status { name } => (
            call(node, bt::ADMIN_TYPE_STATUS_REQ, &req(name, None))?,
            String::new(),
        ),
    };
    let body = match reply {
        Ok((_, body)) => body,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(crate::Outcome::Code(1));
        }
    };
    match cmd {
        BucketTypeCommand::List | BucketTypeCommand::Status { .. } => {
            let list = BasaltBucketTypeListResp::decode(body.as_slice())
                .context("decoding the bucket type list")?;
            let status = matches!(cmd, BucketTypeCommand::Status { .. });
            for t in list.types {
                let name = String::from_utf8_lossy(&t.r#type);
                if status {
                    if t.active {
                        println!("{name} is active\n");
                    } else {
                        println!("{name} has been created and may be activated\n");
                    }
                    for line in btypes::props_lines(&t.props) {
                        println!("{line}");
                    }
                } else {
                    let state = if t.active { "active" } else { "not active" };
                    println!("{name} ({state})");
                }
            }
        }
        _ => println!("{ok_text}"),
    }
    Ok(crate::Outcome::Done)
}
