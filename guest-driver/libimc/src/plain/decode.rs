//! What to do with the instruction that wrote to a transmit page: decode it
//! (iced-x86) and find the bytes it writes there, then choose how to carry
//! it out.
//!
//! - `Emulate`: a plain `MOV`/`MOVNTI` of a general register or an
//!   immediate. Its value and size are known, so the handler performs it
//!   (into the region's backing memory and onto the network) and moves RIP
//!   past it: one signal per store.
//! - `Redirect`: any other store with a base register. The handler adds the
//!   distance from the transmit view to the region's backing memory to that
//!   register, sets the trap flag and lets the instruction run once there;
//!   the trap handler sends exactly the bytes it wrote and moves the
//!   register back. The view itself never becomes writable, so no other
//!   thread can slip a store past the trap.
//! - `Refuse`: a load or read-modify-write of a transmit address (the
//!   hardware faults too: transmit space is write-only), or a store this
//!   scheme cannot move (no base register, the base also used as data or
//!   index, a scatter, 32-bit addressing, an unknown size). The program
//!   is stopped with a message that names the instruction's address and
//!   `imc_write`.

use iced_x86::{
    CodeSize, Decoder, DecoderOptions, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};

use firmware_model::to_usize;

use super::context::{gpr_index, Context};

/// The largest store this library carries out (an AVX-512 register is 64
/// bytes; `FXSAVE` 512).
pub(crate) const MAX_STORE: usize = 512;

/// Why a write to a transmit page is not carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodeRefusal {
    Read,
    ReadModifyWrite,
    NoBaseRegister,
    BaseRegisterInUse,
    Scatter,
    CrossesRegionEnd,
    Undecodable,
    UnknownSize,
}

impl DecodeRefusal {
    pub(crate) fn message(self) -> &'static str {
        match self {
            DecodeRefusal::Read => "a load from a transmit address: Memory Channel transmit space is write-only (read through the region's receive mapping)",
            DecodeRefusal::ReadModifyWrite => "a read-modify-write of a transmit address: transmit space is write-only (compute the value, then store it)",
            DecodeRefusal::NoBaseRegister => "a store to a transmit address without a base register cannot be redirected; use imc_write()",
            DecodeRefusal::BaseRegisterInUse => "a store whose base register is also its data or index cannot be redirected; use imc_write()",
            DecodeRefusal::Scatter => "a scatter store to a transmit region is not supported; use imc_write()",
            DecodeRefusal::CrossesRegionEnd => "a store that crosses the end of its transmit region",
            DecodeRefusal::Undecodable => "an instruction libimc cannot decode wrote to a transmit address",
            DecodeRefusal::UnknownSize => "a store of unknown or too large a size to a transmit address; use imc_write()",
        }
    }
}

/// How to carry out one store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Write `data[..size]` at `addr` (a view address) and go on at `next_rip`.
    Emulate {
        addr: usize,
        size: usize,
        data: [u8; 8],
        next_rip: u64,
    },
    /// Move register `reg` (a `REG_*` index) to the backing memory and
    /// step; the store writes `size` bytes at view address `addr`.
    Redirect {
        reg: libc::c_int,
        addr: usize,
        size: usize,
    },
    Refuse(DecodeRefusal),
}

/// The transmit view that took the fault: `[start, start + len)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// Decode the instruction at RIP (`code` holds its bytes) and plan the
/// store it makes into `view`.
pub(crate) fn plan(
    factory: &mut InstructionInfoFactory,
    code: &[u8],
    ctx: &Context<'_>,
    view: View,
) -> Plan {
    let mut decoder = Decoder::with_ip(64, code, ctx.rip(), DecoderOptions::NONE);
    let instr = decoder.decode();
    if instr.is_invalid() {
        return Plan::Refuse(DecodeRefusal::Undecodable);
    }
    plan_decoded(factory, &instr, ctx, view)
}

fn segment_or_register(ctx: &Context<'_>, reg: Register) -> Option<u64> {
    match reg {
        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
        // RIP-relative operands carry their absolute target as displacement.
        Register::RIP | Register::EIP => Some(0),
        Register::FS | Register::GS => None,
        r => ctx.value_of(r),
    }
}

