//! A PVM message on a UMP channel: a 16-byte header (kind, source tid,
//! tag, encoding) and the packed bytes. One UMP message per PVM message.

/// Kinds of message: the program's own, and those of the group functions
/// (never matched by the program's pvm_recv).
pub const USER: u32 = 0x5056_0001;
pub const BARRIER: u32 = 0x5056_0002;
pub const RELEASE: u32 = 0x5056_0003;
pub const REDUCE: u32 = 0x5056_0004;
pub const GATHER: u32 = 0x5056_0005;
pub const SCATTER: u32 = 0x5056_0006;

pub const HEADER: usize = 16;

/// A message as received, or sent to oneself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub kind: u32,
    pub src: i32,
    pub tag: i32,
    pub encoding: i32,
    pub data: Vec<u8>,
}

/// The header followed by `body`.
pub fn frame(kind: u32, src: i32, tag: i32, encoding: i32, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + body.len());
    v.extend_from_slice(&kind.to_le_bytes());
    v.extend_from_slice(&src.to_le_bytes());
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&encoding.to_le_bytes());
    v.extend_from_slice(body);
    v
}

/// Read a frame back; None if it is not one of ours.
pub fn parse(mut v: Vec<u8>) -> Option<Msg> {
    if v.len() < HEADER {
        return None;
    }
    let word = |i: usize| [v[i], v[i + 1], v[i + 2], v[i + 3]];
    let kind = u32::from_le_bytes(word(0));
    if !(USER..=SCATTER).contains(&kind) {
        return None;
    }
    let src = i32::from_le_bytes(word(4));
    let tag = i32::from_le_bytes(word(8));
    let encoding = i32::from_le_bytes(word(12));
    v.drain(..HEADER);
    Some(Msg {
        kind,
        src,
        tag,
        encoding,
        data: v,
    })
}

/// A group function's body starts with its group's name.
pub fn with_group(group: &str, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + group.len() + body.len());
    let len = u32::try_from(group.len()).expect("a group name (a C string) shorter than 4 GiB");
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(group.as_bytes());
    v.extend_from_slice(body);
    v
}

/// The group a group function's body names, and the rest.
pub fn group_of(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4 + n)?;
    Some((name, &data[4 + n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let f = frame(USER, 0x40001, -7, 1, b"abc");
        assert_eq!(f.len(), HEADER + 3);
        let m = parse(f).unwrap();
        assert_eq!((m.kind, m.src, m.tag, m.encoding), (USER, 0x40001, -7, 1));
        assert_eq!(m.data, b"abc");
        assert!(parse(vec![0; 20]).is_none());
        assert!(parse(vec![1; 3]).is_none());
    }

    #[test]
    fn group_names_lead_the_body() {
        let b = with_group("matrix", &[1, 2]);
        assert_eq!(group_of(&b), Some((&b"matrix"[..], &[1u8, 2][..])));
        assert_eq!(group_of(&[9, 0, 0, 0, b'a']), None);
    }
}
