//! UMP channels between processes of one host (each a node with its own
//! adapter, as PVM's tasks are: `Config::host_shm`) go over shared memory
//! through a file both map; channels to other hosts keep Memory Channel.
//! Here the three nodes are threads of the test, each with its own
//! adapter and its own mapping of the file, nodes 0 and 1 "on one host":
//! the channel's set-up through the directory, messages of every size
//! through rings smaller than they are, and the file removed once both
//! ends hold it, or when the opener closes before the peer completed.

use std::path::Path;
use std::time::Duration;

use firmware_model::DeliveryMode;
use integration::delivery::for_each_delivery;
use integration::ump_rig::{message, small_rings};
use integration::VirtualCluster;
use mc_api::{Barrier, MemoryChannel};
use ump::{ChannelId, Config, HostShm, Node, Transport, Ump};

const T: Duration = Duration::from_secs(60);

const SIZES: &[usize] = &[0, 1, 8, 100, 487, 4096, 10_000, 65_536, 300_001];

fn read_msg(u: &Ump, ch: ChannelId, cap: usize) -> Vec<u8> {
    let mut buf = vec![0u8; cap];
    let n = u.read(ch, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Nodes 0 and 1 share `dir`; node 2 is another host.
fn config(dir: &Path, me: u8) -> Config {
    Config {
        host_shm: (me < 2).then(|| HostShm {
            dir: dir.to_path_buf(),
            nodes: 0b011,
        }),
        ..small_rings()
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Node 0 talks to node 1 (same host: shared memory) and node 2 (Memory
/// Channel); every size both ways, each byte checked; no file is left.
#[test]
fn processes_of_one_host_share_memory_and_others_keep_memory_channel() {
    for_each_delivery(&[41], |mode| {
        let dir = tempfile::tempdir().unwrap();
        let vc = VirtualCluster::with_delivery(3, mode);
        let path = dir.path().to_path_buf();
        vc.on_every_node(move |mc: MemoryChannel| {
            let me = mc.node_id().0;
            let node = Node::open(&mc, config(&path, me)).unwrap();
            let u = Ump::init(&node);
            let ep = |n: u8| 300 + u64::from(n);
            let peers: Vec<u8> = if me == 0 { vec![1, 2] } else { vec![0] };
            let chans: Vec<(u8, ChannelId)> = peers
                .iter()
                .map(|&p| (p, u.open(ep(me), ep(p), Transport::Auto).unwrap()))
                .collect();
            for &(p, ch) in &chans {
                let want = if p < 2 && me < 2 {
                    Transport::SharedMemory
                } else {
                    Transport::MemoryChannel
                };
                for (i, &len) in SIZES.iter().enumerate() {
                    let tag = |from: u8, to: u8| u64::from(from) * 1000 + u64::from(to) * 100;
                    let i = i as u64;
                    if me == 0 {
                        u.write(ch, &message(tag(me, p) + i, len)).unwrap();
                        let back = read_msg(&u, ch, len);
                        assert_eq!(back, message(tag(p, me) + i, len), "{p}: size {len}");
                    } else {
                        let got = read_msg(&u, ch, 400_000);
                        assert_eq!(got, message(tag(p, me) + i, len), "{p}: size {len}");
                        u.write(ch, &message(tag(me, p) + i, len)).unwrap();
                    }
                }
                let info = u.info();
                let c = info.channels.iter().find(|c| c.id == ch).unwrap();
                assert_eq!(c.transport, Some(want), "node {me} to node {p}");
            }
            assert!(
                files_in(&path).is_empty(),
                "both ends mapped the file: it is unlinked"
            );
            Barrier::new(&mc, 0x5348_0001).unwrap().wait(T).unwrap();
            u.exit().unwrap();
        });
        assert!(files_in(dir.path()).is_empty());
    });
}

/// Node 1 opens first, node 0 completes (and so creates the file), node 1
/// closes without ever looking: node 1's close removes the file.
#[test]
fn an_opener_that_closes_before_it_mapped_the_file_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let vc = VirtualCluster::with_delivery(2, DeliveryMode::Eager);
    let path = dir.path().to_path_buf();
    vc.on_every_node(move |mc: MemoryChannel| {
        let me = mc.node_id().0;
        let node = Node::open(&mc, config(&path, me)).unwrap();
        let u = Ump::init(&node);
        let mut b = Barrier::new(&mc, 0x5348_0002).unwrap();
        if me == 1 {
            let ch = u.open(401, 400, Transport::Auto).unwrap();
            b.wait(T).unwrap();
            // Node 0 completed the channel; node 1 has not looked since.
            b.wait(T).unwrap();
            assert_eq!(files_in(&path).len(), 1, "node 0 made the file");
            u.close(ch).unwrap();
            assert!(files_in(&path).is_empty(), "the opener removed it");
        } else {
            b.wait(T).unwrap();
            let ch = u.open(400, 401, Transport::Auto).unwrap();
            assert_eq!(
                u.info().channels[0].transport,
                Some(Transport::SharedMemory)
            );
            b.wait(T).unwrap();
            let _ = u.close(ch);
        }
        b.wait(T).unwrap();
        u.exit().unwrap();
    });
}