fn plan_decoded(
    factory: &mut InstructionInfoFactory,
    instr: &Instruction,
    ctx: &Context<'_>,
    view: View,
) -> Plan {
    let info = factory.info(instr);
    let in_view = |a: u64, n: usize| {
        let a = to_usize(a);
        let end = a + n.max(1);
        a < view.start + view.len && end > view.start
    };
    // The memory operand that touches the view.
    let mut target = None;
    for m in info.used_memory() {
        let Some(addr) = m.virtual_address(0, |r, _, _| segment_or_register(ctx, r)) else {
            continue;
        };
        let mut size = m.memory_size().size();
        if size == 0 && instr.is_string_instruction() {
            // A repeated string instruction: one element per step (the
            // trap comes after each iteration).
            size = instr.memory_size().size();
        }
        if !in_view(addr, size) {
            continue;
        }
        match m.access() {
            OpAccess::Write | OpAccess::CondWrite => {}
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                return Plan::Refuse(DecodeRefusal::ReadModifyWrite)
            }
            _ => return Plan::Refuse(DecodeRefusal::Read),
        }
        if target.is_some() {
            return Plan::Refuse(DecodeRefusal::Scatter);
        }
        target = Some((*m, to_usize(addr), size));
    }
    let Some((m, addr, size)) = target else {
        // The fault was a write to the view, but no operand says so
        // (an instruction iced reports no memory for).
        return Plan::Refuse(DecodeRefusal::Undecodable);
    };
    if instr.is_vsib() {
        return Plan::Refuse(DecodeRefusal::Scatter);
    }
    if size == 0 || size > MAX_STORE {
        return Plan::Refuse(DecodeRefusal::UnknownSize);
    }
    if addr < view.start || addr + size > view.start + view.len {
        return Plan::Refuse(DecodeRefusal::CrossesRegionEnd);
    }
    if let Some(p) = emulation(instr, ctx, addr, size) {
        return p;
    }
    // Redirect through the base register.
    if m.address_size() != CodeSize::Code64 {
        return Plan::Refuse(DecodeRefusal::NoBaseRegister);
    }
    let base = m.base().full_register();
    let Some(reg) = gpr_index(base).filter(|_| base != Register::RSP) else {
        return Plan::Refuse(DecodeRefusal::NoBaseRegister);
    };
    let in_use = m.index() != Register::None && m.index().full_register() == base
        || (0..instr.op_count()).any(|i| {
            instr.op_kind(i) == OpKind::Register && instr.op_register(i).full_register() == base
        })
        || info.used_memory().iter().any(|o| {
            *o != m && (o.base().full_register() == base || o.index().full_register() == base)
        })
        || info.used_registers().iter().any(|u| {
            u.register().full_register() == base
                && !matches!(u.access(), OpAccess::Read | OpAccess::CondRead)
                // String stores advance RDI by the element size; moving it
                // back afterwards is still exact.
                && !(instr.is_string_instruction() && base == Register::RDI)
        });
    if in_use {
        return Plan::Refuse(DecodeRefusal::BaseRegisterInUse);
    }
    Plan::Redirect { reg, addr, size }
}

