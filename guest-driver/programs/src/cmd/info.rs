//! `mc-guest info`: this adapter's register file and status.

use firmware_model::abi::{self, features};
use firmware_model::{AdapterErrorStatus, NodeSet};

use super::cli::GuestCli;
use super::connect::adapter;
use super::error::GuestError;

pub(crate) fn info(cli: &GuestCli) -> Result<(), GuestError> {
    let mut a = adapter(cli)?;
    let r = a.registers()?;
    let status = a.set_status_page().and_then(|v| v.read())?;
    let names = [
        (features::BROADCAST, "broadcast"),
        (features::POINT_TO_POINT, "point-to-point"),
        (features::LOOPBACK, "loopback"),
        (features::ACK_PAGE, "ack-pages"),
        (features::INTERRUPT, "interrupts"),
        (features::STATUS_PAGE, "status-page"),
    ];
    let feats: Vec<&str> = names
        .iter()
        .filter(|(b, _)| r.features & b != 0)
        .map(|(_, n)| *n)
        .collect();
    let link = firmware_model::abi::link_timing_name(r.link_timing);
    let e = AdapterErrorStatus::from_word(r.error_status);
    println!("Memory Channel adapter: node {} of {}", r.node_id, r.nodes);
    println!(
        "  members {} (epoch {})",
        NodeSet(r.members),
        r.membership_epoch
    );
    println!(
        "  page size {} B, address space {} MiB, packet payload {} B, link {link}",
        r.page_size,
        r.address_space >> 20,
        r.max_payload
    );
    println!("  features: {}", feats.join(" "));
    println!(
        "  link {}, {}; errors: {} network, {} refused; cluster error count {}",
        if r.link_state & abi::link::UP != 0 {
            "up"
        } else {
            "down"
        },
        if r.link_state & abi::link::ONLINE != 0 {
            "online"
        } else {
            "offline"
        },
        e.network_errors,
        e.protection_errors,
        status.cluster_error_count
    );
    Ok(())
}
