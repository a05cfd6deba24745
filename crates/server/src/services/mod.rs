//! Background services of a node: hinted and ownership [`handoff`],
//! tictac [`aae`] (anti-entropy: scheduling; one exchange in
//! [`aae_exchange`]; scheduled tree rebuilds in [`aae_rebuild`]),
//! [`repl`]ication to another cluster, and
//! [`gossip`] with cluster administration. Each runs on the node handle
//! (its router, bucket props and the KV API for repairs).

pub mod aae;
pub mod aae_exchange;
pub mod aae_rebuild;
pub mod gossip;
pub mod handoff;
pub mod repl;
