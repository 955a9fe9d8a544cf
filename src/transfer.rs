//! `jobstore import` / `jobstore export`: Flink's `FileSystemJobResultStore` and
//! `FileSystemApplicationResultStore` directories in and out.

use std::path::PathBuf;

use clap::Args;

use crate::cli::DatabaseArgs;

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The cluster id (Flink's high-availability.cluster-id) the entries belong to.
    #[arg(long)]
    pub cluster: String,
    /// A directory of Flink result-store files.
    pub dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The cluster whose entries to write.
    #[arg(long)]
    pub cluster: String,
    /// The directory to write Flink result-store files into.
    pub dir: PathBuf,
}

pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    anyhow::bail!("import is not implemented yet ({})", args.dir.display())
}

pub async fn export(args: ExportArgs) -> anyhow::Result<()> {
    anyhow::bail!("export is not implemented yet ({})", args.dir.display())
}
