//! What `mc-guest`'s commands do, one job a file: `cli` (the command line),
//! `connect` (the adapter and the API), `info`, `csm` (`mc-guest csm`), and
//! `error`. `selftest`, `bench` and the programs themselves are in the
//! library (`mc_guest`).

pub(crate) mod cli;
pub(crate) mod connect;
pub(crate) mod csm;
pub(crate) mod error;
pub(crate) mod info;
