//! PvmMax, PvmMin, PvmSum and PvmProduct: the reduction functions of
//! pvm3.h, `x[i] = x[i] op y[i]` over `*num` elements of `*datatype`.
//! Complex numbers have sums and products only (PvmBadParam in `*info`
//! otherwise); integers wrap as C's unsigned arithmetic does.

use std::ffi::{c_char, c_int, c_long, c_short, c_uint, c_ulong, c_ushort, c_void};

use crate::codes::*;

#[derive(Clone, Copy)]
enum Op {
    Max,
    Min,
    Sum,
    Product,
}

trait Num: Copy + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
ints!(c_char, c_short, c_int, c_long, c_ushort, c_uint, c_ulong);

macro_rules! floats {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
        }
    )*};
}
floats!(f32, f64);

fn apply<T: Num>(op: Op, x: &mut [T], y: &[T]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a = match op {
            Op::Max => {
                if *b > *a {
                    *b
                } else {
                    *a
                }
            }
            Op::Min => {
                if *b < *a {
                    *b
                } else {
                    *a
                }
            }
            Op::Sum => a.add(*b),
            Op::Product => a.mul(*b),
        };
    }
}

fn apply_complex<T: Num + std::ops::Sub<Output = T>>(op: Op, x: &mut [T], y: &[T]) -> bool {
    match op {
        Op::Sum => apply(Op::Sum, x, y),
        Op::Product => {
            for (a, b) in x.chunks_exact_mut(2).zip(y.chunks_exact(2)) {
                let (re, im) = (
                    a[0].mul(b[0]) - a[1].mul(b[1]),
                    a[0].mul(b[1]).add(a[1].mul(b[0])),
                );
                a[0] = re;
                a[1] = im;
            }
        }
        Op::Max | Op::Min => return false,
    }
    true
}

/// # Safety
/// `x` and `y` hold `n` elements of `T`.
unsafe fn typed<T: Num>(op: Op, x: *mut c_void, y: *const c_void, n: usize) {
    // SAFETY: the caller's contract.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts_mut(x.cast::<T>(), n),
            std::slice::from_raw_parts(y.cast::<T>(), n),
        )
    };
    apply(op, x, y);
}

/// # Safety
/// The reduction functions' contract (below).
unsafe fn reduce(
    op: Op,
    datatype: *const c_int,
    x: *mut c_void,
    y: *const c_void,
    num: *const c_int,
    info: *mut c_int,
) {
    // SAFETY: pvm_reduce's contract: valid pointers.
    let (t, n) = unsafe { (*datatype, *num) };
    let n = usize::try_from(n).unwrap_or(0);
    let mut ok = true;
    // SAFETY: x and y hold n elements of the type t names.
    unsafe {
        match t {
            PVM_BYTE => typed::<c_char>(op, x, y, n),
            PVM_SHORT => typed::<c_short>(op, x, y, n),
            PVM_INT => typed::<c_int>(op, x, y, n),
            PVM_LONG => typed::<c_long>(op, x, y, n),
            PVM_USHORT => typed::<c_ushort>(op, x, y, n),
            PVM_UINT => typed::<c_uint>(op, x, y, n),
            PVM_ULONG => typed::<c_ulong>(op, x, y, n),
            PVM_FLOAT => typed::<f32>(op, x, y, n),
            PVM_DOUBLE => typed::<f64>(op, x, y, n),
            PVM_CPLX => {
                let (x, y) = (
                    std::slice::from_raw_parts_mut(x.cast::<f32>(), 2 * n),
                    std::slice::from_raw_parts(y.cast::<f32>(), 2 * n),
                );
                ok = apply_complex(op, x, y);
            }
            PVM_DCPLX => {
                let (x, y) = (
                    std::slice::from_raw_parts_mut(x.cast::<f64>(), 2 * n),
                    std::slice::from_raw_parts(y.cast::<f64>(), 2 * n),
                );
                ok = apply_complex(op, x, y);
            }
            _ => ok = false,
        }
        if let Some(i) = info.as_mut() {
            *i = if ok { PVM_OK } else { PVM_BAD_PARAM };
        }
    }
}

macro_rules! reduction {
    ($name:ident, $op:expr) => {
        /// A reduction function of pvm3.h, for pvm_reduce.
        ///
        /// # Safety
        /// `datatype` and `num` point to ints; `x` and `y` to `*num`
        /// elements of `*datatype`; `info` is NULL or writable.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            datatype: *const c_int,
            x: *mut c_void,
            y: *const c_void,
            num: *const c_int,
            info: *mut c_int,
        ) {
            // SAFETY: the caller's contract.
            unsafe { reduce($op, datatype, x, y, num, info) }
        }
    };
}

reduction!(PvmMax, Op::Max);
reduction!(PvmMin, Op::Min);
reduction!(PvmSum, Op::Sum);
reduction!(PvmProduct, Op::Product);

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T: Copy>(
        f: unsafe extern "C" fn(*const c_int, *mut c_void, *const c_void, *const c_int, *mut c_int),
        t: c_int,
        x: &mut [T],
        y: &[T],
        n: c_int,
    ) -> c_int {
        let mut info = 99;
        // SAFETY: x and y hold n elements of t.
        unsafe { f(&t, x.as_mut_ptr().cast(), y.as_ptr().cast(), &n, &mut info) };
        info
    }

    #[test]
    fn each_function_combines_each_element() {
        let mut x = [1, 5, -3];
        assert_eq!(run(PvmMax, PVM_INT, &mut x, &[2, 4, -4], 3), PVM_OK);
        assert_eq!(x, [2, 5, -3]);
        assert_eq!(run(PvmMin, PVM_INT, &mut x, &[0, 9, -9], 3), PVM_OK);
        assert_eq!(x, [0, 5, -9]);
        let mut d = [1.5f64, 2.0];
        run(PvmSum, PVM_DOUBLE, &mut d, &[1.0, -2.0], 2);
        assert_eq!(d, [2.5, 0.0]);
        let mut u = [3u16, 7];
        run(PvmProduct, PVM_USHORT, &mut u, &[4, 2], 2);
        assert_eq!(u, [12, 14]);
    }

    #[test]
    fn complex_numbers_multiply_as_complex_and_have_no_order() {
        let mut c = [1.0f32, 2.0];
        assert_eq!(run(PvmProduct, PVM_CPLX, &mut c, &[3.0f32, 4.0], 1), PVM_OK);
        assert_eq!(c, [-5.0, 10.0]);
        assert_eq!(
            run(PvmMax, PVM_CPLX, &mut c, &[3.0f32, 4.0], 1),
            PVM_BAD_PARAM
        );
        assert_eq!(
            run(PvmSum, PVM_STR, &mut c, &[3.0f32, 4.0], 1),
            PVM_BAD_PARAM
        );
    }
}
