//! Traces (SPEC §11, the observability seed): opt-in OpenTelemetry spans for HTTP requests,
//! action runs, capability checks, connector calls, approval waits and MCP tool calls.
//!
//! - `AILERON_OTEL_ENABLED` off (the default): no SDK is constructed; every span call returns
//!   the parent context unchanged, so an inbound `traceparent` still propagates.
//! - On: one `SdkTracerProvider` with a batch processor and the chosen exporter (`noop`: spans are
//!   built and dropped; `stdout`: JSON lines on stderr; `file`: daily JSON-lines files; `otlp`:
//!   OTLP/HTTP protobuf, configured from the SDK's `OTEL_EXPORTER_OTLP_*` variables: [`otlp`],
//!   with a processor of its own that encodes each span where it ends: [`otlp_processor`]).
//! - An unknown exporter or one that fails to build degrades to no SDK at all, with one warning;
//!   nothing in telemetry can stop the daemon from serving.
//!
//! Invariant: no span carries a secret, an argument value or a body. Span attributes are action
//! and connector identities, route templates, approval metadata and failure classes only.
//!
//! The tracer is per [`Telemetry`] value, not the process-global one, so tests build several
//! side by side from explicit [`TelemetryConfig`]s without touching the environment.

pub mod http;
pub mod json_lines;
pub mod keys;
pub mod otlp;
pub mod otlp_processor;
mod spans;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aileron_core::approval::ApprovalId;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider};
use opentelemetry::{Context, InstrumentationScope};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider};

use crate::platform::env;
use crate::platform::home::Home;
use json_lines::{DailyFiles, JsonLinesExporter, LineSink, LocalDate};

pub use spans::TracedSpan;

/// The default `service.name`.
pub const DEFAULT_SERVICE_NAME: &str = "aileron";

/// `AILERON_OTEL_EXPORTER` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExporterKind {
    Noop,
    Stdout,
    File,
    Otlp,
}

impl ExporterKind {
    pub const ALL: [ExporterKind; 4] =
        [ExporterKind::Noop, ExporterKind::Stdout, ExporterKind::File, ExporterKind::Otlp];

    pub fn as_str(self) -> &'static str {
        match self {
            ExporterKind::Noop => "noop",
            ExporterKind::Stdout => "stdout",
            ExporterKind::File => "file",
            ExporterKind::Otlp => "otlp",
        }
    }

    /// Case-insensitive; an empty value is the default, `noop`.
    pub fn parse(name: &str) -> Option<ExporterKind> {
        let name = name.trim();
        if name.is_empty() {
            return Some(ExporterKind::Noop);
        }
        ExporterKind::ALL.into_iter().find(|kind| kind.as_str().eq_ignore_ascii_case(name))
    }
}

/// Everything [`Telemetry::build`] needs, so tests never mutate the process environment.
#[derive(Clone)]
pub struct TelemetryConfig {
    pub enabled: bool,
    pub service_name: String,
    /// As configured; parsed by [`ExporterKind::parse`] at build time so an unknown name is a
    /// build error (and degrades) rather than a silent default.
    pub exporter: String,
    /// `<AILERON_TRACES_DIR or home>/traces`; `None` when `AILERON_TRACES_DIR` is explicitly empty.
    pub traces_dir: Option<PathBuf>,
    /// The full OTLP traces URL (`…/v1/traces`). `None`: from `OTEL_EXPORTER_OTLP_*` ([`otlp`]).
    pub otlp_endpoint: Option<String>,
    /// The `otlp` processor's batching (`OTEL_BSP_*`).
    pub otlp_limits: otlp_processor::Limits,
    /// The file exporter's clock.
    pub local_date: LocalDate,
}

impl TelemetryConfig {
    /// Tracing off: what [`TelemetryConfig::from_env`] gives when nothing is set.
    pub fn disabled() -> TelemetryConfig {
        TelemetryConfig {
            enabled: false,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            exporter: ExporterKind::Noop.as_str().to_string(),
            traces_dir: None,
            otlp_endpoint: None,
            otlp_limits: otlp_processor::Limits::from_lookup(|_| None),
            local_date: json_lines::system_local_date(),
        }
    }

    /// Tracing on with `exporter`, writing files under `traces_dir` (tests and the benchmark).
    pub fn enabled(exporter: &str, traces_dir: Option<PathBuf>) -> TelemetryConfig {
        TelemetryConfig { enabled: true, exporter: exporter.to_string(), traces_dir, ..TelemetryConfig::disabled() }
    }

