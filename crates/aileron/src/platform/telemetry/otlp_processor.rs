//! The `otlp` exporter's span processor. A span is encoded where it ends, on the thread that
//! ends it, into the request being filled ([`Batch`]); a thread of its own sends each full
//! request, and whatever is waiting once every schedule delay, on a flush and at shutdown. Only a
//! batch's bytes cross threads.
//!
//! The SDK's `BatchSpanProcessor` moved each span's data through a channel to its thread, which
//! encoded it and dropped it there: two more copies of every span, and each of its allocations
//! freed on a thread other than the one that made it (the allocator's slow path). Its thread and
//! the HTTP client's were about half of what tracing cost a run in (d) (BENCHMARKS.md, issue 49).
//!
//! Limits are the SDK's variables: `OTEL_BSP_SCHEDULE_DELAY` (ms, default 5000),
//! `OTEL_BSP_MAX_QUEUE_SIZE` (spans waiting, default 2048; a span beyond them is dropped and
//! counted), `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (spans a request, default 512, at most the queue).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};

use super::otlp::{Batch, OtlpSpanExporter};
use crate::platform::env;

/// How long a flush waits for the thread: the SDK's export timeout.
const FLUSH_WAIT: Duration = Duration::from_secs(30);

/// The batching limits, from the SDK's variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub schedule_delay: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
}

impl Limits {
    /// As the SDK reads them: a value that is not a number is ignored, a batch is at most the
    /// queue, and neither is zero.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Limits {
        let number = |name: &str| lookup(name).and_then(|value| value.trim().parse::<u64>().ok());
        let max_queue = number(env::OTEL_BSP_MAX_QUEUE_SIZE).map_or(2048, |n| n as usize).max(1);
        Limits {
            schedule_delay: Duration::from_millis(number(env::OTEL_BSP_SCHEDULE_DELAY).unwrap_or(5000)),
            max_queue,
            max_batch: number(env::OTEL_BSP_MAX_EXPORT_BATCH_SIZE).map_or(512, |n| n as usize).clamp(1, max_queue),
        }
    }
}

#[derive(Debug)]
pub struct OtlpSpanProcessor {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    limits: Limits,
    queue: Mutex<Queue>,
    /// The thread waits here for a full batch, a flush, the schedule or the end.
    work: Condvar,
    /// A flush or a shutdown waits here for the thread's answer.
    answered: Condvar,
    /// Only the thread sends; `set_resource` changes it before the first span.
    exporter: Mutex<OtlpSpanExporter>,
}

#[derive(Debug, Default)]
struct Queue {
    /// The batch spans are pushed into.
    open: Batch,
    /// Full batches, oldest first.
    full: VecDeque<Batch>,
    /// Spans in `open` and `full`.
    waiting: usize,
    /// The most bytes a batch has held: what the next one is made with.
    reserve: usize,
    dropped: u64,
    /// Flushes asked for and answered (a counter each), and the last answer's failure.
    flushes_asked: u64,
    flushes_answered: u64,
    flush_failure: Option<String>,
    stopping: bool,
    stopped: bool,
}

