//! `basalt certs ca|node|client`: certificates for a test or small cluster
//! (a self-signed CA, node certificates, client certificates whose CN is a
//! user), written as PEM files; the certificates themselves are made by
//! `basalt_server::security::certs` (rcgen).
//!
//! Files: `ca` writes `DIR/ca.pem` and `DIR/ca-key.pem`; `node` writes
//! `OUT/NAME.pem` and `OUT/NAME-key.pem`; `client` writes `OUT/USER.pem`
//! and `OUT/USER-key.pem` (`OUT` defaults to the CA's directory). Existing
//! files are never overwritten (rotate by writing elsewhere); private keys
//! are created mode 0600 on Unix.

use anyhow::Context;
use basalt_server::security::certs::{self, Issued, Validity};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `basalt certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    #[command(subcommand)]
    command: CertsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CertsCommand {
    /// A new self-signed CA: DIR/ca.pem and DIR/ca-key.pem.
    Ca {
        /// Directory to write to (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// The CA's common name.
        #[arg(long, default_value = "Basalt test CA")]
        name: String,
        /// Validity in days.
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// A node certificate (server and client use; SANs 127.0.0.1,
    /// localhost, NAME and each --san): OUT/NAME.pem, OUT/NAME-key.pem.
    Node {
        /// Directory of the CA (ca.pem, ca-key.pem).
        #[arg(long)]
        ca: PathBuf,
        /// The node's name: its common name and a SAN (DNS name or IP).
        #[arg(long)]
        name: String,
        /// More SANs (DNS names or IP addresses).
        #[arg(long)]
        san: Vec<String>,
        /// Directory to write to (default: the CA's).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Validity in days.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
    /// A client certificate with CN = USER (`certificate` sources):
    /// OUT/USER.pem, OUT/USER-key.pem.
    Client {
        /// Directory of the CA (ca.pem, ca-key.pem).
        #[arg(long)]
        ca: PathBuf,
        /// The user (the certificate's common name).
        #[arg(long)]
        user: String,
        /// Directory to write to (default: the CA's).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Validity in days.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

/// Runs `basalt certs ...`.
pub fn run(args: CertsArgs) -> anyhow::Result<crate::Outcome> {
    match args.command {
        CertsCommand::Ca { out, name, days } => {
            let ca = certs::new_ca(&name, Validity::days(days))?;
            write_pair(&out, "ca", &ca)?;
        }
        CertsCommand::Node {
            ca,
            name,
            san,
            out,
            days,
        } => {
            let issued = certs::node_cert(&read_ca(&ca)?, &name, &san, Validity::days(days))?;
            write_pair(out.as_deref().unwrap_or(&ca), &file_stem(&name)?, &issued)?;
        }
        CertsCommand::Client {
            ca,
            user,
            out,
            days,
        } => {
            let issued = certs::client_cert(&read_ca(&ca)?, &user, Validity::days(days))?;
            write_pair(out.as_deref().unwrap_or(&ca), &file_stem(&user)?, &issued)?;
        }
    }
    Ok(crate::Outcome::Done)
}

/// A name usable as a file name.
fn file_stem(name: &str) -> anyhow::Result<String> {
    if name.is_empty()
        || name == "ca"
        || name.starts_with('.')
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b))
    {
        anyhow::bail!(
            "{name:?} cannot name the files: use letters, digits, '-', '_', '.', '@' (not 'ca', not starting with '.')"
        );
    }
    Ok(name.to_string())
}

fn read_ca(dir: &Path) -> anyhow::Result<Issued> {
    let read = |f: &str| {
        let p = dir.join(f);
        std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    };
    Ok(Issued {
        cert_pem: read("ca.pem")?,
        key_pem: read("ca-key.pem")?,
    })
}

fn write_pair(dir: &Path, stem: &str, issued: &Issued) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}-key.pem"));
    for p in [&cert, &key] {
        if p.exists() {
            anyhow::bail!("{} exists; not overwritten", p.display());
        }
    }
    write_new(&key, &issued.key_pem, true)?;
    write_new(&cert, &issued.cert_pem, false)?;
    println!("wrote {} and {}", cert.display(), key.display());
    Ok(())
}

fn write_new(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = opts
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}