    /// From the registry (`AILERON_OTEL_*`); `service_default` names the process when
    /// `AILERON_OTEL_SERVICE_NAME` is unset or empty.
    pub fn from_env(service_default: &str, home: &Home) -> TelemetryConfig {
        TelemetryConfig::from_lookup(service_default, home, env::get)
    }

    /// Like [`TelemetryConfig::from_env`] with `lookup` standing in for the environment.
    pub fn from_lookup(service_default: &str, home: &Home, lookup: impl Fn(&str) -> Option<String>) -> TelemetryConfig {
        let enabled = lookup(env::AILERON_OTEL_ENABLED)
            .is_some_and(|value| matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "1"));
        let service_name = lookup(env::AILERON_OTEL_SERVICE_NAME)
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| service_default.to_string());
        TelemetryConfig {
            enabled,
            service_name,
            exporter: lookup(env::AILERON_OTEL_EXPORTER).unwrap_or_default(),
            traces_dir: home.traces_dir(),
            otlp_endpoint: None,
            otlp_limits: otlp_processor::Limits::from_lookup(&lookup),
            local_date: json_lines::system_local_date(),
        }
    }
}

/// Why the configured exporter could not be built. [`init`] prints it once and runs without.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("unknown {var} `{name}`\nhint: use one of noop, stdout, file, otlp")]
    UnknownExporter { var: &'static str, name: String },
    #[error(
        "{var} is set but empty, so the file exporter has nowhere to write\nhint: unset it to write under AILERON_HOME, or point it at a directory"
    )]
    NoTracesDir { var: &'static str },
    #[error("cannot write spans under {path}: {source}\nhint: make the directory writable, or set AILERON_TRACES_DIR")]
    TracesDir { path: PathBuf, source: std::io::Error },
    /// `message` ends in its own hint.
    #[error("building the OTLP exporter: {message}")]
    Otlp { message: String },
}

/// The process's tracing: `None` inside when off (or degraded).
#[derive(Clone, Default)]
pub struct Telemetry {
    pipeline: Option<Arc<Pipeline>>,
}

struct Pipeline {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    exporter: ExporterKind,
    /// The span context of each pending approval's request, so the wait span (created at decide
    /// time) and the approved run join the requester's trace. Bounded: ids sort by request time,
    /// and the oldest are forgotten first.
    approval_parents: Mutex<BTreeMap<ApprovalId, SpanContext>>,
}

/// How many pending approvals keep their requester's span context.
const MAX_APPROVAL_PARENTS: usize = 4096;

/// Reads the registry and builds the process's tracing. Installs the W3C TraceContext
/// propagator globally whatever the configuration. Never fails: a bad exporter configuration
/// prints one warning and tracing stays off.
pub fn init(service_default: &str, home: &Home) -> Telemetry {
    install_propagator();
    let config = TelemetryConfig::from_env(service_default, home);
    Telemetry::build(&config).unwrap_or_else(|error| {
        log_line!("aileron: warning: traces are not exported: {error}");
        Telemetry::disabled()
    })
}

/// Registers the W3C TraceContext propagator as the process-global one (for any library that
/// consults it); this module's own extract/inject always use W3C directly.
pub fn install_propagator() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

impl Telemetry {
    /// No SDK at all.
    pub fn disabled() -> Telemetry {
        Telemetry { pipeline: None }
    }

