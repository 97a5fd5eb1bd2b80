//! [`ErrorChain`]: how every crate of the project prints an error with its
//! causes. It lives here, in the crate every other one depends on, so that
//! there is one printer.
//!
//! The project's errors name their cause either in their message or by
//! returning it from `source()`, never both (`tests/error_display.rs`
//! checks the `#[error]` attributes), so walking the chain names each
//! cause once.

use std::error::Error;
use std::fmt;

/// An error and its causes, `: `-separated, each once: what a program
/// prints for a failed command and wherever an error is shown inline.
///
/// A cause whose text already ends the line is skipped: errors from other
/// crates that both print and return their cause then read right too.
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            cause = c.source();
        }
        f.write_str(&line)
    }
}

/// The first error in `e`'s chain whose own message already holds the text
/// of the cause its `source()` returns: that cause would be printed twice
/// by a printer that does not skip it. `None` when each cause reads once.
/// Each crate's tests call it on its errors that keep a source, with a
/// cause of distinctive text.
pub fn doubled_cause(e: &(dyn Error + 'static)) -> Option<String> {
    let mut outer = e;
    while let Some(cause) = outer.source() {
        let (said, text) = (outer.to_string(), cause.to_string());
        if !text.is_empty() && said.contains(&text) {
            return Some(format!("{said:?} already says its cause {text:?}"));
        }
        outer = cause;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("leaf")]
    struct Leaf;

    #[derive(Debug, thiserror::Error)]
    #[error("middle")]
    struct Middle(#[source] Leaf);

    #[derive(Debug, thiserror::Error)]
    #[error("top")]
    struct Top(#[from] Middle);

    #[test]
    fn each_cause_follows_once_in_order() {
        let e = Top(Middle(Leaf));
        assert_eq!(e.to_string(), "top");
        assert_eq!(ErrorChain(&e).to_string(), "top: middle: leaf");
        assert_eq!(ErrorChain(&Leaf).to_string(), "leaf");
    }

    #[test]
    fn a_foreign_error_that_prints_its_cause_too_reads_once() {
        #[derive(Debug, thiserror::Error)]
        // Doubled on purpose: the case this test is about.
        #[error("outer: {0}")]
        struct Doubled(#[source] Leaf);
        assert_eq!(ErrorChain(&Doubled(Leaf)).to_string(), "outer: leaf");
    }

    #[test]
    fn doubled_cause_finds_a_message_that_repeats_its_source() {
        #[derive(Debug, thiserror::Error)]
        // Doubled on purpose: what the check must find.
        #[error("outer: {0}")]
        struct Doubled(#[source] Middle);
        assert_eq!(doubled_cause(&Top(Middle(Leaf))), None);
        assert_eq!(doubled_cause(&Leaf), None);
        let found = doubled_cause(&Doubled(Middle(Leaf))).expect("doubled");
        assert!(found.contains("outer: middle"), "{found}");
    }
}
