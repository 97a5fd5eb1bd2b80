//! The error a program sees from the DSM handle.

/// What went wrong in a DSM operation: the protocol's own error, kept as
/// the source (a program that needs the protocol's detail downcasts it).
#[derive(Debug, thiserror::Error)]
pub enum DsmError {
    #[error(transparent)]
    Alloc(#[from] crate::alloc::AllocError),
    /// The protocol's own error, as it says itself.
    #[error(transparent)]
    Protocol(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl DsmError {
    /// Wrap a protocol's error.
    pub fn protocol(source: impl std::error::Error + Send + Sync + 'static) -> DsmError {
        DsmError::Protocol(Box::new(source))
    }

    /// The protocol's own error, taken out, if it is one of type `E`;
    /// else this error back.
    pub fn downcast<E: std::error::Error + Send + Sync + 'static>(self) -> Result<E, DsmError> {
        match self {
            DsmError::Protocol(source) => source
                .downcast::<E>()
                .map(|e| *e)
                .map_err(DsmError::Protocol),
            other => Err(other),
        }
    }

    /// The protocol's own error, if it is one of type `E`.
    pub fn protocol_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            DsmError::Protocol(source) => source.downcast_ref::<E>(),
            DsmError::Alloc(_) => None,
        }
    }
}
