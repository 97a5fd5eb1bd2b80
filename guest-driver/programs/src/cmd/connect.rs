//! Opening this node's adapter (`mc_driver::open_adapter`: the socket from
//! `--socket` or `MC_SOCKET`, else the PCI function) and the Memory Channel
//! API on it (`mc_api::connect`), as the command line chooses.

use mc_api::{connect, MemoryChannel, OpenOptions};
use mc_driver::{open_adapter, Adapter, Transport, TransportChoice};

use super::cli::GuestCli;
use super::error::GuestError;

/// The transport the command line chooses.
fn transport(cli: &GuestCli) -> TransportChoice {
    TransportChoice {
        socket: TransportChoice::socket_or_env(cli.socket.clone()),
        ram_bytes: cli.ram_mib.unwrap_or(64) << 20,
        dma_bytes: cli.dma_mib << 20,
    }
}

/// The adapter the command line chooses.
pub(crate) fn adapter(cli: &GuestCli) -> Result<Adapter<Box<dyn Transport>>, GuestError> {
    Ok(open_adapter(&transport(cli))?)
}

/// The Memory Channel API with its default options.
pub(crate) fn open(cli: &GuestCli) -> Result<MemoryChannel, GuestError> {
    open_with(cli, &OpenOptions::default())
}

/// The Memory Channel API with `opts` (and `--reliable`).
pub(crate) fn open_with(cli: &GuestCli, opts: &OpenOptions) -> Result<MemoryChannel, GuestError> {
    let opts = OpenOptions {
        reliable: opts.reliable || cli.reliable,
        ..opts.clone()
    };
    Ok(connect(&transport(cli), &opts)?)
}
