//! The injectable wall clock.
//!
//! Every timestamp the registry stores (`created_at`, `updated_at`) and every
//! TTL decision reads the clock through the [`Clock`] trait. Production uses
//! [`SystemClock`]; tests use [`ManualClock`] and move time forward by hand,
//! so retention and reaper behaviour is checked without sleeping.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Source of "now" for job timestamps and TTL expiry.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> DateTime<Utc>;
}

/// The real wall clock (`Utc::now()`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to. It may also be stepped backwards, to
/// check that a backwards wall-clock step never expires a job early.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A manual clock starting at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// A manual clock starting at the current real time.
    pub fn starting_now() -> Self {
        Self::new(Utc::now())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let delta = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.lock();
        *now = now
            .checked_add_signed(delta)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
    }

    /// Moves the clock backward by `by` (a backwards wall-clock step).
    pub fn rewind(&self, by: Duration) {
        let delta = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.lock();
        *now = now
            .checked_sub_signed(delta)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.lock() = to;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // A plain timestamp cannot be left half-written, so a poisoned lock is
        // still safe to use.
        self.now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::starting_now()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let start = Utc::now();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(10));
        assert_eq!(clock.now(), start + chrono::Duration::seconds(10));
        clock.rewind(Duration::from_secs(15));
        assert_eq!(clock.now(), start - chrono::Duration::seconds(5));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn system_clock_tracks_real_time() {
        let before = Utc::now();
        let now = SystemClock.now();
        assert!(now >= before);
    }
}
