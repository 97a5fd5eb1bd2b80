//! The interrupted thread's registers, as a signal handler sees them in its
//! `ucontext_t` (x86-64 Linux): read them to evaluate a store's address and
//! value, change them to redirect or step over it.

use iced_x86::Register;

use crate::words::{greg_of, reg_bits};

/// The trap flag of RFLAGS: the CPU raises a debug trap after the next
/// instruction (seen as SIGTRAP, `si_code` TRAP_TRACE).
pub(crate) const TRAP_FLAG: i64 = 0x100;
/// Page-fault error code bit: the access was a write.
const PF_WRITE: i64 = 0x2;

/// Where register `i` (a `REG_*` number, small and non-negative) is in
/// `gregs`.
pub(crate) fn greg_index(i: libc::c_int) -> usize {
    usize::try_from(i).expect("REG_* numbers are non-negative")
}

/// The saved registers of the thread a signal interrupted.
pub(crate) struct Context<'a> {
    uc: &'a mut libc::ucontext_t,
}

impl<'a> Context<'a> {
    /// # Safety
    /// `ctx` must be the third argument of an `SA_SIGINFO` handler, which
    /// the kernel points at the interrupted thread's saved context.
    pub(crate) unsafe fn from_raw(ctx: *mut libc::c_void) -> Context<'a> {
        // SAFETY: the caller passes the kernel's ucontext, valid and
        // exclusively ours until the handler returns.
        let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
        Context { uc }
    }

    fn greg(&self, i: libc::c_int) -> i64 {
        self.uc.uc_mcontext.gregs[greg_index(i)]
    }

    fn set_greg(&mut self, i: libc::c_int, v: i64) {
        self.uc.uc_mcontext.gregs[greg_index(i)] = v;
    }

    pub(crate) fn rip(&self) -> u64 {
        reg_bits(self.greg(libc::REG_RIP))
    }

    pub(crate) fn set_rip(&mut self, rip: u64) {
        self.set_greg(libc::REG_RIP, greg_of(rip));
    }

    /// The faulting access was a write (page-fault error code).
    pub(crate) fn fault_was_write(&self) -> bool {
        self.greg(libc::REG_ERR) & PF_WRITE != 0
    }

    pub(crate) fn set_trap_flag(&mut self, on: bool) {
        let f = self.greg(libc::REG_EFL);
        self.set_greg(
            libc::REG_EFL,
            if on { f | TRAP_FLAG } else { f & !TRAP_FLAG },
        );
    }

    /// The 64-bit value of general register `index` (a `REG_*` number).
    pub(crate) fn gpr(&self, index: libc::c_int) -> u64 {
        reg_bits(self.greg(index))
    }

    pub(crate) fn add_to_gpr(&mut self, index: libc::c_int, delta: u64) {
        let v = reg_bits(self.greg(index)).wrapping_add(delta);
        self.set_greg(index, greg_of(v));
    }

    /// The value of `reg` as an instruction sees it (sub-registers masked,
    /// AH..BH shifted down), or None for what is not a general register.
    pub(crate) fn value_of(&self, reg: Register) -> Option<u64> {
        let full = gpr_index(reg.full_register())?;
        let v = self.gpr(full);
        if matches!(
            reg,
            Register::AH | Register::CH | Register::DH | Register::BH
        ) {
            return Some((v >> 8) & 0xff);
        }
        Some(match reg.size() {
            1 => v & 0xff,
            2 => v & 0xffff,
            4 => v & 0xffff_ffff,
            _ => v,
        })
    }
}

/// The `REG_*` index of a 64-bit general register.
pub(crate) fn gpr_index(full: Register) -> Option<libc::c_int> {
    Some(match full {
        Register::RAX => libc::REG_RAX,
        Register::RCX => libc::REG_RCX,
        Register::RDX => libc::REG_RDX,
        Register::RBX => libc::REG_RBX,
        Register::RSP => libc::REG_RSP,
        Register::RBP => libc::REG_RBP,
        Register::RSI => libc::REG_RSI,
        Register::RDI => libc::REG_RDI,
        Register::R8 => libc::REG_R8,
        Register::R9 => libc::REG_R9,
        Register::R10 => libc::REG_R10,
        Register::R11 => libc::REG_R11,
        Register::R12 => libc::REG_R12,
        Register::R13 => libc::REG_R13,
        Register::R14 => libc::REG_R14,
        Register::R15 => libc::REG_R15,
        _ => return None,
    })
}
