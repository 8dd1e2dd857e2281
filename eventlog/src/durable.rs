//! [`Durable`]: proof that data reached stable storage.

/// A value the log has made durable: its entries were flushed to disk
/// (storage `flush` returned `Ok`) before this token was created.
///
/// Only the `log` module can construct one, so holding a `Durable` is a
/// type-level guarantee that it is safe to acknowledge its contents to
/// anyone outside the process. There is deliberately no `map`: that would
/// let arbitrary values be wrapped as durable.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a Durable value is the acknowledgement; dropping it loses what was made durable"]
pub struct Durable<T> {
    value: T,
}

impl<T> Durable<T> {
    /// Wraps a value whose entries the caller has just seen flushed.
    pub(super) fn new(value: T) -> Self {
        Durable { value }
    }

    /// Borrows the durable value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// Takes the durable value out of its token.
    pub fn into_inner(self) -> T {
        self.value
    }
}