    /// Builds the provider and exporter `config` describes; `Ok(disabled)` when it is off.
    pub fn build(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
        if !config.enabled {
            return Ok(Telemetry::disabled());
        }
        let kind = ExporterKind::parse(&config.exporter).ok_or_else(|| TelemetryError::UnknownExporter {
            var: env::AILERON_OTEL_EXPORTER,
            name: config.exporter.clone(),
        })?;
        let resource = Resource::builder().with_service_name(config.service_name.clone()).build();
        let builder = SdkTracerProvider::builder().with_resource(resource);
        let builder = match kind {
            // Spans are still built (and sampled), then dropped: no processor.
            ExporterKind::Noop => builder,
            ExporterKind::Stdout => builder.with_span_processor(batch(JsonLinesExporter::new(LineSink::Stderr))),
            ExporterKind::File => {
                let dir =
                    config.traces_dir.clone().ok_or(TelemetryError::NoTracesDir { var: env::AILERON_TRACES_DIR })?;
                let files = DailyFiles::open(&dir, config.local_date.clone())
                    .map_err(|source| TelemetryError::TracesDir { path: dir.clone(), source })?;
                builder.with_span_processor(batch(JsonLinesExporter::new(LineSink::DailyFiles(files))))
            }
            ExporterKind::Otlp => builder.with_span_processor(otlp_processor(config)?),
        };
        let provider = builder.build();
        let scope = InstrumentationScope::builder("aileron").with_version(crate::platform::process::VERSION).build();
        let tracer = provider.tracer_with_scope(scope);
        let pipeline = Pipeline { provider, tracer, exporter: kind, approval_parents: Mutex::new(BTreeMap::new()) };
        Ok(Telemetry { pipeline: Some(Arc::new(pipeline)) })
    }

    /// Whether an SDK is running (spans are built).
    pub fn is_enabled(&self) -> bool {
        self.pipeline.is_some()
    }

    /// The exporter in use; `None` when tracing is off.
    pub fn exporter(&self) -> Option<ExporterKind> {
        self.pipeline.as_ref().map(|pipeline| pipeline.exporter)
    }

    /// Exports every ended span now. Blocks (the batch thread does the export): call it from a
    /// blocking context or accept the wait.
    pub fn force_flush(&self) -> Result<(), String> {
        match &self.pipeline {
            Some(pipeline) => pipeline.provider.force_flush().map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Flushes and stops the exporter; later spans are dropped. Idempotent.
    pub fn shutdown(&self) {
        if let Some(pipeline) = &self.pipeline {
            // An already-shut-down provider answers an error; nothing is lost by ignoring it.
            let _ = pipeline.provider.shutdown();
        }
    }

    fn tracer(&self) -> Option<&SdkTracer> {
        self.pipeline.as_ref().map(|pipeline| &pipeline.tracer)
    }
}

fn batch<E: opentelemetry_sdk::trace::SpanExporter + 'static>(exporter: E) -> BatchSpanProcessor {
    BatchSpanProcessor::builder(exporter).build()
}

fn otlp_processor(config: &TelemetryConfig) -> Result<otlp_processor::OtlpSpanProcessor, TelemetryError> {
    let target = otlp::OtlpTarget::from_lookup("traces", config.otlp_endpoint.as_deref(), env::get)
        .map_err(|message| TelemetryError::Otlp { message })?;
    let exporter = otlp::OtlpSpanExporter::new(target).map_err(|message| TelemetryError::Otlp { message })?;
    otlp_processor::OtlpSpanProcessor::new(exporter, config.otlp_limits)
        .map_err(|message| TelemetryError::Otlp { message })
}

/// The remote parent an inbound request carries in `traceparent` (and `tracestate`); an empty
/// context when there is none or it is malformed. A request without the header (most of them)
/// costs one header lookup: the propagator, which builds its empty answer the long way, is never
/// asked.
pub fn extract(headers: &::http::HeaderMap) -> Context {
    static TRACEPARENT: ::http::HeaderName = ::http::HeaderName::from_static("traceparent");
    if !headers.contains_key(&TRACEPARENT) {
        return Context::new();
    }
    TraceContextPropagator::new().extract_with_context(&Context::new(), &HeaderExtractor(headers))
}

/// The context a `traceparent` value names; an empty context when it is malformed.
pub fn context_from_traceparent(traceparent: &str) -> Context {
    let mut headers = ::http::HeaderMap::new();
    if let Ok(value) = ::http::HeaderValue::from_str(traceparent) {
        headers.insert("traceparent", value);
    }
    extract(&headers)
}

/// Writes `traceparent` (and `tracestate`) for `cx` into outbound headers; nothing when `cx`
/// has no valid span context.
pub fn inject(cx: &Context, headers: &mut ::http::HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut HeaderInjector(headers));
}

/// The `traceparent` value for `cx`, if it has a valid span context.
pub fn traceparent(cx: &Context) -> Option<String> {
    let mut headers = ::http::HeaderMap::new();
    inject(cx, &mut headers);
    headers.get("traceparent").and_then(|value| value.to_str().ok()).map(str::to_string)
}

