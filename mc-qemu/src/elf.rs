//! Whether a guest program can run from the initramfs: a 64-bit x86 ELF
//! without a program interpreter (static or static-pie).

use crate::recipe::STATIC_BUILD_COMMAND;

/// Why a guest program cannot run from the initramfs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfCheckError {
    #[error("not an ELF file")]
    NotElf,
    #[error("not a 64-bit little-endian ELF")]
    NotElf64Le,
    #[error("ELF machine {0}, not x86-64 (62)")]
    NotX86_64(u16),
    #[error("bad ELF program header size {0}")]
    ProgramHeaderSize(usize),
    #[error("truncated ELF program headers")]
    Truncated,
    #[error(
        "dynamically linked (has a PT_INTERP program interpreter); \
         build it static, in a checkout: `{STATIC_BUILD_COMMAND}`"
    )]
    Dynamic,
}

/// Check that `bytes` is a 64-bit x86 ELF executable without a program
/// interpreter (static or static-pie): nothing else runs in the initramfs.
pub fn check_static_elf(bytes: &[u8]) -> Result<(), ElfCheckError> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err(ElfCheckError::NotElf);
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err(ElfCheckError::NotElf64Le);
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let e_machine = u16_at(18);
    if e_machine != 62 {
        return Err(ElfCheckError::NotX86_64(e_machine));
    }
    let mut phoff = [0u8; 8];
    phoff.copy_from_slice(&bytes[32..40]);
    let e_phoff = firmware_model::to_usize(u64::from_le_bytes(phoff));
    let e_phentsize = u16_at(54) as usize;
    let e_phnum = u16_at(56) as usize;
    if e_phentsize < 56 {
        return Err(ElfCheckError::ProgramHeaderSize(e_phentsize));
    }
    for i in 0..e_phnum {
        let off = e_phoff
            .checked_add(i * e_phentsize)
            .filter(|o| o + 4 <= bytes.len())
            .ok_or(ElfCheckError::Truncated)?;
        let p_type =
            u32::from_le_bytes([bytes[off], bytes[off + 1], bytes[off + 2], bytes[off + 3]]);
        if p_type == 3 {
            return Err(ElfCheckError::Dynamic);
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn elf_with_phdrs(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 * types.len()];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[18..20].copy_from_slice(&62u16.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&u16::try_from(types.len()).unwrap().to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            b[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    #[test]
    fn static_elf_check() {
        assert!(check_static_elf(&elf_with_phdrs(&[6, 1, 1, 2])).is_ok());
        let e = check_static_elf(&elf_with_phdrs(&[6, 3, 1])).unwrap_err();
        assert_eq!(e, ElfCheckError::Dynamic);
        assert!(e.to_string().contains("dynamically linked"), "{e}");
        assert!(e.to_string().contains("+crt-static"), "{e}");
        assert_eq!(
            check_static_elf(b"#!/bin/sh\necho hi\n"),
            Err(ElfCheckError::NotElf)
        );
        let mut truncated = elf_with_phdrs(&[1, 1]);
        truncated.truncate(100);
        assert_eq!(check_static_elf(&truncated), Err(ElfCheckError::Truncated));
        let mut arm = elf_with_phdrs(&[1]);
        arm[18] = 183;
        assert_eq!(check_static_elf(&arm), Err(ElfCheckError::NotX86_64(183)));
        assert!(ElfCheckError::NotX86_64(183).to_string().contains("x86-64"));
    }

    #[test]
    fn real_elf_files_do_not_panic_the_check() {
        // Whatever the toolchain made of the test binary, the check answers
        // without panicking.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let _ = check_static_elf(&me);
    }
}
