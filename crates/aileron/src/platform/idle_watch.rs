//! How long a served HTTP/1.1 connection may stay idle: one watch per connection, in place of
//! hyper's header-read timer, which makes, registers and drops a timer for every request (~1,300
//! of a gateway request's ~66,000 instructions, BENCHMARKS.md, issue 49).
//!
//! A connection is idle while none of its requests is being answered and none begins. The watch
//! looks at it every half [limit](idle_for): once it has been idle at two looks in a row and
//! between them, which is at least the limit and at most one and a half, the watch completes and
//! the connection's task drops the connection. A request head that never ends (slowloris) never
//! begins a request, so its connection is idle; a response that streams for an hour is being
//! answered, so its connection is not. A request body has deadlines of its own (the daemon's
//! `DeadlineBody`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

/// What one connection's requests are doing: the low 32 bits count the requests being answered,
/// the bits above them the requests begun (wrapping).
#[derive(Default)]
pub struct Activity(AtomicU64);

const ANSWERING: u64 = 1;
const BEGUN: u64 = 1 << 32;
const ANSWERING_MASK: u64 = BEGUN - 1;

impl Activity {
    fn begin(self: &Arc<Self>) -> Answering {
        self.0.fetch_add(BEGUN + ANSWERING, Ordering::Relaxed);
        Answering(self.clone())
    }

    fn read(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One request being answered: from the call of the service until its response body is dropped
/// (sent whole, or abandoned with its connection), or its future is, unanswered.
struct Answering(Arc<Activity>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.0.fetch_sub(ANSWERING, Ordering::Relaxed);
    }
}

/// Completes once the connection of `activity` has been idle for `limit` (up to one and a half).
pub async fn idle_for(activity: &Activity, limit: Duration) {
    let look = limit / 2;
    let mut looks = tokio::time::interval_at(tokio::time::Instant::now() + look, look);
    looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut before = activity.read();
    let mut idle_looks = 0;
    loop {
        looks.tick().await;
        let now = activity.read();
        idle_looks = if now == before && now & ANSWERING_MASK == 0 { idle_looks + 1 } else { 0 };
        if idle_looks == 2 {
            return;
        }
        before = now;
    }
}

/// A connection's service, counting its requests into the connection's [`Activity`].
pub struct Watched<S> {
    service: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    /// `service` for one connection, and the activity its [`idle_for`] watches.
    pub fn new(service: S) -> (Watched<S>, Arc<Activity>) {
        let activity = Arc::new(Activity::default());
        (Watched { service, activity: activity.clone() }, activity)
    }
}

impl<S, R, B> hyper::service::Service<R> for Watched<S>
where
    S: hyper::service::Service<R, Response = http::Response<B>>,
{
    type Response = http::Response<AnsweredBody<B>>;
    type Error = S::Error;
    type Future = WatchedFuture<S::Future>;

    fn call(&self, request: R) -> Self::Future {
        let answering = Some(self.activity.begin());
        WatchedFuture { future: self.service.call(request), answering }
    }
}

pin_project_lite::pin_project! {
    /// A response on its way: the request stays answered while the response body lives.
    pub struct WatchedFuture<F> {
        #[pin]
        future: F,
        answering: Option<Answering>,
    }
}

impl<F, B, E> Future for WatchedFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<AnsweredBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answered = ready!(this.future.poll(cx));
        let answering = this.answering.take().expect("a response future is not polled after it completed");
        Poll::Ready(answered.map(|response| response.map(|body| AnsweredBody { body, _answering: answering })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request counted as answered until it is dropped.
    pub struct AnsweredBody<B> {
        #[pin]
        body: B,
        _answering: Answering,
    }
}

impl<B: hyper::body::Body> hyper::body::Body for AnsweredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::service::Service as _;

    /// A service answering every request at once with `{}`.
    struct Answer;

    impl hyper::service::Service<()> for Answer {
        type Response = http::Response<&'static str>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<http::Response<&'static str>, std::convert::Infallible>>;

        fn call(&self, (): ()) -> Self::Future {
            std::future::ready(Ok(http::Response::new("{}")))
        }
    }

    /// A request counts as answered from its call until its response body is dropped, and as
    /// begun for good; an abandoned response future ends its answering too.
    #[tokio::test]
    async fn a_request_is_answered_until_its_response_body_is_dropped() {
        let (service, activity) = Watched::new(Answer);
        assert_eq!(activity.read(), 0);
        let pending = service.call(());
        assert_eq!(activity.read(), BEGUN + 1, "begun and being answered from the call");
        let response = pending.await.unwrap();
        assert_eq!(activity.read() & ANSWERING_MASK, 1, "still answered while the body lives");
        assert_eq!(response.body().body, "{}");
        drop(response);
        assert_eq!(activity.read(), BEGUN, "answered, and begun once");
        drop(service.call(()));
        assert_eq!(activity.read(), 2 * BEGUN, "an abandoned answer is not counted as answering");
    }

    /// The watch completes once the connection has been idle for the limit (never sooner), never
    /// while a request is being answered however long, and counts the idleness after the last
    /// request.
    #[tokio::test]
    async fn the_watch_ends_a_connection_idle_for_its_limit_and_only_then() {
        use tokio::time::{Instant, timeout};
        let limit = Duration::from_millis(200);
        let (service, activity) = Watched::new(Answer);
        let started = Instant::now();
        timeout(limit * 10, idle_for(&activity, limit)).await.expect("the watch of a connection never used ends");
        assert!(started.elapsed() >= limit, "ended after {:?}", started.elapsed());

        // An answer that lasts three limits keeps its connection; the count starts at its end.
        let response = service.call(()).await.unwrap();
        let mut watch = std::pin::pin!(idle_for(&activity, limit));
        assert!(timeout(limit * 3, watch.as_mut()).await.is_err(), "the watch ended while a request was answered");
        let answered = Instant::now();
        drop(response);
        timeout(limit * 10, watch).await.expect("the watch ends once the answer is sent");
        assert!(answered.elapsed() >= limit, "ended {:?} after the answer", answered.elapsed());

        // A request begun and answered between two looks restarts the count.
        let mut watch = std::pin::pin!(idle_for(&activity, limit));
        let started = Instant::now();
        assert!(timeout(limit * 3 / 4, watch.as_mut()).await.is_err());
        drop(service.call(()).await.unwrap());
        timeout(limit * 10, watch).await.expect("the watch ends");
        assert!(started.elapsed() >= limit * 7 / 4, "ended {:?} after it started", started.elapsed());
    }
}
