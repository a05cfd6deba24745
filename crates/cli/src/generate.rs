//! `basalt generate completions|man|config` (hidden): the files a package
//! ships that come from this binary, so they cannot drift from it — shell
//! completions (bash, zsh, fish) and man pages generated from the clap
//! definitions (`clap_complete`, `clap_mangen`), and the packaged config
//! file: the default config (`basalt start --print-default-config`, the one
//! source of every setting and its documentation) with `data_dir` set for
//! the package. `scripts/package-deb.sh` runs it.

use anyhow::{bail, Context};
use basalt_server::config::DEFAULT_CONFIG;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Arguments of `basalt generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Shell completions into DIR: `basalt.bash`, `_basalt` (zsh),
    /// `basalt.fish`.
    Completions {
        /// The directory (created if missing).
        dir: PathBuf,
    },
    /// Man pages into DIR: `basalt.1` and one page per subcommand
    /// (`basalt-start.1`, ...).
    Man {
        /// The directory (created if missing).
        dir: PathBuf,
    },
    /// The packaged config file: the default config with `data_dir` set.
    Config {
        /// The file to write.
        file: PathBuf,
        /// The data directory the file names.
        #[arg(long, default_value = "/var/lib/basalt")]
        data_dir: String,
    },
}

/// Runs `basalt generate`.
pub fn run(args: GenerateArgs) -> anyhow::Result<crate::Outcome> {
    match args.what {
        What::Completions { dir } => completions(&dir)?,
        What::Man { dir } => {
            create_dir(&dir)?;
            clap_mangen::generate_to(crate::Cli::command(), &dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
        }
        What::Config { file, data_dir } => {
            let text = packaged_config(&data_dir)?;
            std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        }
    }
    Ok(crate::Outcome::Done)
}

fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn completions(dir: &Path) -> anyhow::Result<()> {
    use clap_complete::Shell;
    create_dir(dir)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = crate::Cli::command();
        clap_complete::generate_to(shell, &mut cmd, "basalt", dir)
            .with_context(|| format!("writing {shell} completions into {}", dir.display()))?;
    }
    Ok(())
}

/// The line of the default config that the package changes.
const DATA_DIR_LINE: &str = "data_dir = \"./data\"";

/// The default config with `data_dir = DATA_DIR` and a header saying what
/// the file is.
pub fn packaged_config(data_dir: &str) -> anyhow::Result<String> {
    if DEFAULT_CONFIG.matches(DATA_DIR_LINE).count() != 1 {
        bail!("the default config no longer holds the line {DATA_DIR_LINE:?} once");
    }
    let line = format!("data_dir = {}", toml_string(data_dir));
    let header = "\
# /etc/basalt/basalt.toml: the config of the packaged node (basalt.service
# runs `basalt start --config /etc/basalt/basalt.toml`). Every setting is
# listed with its default and what it does: this is the output of
# `basalt start --print-default-config` with data_dir set for the package.
# Restart the node after a change: `systemctl restart basalt`.
#
";
    Ok(format!(
        "{header}{}",
        DEFAULT_CONFIG.replacen(DATA_DIR_LINE, &line, 1)
    ))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_server::config::Config;

    #[test]
    fn the_packaged_config_is_the_default_but_for_data_dir() {
        let text = packaged_config("/var/lib/basalt").unwrap_or_default();
        let c = Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/basalt"));
        assert_eq!(
            Config {
                data_dir: Config::default().data_dir,
                ..c
            },
            Config::default()
        );
        let odd = packaged_config("/srv/a \"b\"").unwrap_or_default();
        let c = Config::from_toml(&odd).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.data_dir, PathBuf::from("/srv/a \"b\""));
    }
}
