//! The traffic Aileron carries for others: a connector's outbound HTTP and spawned programs
//! (`egress`, `spawn`), a launched agent's own network (`agent_egress`), the LLM gateway, and the
//! TLS, pooled-client and address rules they share.

pub mod agent_egress;
pub mod egress;
pub mod gateway;
pub mod headers;
pub mod pooled_http;
pub mod public_address;
pub mod redaction;
pub mod spawn;
pub mod tls;

/// A response body that holds a permit (a slot of something bounded) until it is done or
/// dropped.
pub(crate) struct Permitted<B> {
    pub body: B,
    pub _permit: tokio::sync::OwnedSemaphorePermit,
}

impl<B> axum::body::HttpBody for Permitted<B>
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, axum::BoxError>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(context).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