/// A plain store of a general register or an immediate: its bytes.
fn emulation(instr: &Instruction, ctx: &Context<'_>, addr: usize, size: usize) -> Option<Plan> {
    if !matches!(instr.mnemonic(), Mnemonic::Mov | Mnemonic::Movnti)
        || instr.op_count() != 2
        || instr.op0_kind() != OpKind::Memory
        || size > 8
    {
        return None;
    }
    let value = match instr.op1_kind() {
        OpKind::Register => ctx.value_of(instr.op1_register())?,
        OpKind::Immediate8
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => instr.immediate(1),
        _ => return None,
    };
    Some(Plan::Emulate {
        addr,
        size,
        data: value.to_le_bytes(),
        next_rip: instr.next_ip(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context whose registers are all zero but those given.
    fn with_regs(regs: &[(libc::c_int, u64)]) -> Box<libc::ucontext_t> {
        // SAFETY: ucontext_t is plain data; all-zero is a valid value.
        let mut uc: Box<libc::ucontext_t> = Box::new(unsafe { std::mem::zeroed() });
        for &(r, v) in regs {
            uc.uc_mcontext.gregs[crate::plain::context::greg_index(r)] = crate::words::greg_of(v);
        }
        uc
    }

    fn plan_for(code: &[u8], regs: &[(libc::c_int, u64)], view: View) -> Plan {
        let mut uc = with_regs(regs);
        // SAFETY: a valid ucontext_t we own for the duration of the call.
        let ctx = unsafe { Context::from_raw(std::ptr::from_mut(&mut *uc).cast::<libc::c_void>()) };
        let mut f = InstructionInfoFactory::new();
        plan(&mut f, code, &ctx, view)
    }

    const VIEW: View = View {
        start: 0x10000,
        len: 0x2000,
    };

    #[test]
    fn a_mov_of_a_register_is_emulated_with_its_value() {
        // mov dword [rax+8], ecx
        let p = plan_for(
            &[0x89, 0x48, 0x08],
            &[
                (libc::REG_RAX, 0x10000),
                (libc::REG_RCX, 0x1122_3344_5566_7788),
            ],
            VIEW,
        );
        assert_eq!(
            p,
            Plan::Emulate {
                addr: 0x10008,
                size: 4,
                data: 0x5566_7788u64.to_le_bytes(),
                next_rip: 3
            }
        );
        // mov byte [rax], ah
        let p = plan_for(&[0x88, 0x20], &[(libc::REG_RAX, 0x10010)], VIEW);
        assert!(matches!(p, Plan::Emulate { addr: 0x10010, size: 1, data, .. } if data[0] == 0x00));
        // mov qword [rdi+rsi*8], -1 (imm32 sign-extended)
        let p = plan_for(
            &[0x48, 0xc7, 0x04, 0xf7, 0xff, 0xff, 0xff, 0xff],
            &[(libc::REG_RDI, 0x10000), (libc::REG_RSI, 2)],
            VIEW,
        );
        assert_eq!(
            p,
            Plan::Emulate {
                addr: 0x10010,
                size: 8,
                data: [0xff; 8],
                next_rip: 8
            }
        );
    }

    #[test]
    fn other_stores_are_redirected_through_their_base() {
        // movdqu [rdi+16], xmm0
        let p = plan_for(
            &[0xf3, 0x0f, 0x7f, 0x47, 0x10],
            &[(libc::REG_RDI, 0x10000)],
            VIEW,
        );
        assert_eq!(
            p,
            Plan::Redirect {
                reg: libc::REG_RDI,
                addr: 0x10010,
                size: 16
            }
        );
        // rep stosb: one byte at RDI per step
        let p = plan_for(
            &[0xf3, 0xaa],
            &[(libc::REG_RDI, 0x10004), (libc::REG_RCX, 9)],
            VIEW,
        );
        assert_eq!(
            p,
            Plan::Redirect {
                reg: libc::REG_RDI,
                addr: 0x10004,
                size: 1
            }
        );
    }

    #[test]
    fn loads_read_modify_writes_and_unmovable_stores_are_refused() {
        // mov eax, [rbx]
        let p = plan_for(&[0x8b, 0x03], &[(libc::REG_RBX, 0x10000)], VIEW);
        assert_eq!(p, Plan::Refuse(DecodeRefusal::Read));
        // add dword [rbx], 1
        let p = plan_for(&[0x83, 0x03, 0x01], &[(libc::REG_RBX, 0x10000)], VIEW);
        assert_eq!(p, Plan::Refuse(DecodeRefusal::ReadModifyWrite));
        // movdqu [rax+rax*1], xmm0: base is also the index
        let p = plan_for(
            &[0xf3, 0x0f, 0x7f, 0x04, 0x00],
            &[(libc::REG_RAX, 0x8000)],
            VIEW,
        );
        assert_eq!(p, Plan::Refuse(DecodeRefusal::BaseRegisterInUse));
        // mov qword [rax+0x1ffc], rcx crosses the end of the view
        let p = plan_for(
            &[0x48, 0x89, 0x88, 0xfc, 0x1f, 0x00, 0x00],
            &[(libc::REG_RAX, 0x10000)],
            VIEW,
        );
        assert_eq!(p, Plan::Refuse(DecodeRefusal::CrossesRegionEnd));
    }
}
