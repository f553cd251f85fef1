//! Test helpers: a capturing `tracing` subscriber so tests can assert on the
//! spec's log lines without another crate.
//!
//! One subscriber is installed as the global default (once) and records each
//! event into a buffer owned by the thread that emitted it, when that thread
//! is inside [`capture`]. A global subscriber avoids the races of per-thread
//! scoped subscribers on callsite interest while tests run in parallel.

use std::cell::RefCell;
use std::fmt;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// One captured event: message and the other fields as text.
#[derive(Debug, Clone)]
pub(crate) struct CapturedEvent {
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl CapturedEvent {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The events one [`capture`] call recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    events: Vec<CapturedEvent>,
}

impl Capture {
    pub fn events(&self) -> Vec<CapturedEvent> {
        self.events.clone()
    }

    pub fn find(&self, message: &str) -> Option<CapturedEvent> {
        self.events.iter().find(|e| e.message == message).cloned()
    }

    pub fn count(&self, message: &str) -> usize {
        self.events.iter().filter(|e| e.message == message).count()
    }
}

thread_local! {
    static BUFFER: RefCell<Option<Vec<CapturedEvent>>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Runs `f` and returns what it logged on this thread.
pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Capture) {
    INSTALL.call_once(|| {
        // Another global subscriber would only mean nothing is captured,
        // which the asserting test then reports.
        let _ = tracing::subscriber::set_global_default(GlobalCapture::default());
    });
    BUFFER.with(|buffer| *buffer.borrow_mut() = Some(Vec::new()));
    let result = f();
    let events = BUFFER.with(|buffer| buffer.borrow_mut().take().unwrap_or_default());
    (result, Capture { events })
}

#[derive(Default)]
struct GlobalCapture {
    next_span: AtomicU64,
}

struct Visitor<'a>(&'a mut CapturedEvent);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.message = value.to_owned();
        } else {
            self.0
                .fields
                .push((field.name().to_owned(), value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.0.message = text;
        } else {
            self.0.fields.push((field.name().to_owned(), text));
        }
    }
}

impl Subscriber for GlobalCapture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        BUFFER.with(|buffer| {
            if let Some(events) = buffer.borrow_mut().as_mut() {
                let mut captured = CapturedEvent {
                    message: String::new(),
                    fields: Vec::new(),
                };
                event.record(&mut Visitor(&mut captured));
                events.push(captured);
            }
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
