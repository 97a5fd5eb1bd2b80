//! A cluster of QEMU guests on one backend: `mc-host cluster up|run|status|down`.
//!
//! Everything lives in a state directory:
//!
//! | path | what |
//! |---|---|
//! | `backend.pid`, `backend.log` | the backend (`mc-host serve`) |
//! | `sock/node<i>.sock`, `sock/control.sock` | its vhost-user and control sockets |
//! | `node<i>.pid` | QEMU of node i |
//! | `node<i>.serial.log` (+ `.qemu-stderr`) | its console and QEMU's stderr |
//! | `node<i>.agent.sock` | the guest's command channel (its ttyS1) |
//! | `cluster.toml` | what `up` started |
//!
//! Pid files are written as soon as each process starts, so `down` stops
//! everything even after `mc-host` itself crashed half-way through `up`.
//!
//! Commands reach a running guest through its command agent (init.sh with
//! `mc.agent=1`): QEMU serves the guest's second serial port on
//! `node<i>.agent.sock`; the host writes `RUN <id> <base64 command>` and reads
//! the output up to `MC-CMD-END <id> <status>`.
//!
//! Modules: [`state_dir`] (the files), [`up`] (starting a cluster),
//! [`agent`] (running commands on the guests), [`processes`] (status and
//! `down`).

mod agent;
mod processes;
mod state_dir;
mod up;

pub use agent::{run, AgentError, NodeResult, AGENT_READY_TAG, CMD_END_TAG};
pub use processes::{down, process_alive, status, ProcessStatus};
pub use state_dir::{QemuClusterRecord, StateDir};
pub use up::{up, UpOptions};