/// The span context a context carries, when valid.
fn valid_span_context(cx: &Context) -> Option<SpanContext> {
    let span = cx.span();
    let context = span.span_context();
    context.is_valid().then(|| context.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_names_parse_case_insensitively_and_default_to_noop() {
        let check =
            |name: &str, expected: Option<ExporterKind>| assert_eq!(ExporterKind::parse(name), expected, "{name:?}");
        check("", Some(ExporterKind::Noop));
        check("noop", Some(ExporterKind::Noop));
        check("STDOUT", Some(ExporterKind::Stdout));
        check(" file ", Some(ExporterKind::File));
        check("otlp", Some(ExporterKind::Otlp));
        check("jaeger", None);
        check("stdout,file", None);
    }

    #[test]
    fn the_registry_turns_tracing_on_only_for_true() {
        let temp = tempfile::tempdir().unwrap();
        let home = Home::at(temp.path()).unwrap();
        let check = |vars: &[(&str, &str)], enabled: bool, service: &str, exporter: &str| {
            let config = TelemetryConfig::from_lookup("aileron", &home, |name| {
                vars.iter().find(|(var, _)| *var == name).map(|(_, value)| value.to_string())
            });
            assert_eq!(
                (config.enabled, config.service_name.as_str(), config.exporter.as_str()),
                (enabled, service, exporter),
                "{vars:?}"
            );
        };
        check(&[], false, "aileron", "");
        check(&[(env::AILERON_OTEL_ENABLED, "true")], true, "aileron", "");
        check(&[(env::AILERON_OTEL_ENABLED, "TRUE")], true, "aileron", "");
        check(&[(env::AILERON_OTEL_ENABLED, "1")], true, "aileron", "");
        check(&[(env::AILERON_OTEL_ENABLED, "false")], false, "aileron", "");
        check(&[(env::AILERON_OTEL_ENABLED, "yes please")], false, "aileron", "");
        check(&[(env::AILERON_OTEL_SERVICE_NAME, "agent-box")], false, "agent-box", "");
        check(&[(env::AILERON_OTEL_SERVICE_NAME, " ")], false, "aileron", "");
        check(&[(env::AILERON_OTEL_EXPORTER, "otlp")], false, "aileron", "otlp");
    }

    #[test]
    fn bad_exporter_configurations_are_build_errors_and_off_builds_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let blocked = temp.path().join("a-file");
        std::fs::write(&blocked, "").unwrap();
        let check = |config: TelemetryConfig, expected: Result<Option<ExporterKind>, &str>| {
            let built = Telemetry::build(&config);
            match (built, expected) {
                (Ok(telemetry), Ok(kind)) => assert_eq!(telemetry.exporter(), kind),
                (Err(error), Err(fragment)) => assert!(error.to_string().contains(fragment), "{error}"),
                (Ok(telemetry), Err(fragment)) => {
                    panic!("expected an error with {fragment:?}, built {:?}", telemetry.exporter())
                }
                (Err(error), Ok(kind)) => panic!("expected {kind:?}, got {error}"),
            }
        };
        check(TelemetryConfig { exporter: "jaeger".into(), ..TelemetryConfig::disabled() }, Ok(None));
        check(TelemetryConfig::enabled("jaeger", None), Err("unknown AILERON_OTEL_EXPORTER `jaeger`"));
        check(TelemetryConfig::enabled("file", None), Err("AILERON_TRACES_DIR is set but empty"));
        check(TelemetryConfig::enabled("file", Some(blocked.join("traces"))), Err("cannot write spans under"));
        check(
            TelemetryConfig { otlp_endpoint: Some("http://[::1".into()), ..TelemetryConfig::enabled("otlp", None) },
            Err("building the OTLP exporter"),
        );
        check(TelemetryConfig::enabled("noop", None), Ok(Some(ExporterKind::Noop)));
        check(TelemetryConfig::enabled("file", Some(temp.path().join("traces"))), Ok(Some(ExporterKind::File)));
    }

    #[test]
    fn traceparents_round_trip_and_malformed_ones_are_ignored() {
        let check = |value: &str, expected: Option<&str>| {
            assert_eq!(traceparent(&context_from_traceparent(value)).as_deref(), expected, "{value:?}");
        };
        let valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        check(valid, Some(valid));
        check(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
        );
        check("00-00000000000000000000000000000000-b7ad6b7169203331-01", None);
        check("garbage", None);
        check("", None);
    }
}
