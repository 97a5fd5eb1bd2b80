//! What a node of the naive protocol starts with: the DSM core's
//! configuration, nothing of its own.

/// A node's configuration; every node passes the same.
pub type NaiveConfig = dsm_core::DsmConfig;
