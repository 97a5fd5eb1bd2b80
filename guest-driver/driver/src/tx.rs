//! Transmit records: what the readable part of a transmit chain holds
//! (docs/device.md section 14): for each store an `abi::TxRecordHeader`, its
//! data, and zero padding to a multiple of 8.
//!
//! The driver encodes what it is given; the adapter is the one that judges it
//! (an empty store, a record over 64 KiB or a page not enabled for transmit is
//! refused by the device with a status, as the interface defines).

use firmware_model::abi::{TxRecordHeader, TX_RECORD_HEADER_SIZE};

use crate::dma::DmaRegion;
use crate::error::{Error, Result};

/// One store: a global address and the bytes to write there.
pub type Store<'a> = (u64, &'a [u8]);

fn data_len(data: &[u8]) -> Result<u32> {
    u32::try_from(data.len()).map_err(|_| Error::StoreTooLarge { len: data.len() })
}

/// Bytes the records of `stores` occupy, headers and padding included.
pub fn records_size(stores: &[Store<'_>]) -> Result<usize> {
    let mut total = 0u64;
    for (_, data) in stores {
        total += TxRecordHeader::record_size(data_len(data)?);
    }
    usize::try_from(total).map_err(|_| Error::RecordsTooLarge {
        size: total,
        capacity: usize::MAX,
    })
}

/// Encode `stores` as records at the start of `out`; returns the bytes used.
pub fn encode_records(stores: &[Store<'_>], out: &DmaRegion) -> Result<usize> {
    let total = records_size(stores)?;
    if total > out.len() {
        return Err(Error::RecordsTooLarge {
            size: total as u64,
            capacity: out.len(),
        });
    }
    let mut off = 0usize;
    for &(addr, data) in stores {
        let len = data_len(data)?;
        let hdr = TxRecordHeader {
            addr,
            len,
            flags: 0,
        };
        out.write(off, &hdr.to_bytes())?;
        out.write(off + TX_RECORD_HEADER_SIZE, data)?;
        let size = TxRecordHeader::record_size(len) as usize;
        let pad = size - TX_RECORD_HEADER_SIZE - data.len();
        out.fill(off + TX_RECORD_HEADER_SIZE + data.len(), pad, 0)?;
        off += size;
    }
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::MemfdMemory;
    use std::sync::Arc;

    /// Parse records back, as the device does.
    fn decode(b: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut off = 0;
        while off < b.len() {
            let h = TxRecordHeader::from_bytes(&b[off..]).unwrap();
            assert_eq!(h.flags, 0);
            let d = off + TX_RECORD_HEADER_SIZE;
            out.push((h.addr, b[d..d + h.len as usize].to_vec()));
            let size = TxRecordHeader::record_size(h.len) as usize;
            assert!(
                b[d + h.len as usize..off + size].iter().all(|&x| x == 0),
                "padding is zero"
            );
            off += size;
        }
        assert_eq!(off, b.len());
        out
    }

    #[test]
    fn records_round_trip_with_padding() {
        let r = DmaRegion::new(Arc::new(MemfdMemory::new(1 << 20, 0x1000_0000).unwrap()));
        r.fill(0, r.len(), 0xaa).unwrap();
        let a = [1u8; 1];
        let b: Vec<u8> = (0..=255).collect();
        let c = [7u8; 8];
        let d = [9u8; 13];
        let stores: Vec<Store<'_>> =
            vec![(0x8000, &a), (0x9000, &b), (0x10, &c), (0x20, &d), (5, &[])];
        let n = encode_records(&stores, &r).unwrap();
        assert_eq!(n, records_size(&stores).unwrap());
        assert_eq!(n, (16 + 8) + (16 + 256) + (16 + 8) + (16 + 16) + 16);
        assert_eq!(n % 8, 0);
        let back = decode(&r.read_vec(0, n).unwrap());
        let want: Vec<_> = stores.iter().map(|(a, d)| (*a, d.to_vec())).collect();
        assert_eq!(back, want);
    }

    #[test]
    fn records_that_do_not_fit_are_refused() {
        let r = DmaRegion::new(Arc::new(MemfdMemory::new(4096, 0).unwrap()));
        let small = r.sub(0, 39).unwrap();
        let data = [0u8; 17];
        assert!(matches!(
            encode_records(&[(0, &data)], &small),
            Err(Error::RecordsTooLarge {
                size: 40,
                capacity: 39
            })
        ));
        assert_eq!(
            encode_records(&[(0, &data[..16])], &small.sub(0, 32).unwrap()).unwrap(),
            32
        );
        assert_eq!(records_size(&[]).unwrap(), 0);
    }
}