impl OtlpSpanProcessor {
    pub fn new(exporter: OtlpSpanExporter, limits: Limits) -> Result<OtlpSpanProcessor, String> {
        let shared = Arc::new(Shared {
            limits,
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            answered: Condvar::new(),
            exporter: Mutex::new(exporter),
        });
        // The thread sends on a runtime of its own, made and dropped there: a runtime may not be
        // dropped inside another, and the processor's owner may be async. It says whether it
        // started before anything is queued.
        let (started, start) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("aileron-otlp".into())
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                    match runtime {
                        Ok(runtime) => {
                            let _ = started.send(Ok(()));
                            shared.run(&runtime);
                        }
                        Err(error) => {
                            let _ = started.send(Err(format!("starting its HTTP runtime: {error}\nhint: the process may be at its limit of open files")));
                        }
                    }
                })
                .map_err(|error| format!("starting its thread: {error}\nhint: the process may be at its thread limit"))?
        };
        let answer = start.recv().unwrap_or_else(|_| Err("its thread ended before it started".to_string()));
        if let Err(error) = answer {
            let _ = thread.join();
            return Err(error);
        }
        Ok(OtlpSpanProcessor { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Spans dropped because the queue was full (or ended after the shutdown).
    pub fn dropped(&self) -> u64 {
        self.shared.lock().dropped
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread: sends full batches as they fill, and everything waiting when the schedule
    /// comes round, a flush is asked for or the processor stops.
    fn run(&self, runtime: &tokio::runtime::Runtime) {
        let mut due = Instant::now() + self.limits.schedule_delay;
        loop {
            let mut queue = self.lock();
            let everything = loop {
                let now = Instant::now();
                let asked = queue.stopping || queue.flushes_asked > queue.flushes_answered || now >= due;
                if asked || !queue.full.is_empty() {
                    break asked;
                }
                queue = self.work.wait_timeout(queue, due - now).unwrap_or_else(PoisonError::into_inner).0;
            };
            let (flush, stopping) = (queue.flushes_asked, queue.stopping);
            let mut batches: Vec<Batch> = queue.full.drain(..).collect();
            if everything && !queue.open.is_empty() {
                batches.push(queue.take_open());
            }
            queue.waiting -= batches.iter().map(Batch::len).sum::<usize>();
            drop(queue);

            let mut failure = None;
            {
                let exporter = self.exporter.lock().unwrap_or_else(PoisonError::into_inner);
                for batch in batches {
                    if let Err(error) = runtime.block_on(exporter.send(exporter.request(&batch))) {
                        failure = Some(error);
                    }
                }
            }
            if everything {
                due = Instant::now() + self.limits.schedule_delay;
            }
            let mut queue = self.lock();
            if flush > queue.flushes_answered {
                queue.flushes_answered = flush;
                queue.flush_failure = failure;
            }
            if stopping {
                queue.stopped = true;
            }
            drop(queue);
            self.answered.notify_all();
            if stopping {
                return;
            }
        }
    }
}

impl Queue {
    /// The open batch, replaced by one made with room for the largest yet.
    fn take_open(&mut self) -> Batch {
        self.reserve = self.reserve.max(self.open.bytes());
        std::mem::replace(&mut self.open, Batch::with_capacity(self.reserve))
    }
}

impl SpanProcessor for OtlpSpanProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    /// Encodes `span` into the open batch; `span` is dropped here, after the lock is released.
    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let shared = &*self.shared;
        let mut queue = shared.lock();
        if queue.stopping || queue.waiting >= shared.limits.max_queue {
            queue.dropped += 1;
            return;
        }
        queue.open.push(&span);
        queue.waiting += 1;
        if queue.open.len() >= shared.limits.max_batch {
            let full = queue.take_open();
            queue.full.push_back(full);
            drop(queue);
            shared.work.notify_one();
        }
    }

    /// Sends everything waiting and answers how that went; an error when a request failed, or
    /// when the thread did not answer within the SDK's export timeout.
    fn force_flush(&self) -> OTelSdkResult {
        let shared = &*self.shared;
        let mut queue = shared.lock();
        if queue.stopping {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        queue.flushes_asked += 1;
        let ticket = queue.flushes_asked;
        shared.work.notify_one();
        let (queue, waited) = shared
            .answered
            .wait_timeout_while(queue, FLUSH_WAIT, |queue| queue.flushes_answered < ticket && !queue.stopped)
            .unwrap_or_else(PoisonError::into_inner);
        if waited.timed_out() {
            return Err(OTelSdkError::Timeout(FLUSH_WAIT));
        }
        queue.flush_failure.clone().map_or(Ok(()), |failure| Err(OTelSdkError::InternalFailure(failure)))
    }

    /// Sends what is waiting and stops the thread; later spans are dropped.
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let shared = &*self.shared;
        let mut queue = shared.lock();
        if queue.stopping {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        queue.stopping = true;
        // The last cycle answers as a flush does.
        queue.flushes_asked += 1;
        shared.work.notify_one();
        let (queue, waited) = shared
            .answered
            .wait_timeout_while(queue, timeout, |queue| !queue.stopped)
            .unwrap_or_else(PoisonError::into_inner);
        if waited.timed_out() {
            return Err(OTelSdkError::Timeout(timeout));
        }
        let (failure, dropped) = (queue.flush_failure.clone(), queue.dropped);
        drop(queue);
        if let Some(thread) = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = thread.join();
        }
        if dropped > 0 {
            log_line!(
                "aileron: warning: {dropped} spans were not exported: {} were already waiting for the collector\nhint: raise {}, or check that the collector keeps up",
                shared.limits.max_queue,
                env::OTEL_BSP_MAX_QUEUE_SIZE
            );
        }
        failure.map_or(Ok(()), |failure| Err(OTelSdkError::InternalFailure(failure)))
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.shared.exporter.lock().unwrap_or_else(PoisonError::into_inner).set_resource(resource);
    }
}

