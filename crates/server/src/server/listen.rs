//! The readiness rule: a node's ports are *reserved* (bound) before the
//! node opens, so a port already in use fails the start at once, but they
//! *listen* only once the node can serve (vnodes opened, ring loaded).
//! Until then a client's connection is refused, as by a node that is not
//! running, instead of being held in the kernel's accept queue while the
//! vnodes open (a client once waited 0.45–1.7 s for its first answer that
//! way, and a client with a short timeout took the node for broken).
//! A node already listening on a port makes the start fail before the
//! vnodes open; one still starting (bound, not listening) is seen only
//! when this node listens (`SO_REUSEADDR` lets both bind).
//! `basalt admin wait-for-service` polls the cluster port until it answers.
//!
//! Each listener's accept queue is [`LISTEN_BACKLOG`] connections.

use super::ServerError;
use crate::config::Config;
use crate::limits::LISTEN_BACKLOG;
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpSocket};

/// A bound socket that does not listen yet.
#[derive(Debug)]
pub(crate) struct Reserved {
    addr: String,
    socket: TcpSocket,
    local: SocketAddr,
}

impl Reserved {
    /// Binds the first address `addr` resolves to that can be bound (as
    /// `TcpListener::bind` does), with `SO_REUSEADDR` so a restarted node
    /// binds over its predecessor's connections in TIME_WAIT.
    pub(crate) async fn bind(addr: &str) -> Result<Reserved, ServerError> {
        let err = |source| ServerError::Listen {
            addr: addr.to_string(),
            source,
        };
        let mut last = None;
        for a in tokio::net::lookup_host(addr).await.map_err(err)? {
            match Self::bind_one(a) {
                Ok((socket, local)) => {
                    return Ok(Reserved {
                        addr: addr.to_string(),
                        socket,
                        local,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(err(last.unwrap_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the address resolves to nothing",
            )
        })))
    }

    fn bind_one(a: SocketAddr) -> std::io::Result<(TcpSocket, SocketAddr)> {
        let socket = match a {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        socket.bind(a)?;
        let local = socket.local_addr()?;
        Ok((socket, local))
    }

    /// Binds `addr` unless it is empty (a listener switched off).
    pub(crate) async fn bind_optional(addr: &str) -> Result<Option<Reserved>, ServerError> {
        match addr {
            "" => Ok(None),
            a => Ok(Some(Self::bind(a).await?)),
        }
    }

    /// The bound address (the real port when the config said 0).
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Starts listening: from now on connections are accepted. Needs a
    /// tokio runtime's context.
    pub(crate) fn listen(self) -> Result<TcpListener, ServerError> {
        self.socket
            .listen(LISTEN_BACKLOG)
            .map_err(|source| ServerError::Listen {
                addr: self.addr,
                source,
            })
    }
}

/// Every port of a node, reserved.
#[derive(Debug)]
pub(crate) struct Ports {
    pub(crate) pb: Reserved,
    pub(crate) http: Option<Reserved>,
    pub(crate) https: Option<Reserved>,
    pub(crate) cluster: Reserved,
}

/// Every port of a node, listening.
pub(crate) struct Listening {
    pub(crate) pb: TcpListener,
    pub(crate) http: super::HttpListeners,
    pub(crate) cluster: TcpListener,
}

impl Ports {
    /// Reserves `config`'s PB, HTTP (unless empty), HTTPS (unless empty)
    /// and cluster ports.
    pub(crate) async fn bind(config: &Config) -> Result<Ports, ServerError> {
        Ok(Ports {
            pb: Reserved::bind(&config.pb_listen).await?,
            http: Reserved::bind_optional(&config.http_listen).await?,
            https: Reserved::bind_optional(&config.https_listen).await?,
            cluster: Reserved::bind(&config.cluster_listen).await?,
        })
    }

    /// Listens on every port (once the node is open).
    pub(crate) fn listen(self) -> Result<Listening, ServerError> {
        Ok(Listening {
            pb: self.pb.listen()?,
            http: super::HttpListeners {
                http: self.http.map(Reserved::listen).transpose()?,
                https: self.https.map(Reserved::listen).transpose()?,
            },
            cluster: self.cluster.listen()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reserved_port_refuses_until_it_listens() {
        let r = Reserved::bind("127.0.0.1:0").await.unwrap();
        let a = r.local_addr();
        assert_ne!(a.port(), 0);
        // Bound, not listening: a client is refused, not queued.
        let e = tokio::net::TcpStream::connect(a).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        let l = r.listen().unwrap();
        // The port is taken: a second node fails at once. (Two sockets
        // with SO_REUSEADDR may both be bound while neither listens; the
        // second one's `listen` then fails.)
        let taken = Reserved::bind(&a.to_string()).await;
        assert!(
            matches!(taken, Err(ServerError::Listen { .. })),
            "{taken:?}"
        );
        let (c, s) = tokio::join!(tokio::net::TcpStream::connect(a), l.accept());
        c.unwrap();
        s.unwrap();
    }

    #[tokio::test]
    async fn an_empty_address_is_a_listener_switched_off() {
        assert!(Reserved::bind_optional("").await.unwrap().is_none());
        let e = Reserved::bind("no-such-host.invalid:1").await.unwrap_err();
        assert!(e.to_string().contains("no-such-host.invalid:1"), "{e}");
    }
}
