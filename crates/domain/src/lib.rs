//! rackflow's domain: the hard rules as plain data and pure functions.
//!
//! This crate owns the inventory types, target specifications, operation-run
//! configuration with its validation and defaults, the planner (seeded
//! selection, ordering and phase allocation) and the run/target state types.
//! It does no I/O, is not async and knows nothing of gRPC or SQL: everything
//! here is tested without a database or a runtime.

#[macro_use]
mod named_enum;

pub mod audit;
pub mod bundle;
pub mod component;
pub mod conflict;
pub mod dispatch;
pub mod drift;
pub mod duration;
pub mod event_rule;
pub mod inventory;
pub mod leak;
pub mod planner;
pub mod report;
pub mod rule;
pub mod run;
pub mod schedule;
pub mod suggest;
pub mod target;
pub mod task;

pub use component::{ComponentSetError, ComponentType, ComponentsByType};

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary (the one place text is cut to a byte bound).
pub fn prefix_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod prefix_tests {
    #[test]
    fn prefixes_end_on_character_boundaries() {
        assert_eq!(super::prefix_within("abc", 5), "abc");
        assert_eq!(super::prefix_within("abc", 2), "ab");
        assert_eq!(super::prefix_within("ééé", 3), "é");
        assert_eq!(super::prefix_within("é", 1), "");
    }
}