impl Drop for OtlpSpanProcessor {
    /// A processor dropped without a shutdown still lets its thread finish and end.
    fn drop(&mut self) {
        let mut queue = self.shared.lock();
        if !queue.stopping {
            queue.stopping = true;
            drop(queue);
            self.shared.work.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::net::TcpListener;
    use std::time::{SystemTime, UNIX_EPOCH};

    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;
    use crate::platform::telemetry::otlp::OtlpTarget;

    fn span(seed: u64, flags: TraceFlags) -> SpanData {
        let context = SpanContext::new(TraceId::from(7), SpanId::from(seed), flags, false, TraceState::default());
        SpanData {
            span_context: context,
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed("aileron.action.execute"),
            start_time: UNIX_EPOCH,
            end_time: SystemTime::now(),
            attributes: vec![],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("aileron").build(),
        }
    }

    /// A collector that takes the connection and never answers holds the thread in its first
    /// request; behind it one full batch waits, and every span past the queue is dropped and
    /// counted, never blocking the thread that ended it.
    #[test]
    fn spans_past_the_queue_are_dropped_and_counted_while_the_collector_hangs() {
        let hung = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = OtlpTarget {
            endpoint: format!("http://{}/v1/traces", hung.local_addr().unwrap()),
            headers: vec![],
            timeout: Duration::from_millis(300),
        };
        let limits = Limits { schedule_delay: Duration::from_secs(3600), max_queue: 4, max_batch: 4 };
        let processor = OtlpSpanProcessor::new(OtlpSpanExporter::new(target).unwrap(), limits).unwrap();
        processor.on_end(span(99, TraceFlags::default()));
        for seed in 1..=4 {
            processor.on_end(span(seed, TraceFlags::SAMPLED));
        }
        // The thread has taken the full batch and is in its request.
        let (_connection, _) = hung.accept().unwrap();
        for seed in 5..=10 {
            processor.on_end(span(seed, TraceFlags::SAMPLED));
        }
        assert_eq!(
            processor.dropped(),
            2,
            "four wait behind the request, two are dropped, the unsampled one is not counted"
        );
        assert_eq!(processor.shared.lock().waiting, 4);
        let ended = processor.shutdown_with_timeout(Duration::from_secs(10));
        assert!(matches!(ended, Err(OTelSdkError::InternalFailure(_))), "the hung requests failed: {ended:?}");
        processor.on_end(span(11, TraceFlags::SAMPLED));
        assert_eq!(processor.dropped(), 3, "a span after the shutdown is dropped");
        assert!(matches!(processor.force_flush(), Err(OTelSdkError::AlreadyShutdown)));
    }

    #[test]
    fn limits_follow_the_sdk_variables() {
        let limits = |vars: &[(&str, &str)]| {
            Limits::from_lookup(|name| vars.iter().find(|(var, _)| *var == name).map(|(_, value)| value.to_string()))
        };
        let defaults = Limits { schedule_delay: Duration::from_millis(5000), max_queue: 2048, max_batch: 512 };
        assert_eq!(limits(&[]), defaults);
        assert_eq!(
            limits(&[
                (env::OTEL_BSP_SCHEDULE_DELAY, " 250 "),
                (env::OTEL_BSP_MAX_QUEUE_SIZE, "100"),
                (env::OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "1000"),
            ]),
            Limits { schedule_delay: Duration::from_millis(250), max_queue: 100, max_batch: 100 },
            "a batch is at most the queue"
        );
        assert_eq!(
            limits(&[(env::OTEL_BSP_SCHEDULE_DELAY, "5s"), (env::OTEL_BSP_MAX_QUEUE_SIZE, "0")]),
            Limits { max_queue: 1, max_batch: 1, ..defaults },
            "a value that is not a number is ignored; a queue is never empty"
        );
    }
}
