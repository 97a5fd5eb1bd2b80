//! The task's connection to the relay of `mc-host pvm` (the daemon's
//! part: spawn, tables, notices, groups). Requests are answered in order;
//! notices that come between answers are kept for the receive path, which
//! looks at [`Relay::has_notices`] (one load) between its polls.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use pvm_relay::{FromRelay, Notice, Reply, Request};

/// Why the relay could not be reached or answered.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(
        "{} is not set: this task was not started by `mc-host pvm`",
        pvm_relay::env::SOCKET
    )]
    NotStarted,
    #[error("{name} is not a number: {value:?}")]
    BadEnv { name: &'static str, value: String },
    #[error("cannot reach the relay of mc-host pvm at {path}")]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the relay of mc-host pvm went away")]
    Gone(#[source] std::io::Error),
    #[error("the relay of mc-host pvm closed its connection")]
    Closed,
}

/// The connection.
pub struct Relay {
    out: Mutex<UnixStream>,
    replies: Mutex<Receiver<Reply>>,
    notices: Arc<Mutex<Vec<Notice>>>,
    flag: Arc<AtomicBool>,
}

impl Relay {
    /// Connect to the socket the environment names.
    pub fn connect() -> Result<Relay, RelayError> {
        let path = std::env::var(pvm_relay::env::SOCKET).map_err(|_| RelayError::NotStarted)?;
        let s = UnixStream::connect(&path).map_err(|source| RelayError::Connect {
            path: path.clone(),
            source,
        })?;
        let reader = s.try_clone().map_err(RelayError::Gone)?;
        let (tx, rx) = mpsc::channel();
        let notices = Arc::new(Mutex::new(Vec::new()));
        let flag = Arc::new(AtomicBool::new(false));
        let (n2, f2) = (notices.clone(), flag.clone());
        std::thread::Builder::new()
            .name("pvm-relay".into())
            .spawn(move || {
                for line in BufReader::new(reader).lines() {
                    let Ok(line) = line else { return };
                    match serde_json::from_str::<FromRelay>(&line) {
                        Ok(FromRelay::Reply(r)) => {
                            if tx.send(r).is_err() {
                                return;
                            }
                        }
                        Ok(FromRelay::Notice(n)) => {
                            n2.lock().unwrap_or_else(|p| p.into_inner()).push(n);
                            f2.store(true, Ordering::Release);
                        }
                        Err(e) => {
                            eprintln!("libpvm-mc: the relay sent a line this library cannot read ({e}): {line}");
                            return;
                        }
                    }
                }
            })
            .map_err(RelayError::Gone)?;
        Ok(Relay {
            out: Mutex::new(s),
            replies: Mutex::new(rx),
            notices,
            flag,
        })
    }

    /// Send a request and wait for its answer.
    pub fn ask(&self, req: &Request) -> Result<Reply, RelayError> {
        let replies = self.replies.lock().unwrap_or_else(|p| p.into_inner());
        self.out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(pvm_relay::line(req).as_bytes())
            .map_err(RelayError::Gone)?;
        replies.recv().map_err(|_| RelayError::Closed)
    }

    /// Whether notices are waiting (cheap: one load).
    pub fn has_notices(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// The notices that came, oldest first.
    pub fn take_notices(&self) -> Vec<Notice> {
        let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        self.flag.store(false, Ordering::Release);
        std::mem::take(&mut *n)
    }
}

/// A number from the environment, if set.
pub fn env_int(name: &'static str) -> Result<Option<i32>, RelayError> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|_| RelayError::BadEnv { name, value: v }),
    }
}

/// A comma-separated list of numbers from the environment.
pub fn env_ints(name: &'static str) -> Result<Vec<i32>, RelayError> {
    match std::env::var(name) {
        Err(_) => Ok(Vec::new()),
        Ok(v) => v
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse().map_err(|_| RelayError::BadEnv {
                    name,
                    value: v.clone(),
                })
            })
            .collect(),
    }
}
