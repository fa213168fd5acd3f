//! The spawn hook of a step (SPEC §5): the gate of `aileron_core::policy`, the credential into the
//! child's environment only, the confined run by [`crate::dataplane::spawn::Spawner`], then the `spawn` audit record and
//! the `aileron.connector.spawn` span. Refusals are `spawn` records too.

use std::time::Instant;

use aileron_core::policy::{self, SpawnPlan};
use aileron_core::vocabulary::records::SpawnedProgram;
use aileron_core::vocabulary::{EventType, keys};
use aileron_core::{Boundary, Failure};
use aileron_sandbox::{GuestSpawn, SpawnOutput};

use super::StepEgress;
use crate::dataplane::spawn::proxy::ProxyContext;
use crate::dataplane::spawn::{CONFINEMENT, Finished};
use crate::stores::bindings::Injection;

/// A plan that passed the gate, with where it came from.
struct Gated {
    plan: SpawnPlan,
    /// `spawn` with an envelope (credential keys only as listed) or `spawn_op` (all of them, when
    /// the action declares the credential kind).
    from_envelope: bool,
}

impl StepEgress {
    /// The spawn hook: gate, credential, confined run, audit. `deadline` is the step's.
    pub(crate) async fn spawn_program(&self, request: GuestSpawn, deadline: Instant) -> Result<SpawnOutput, Failure> {
        super::Admission::before_effect(self.admission.as_ref()).await?;
        let started = Instant::now();
        let requested = match &request {
            GuestSpawn::Envelope(envelope) => {
                format!("spawn:{}", envelope.program.chars().take(256).collect::<String>())
            }
            GuestSpawn::Operation { op, .. } => format!("spawn:{}", op.chars().take(64).collect::<String>()),
        };
        let span = self.services.telemetry.connector_spawn(&self.span, &self.connector_fqn, &requested);
        let outcome = self.gate_and_run(request, deadline, started).await;
        match &outcome {
            Ok((gated, finished)) => {
                span.set_attribute(opentelemetry::KeyValue::new(keys::SPAWN_OP, gated.plan.op.clone()));
                span.set_attribute(opentelemetry::KeyValue::new(keys::SPAWN_PROGRAM, gated.plan.program.clone()));
                span.set_attribute(opentelemetry::KeyValue::new(keys::SPAWN_EXIT_CODE, i64::from(finished.exit_code)));
                span.end();
            }
            Err(failure) => span.fail(failure, Some(&self.audit_id)),
        }
        let (_, finished) = outcome?;
        let limits = self.manifest.spawn.as_ref().map(|spawn| spawn.limits).unwrap_or_default();
        Ok(SpawnOutput {
            exit_code: finished.exit_code,
            stdout: finished.stdout.for_guest(limits.max_stdout_bytes),
            stderr: finished.stderr.for_guest(limits.max_stderr_bytes),
        })
    }

    async fn gate_and_run(
        &self,
        request: GuestSpawn,
        deadline: Instant,
        started: Instant,
    ) -> Result<(Gated, Finished), Failure> {
        let gated = match self.gate(request) {
            Ok(gated) => gated,
            Err(failure) => return Err(self.spawn_refused(None, failure).await),
        };
        let finished = match self.run_gated(&gated, deadline).await {
            Ok(finished) => finished,
            Err(failure) => return Err(self.spawn_refused(Some(&gated.plan), failure).await),
        };
        let (stdout, stderr) = (finished.stdout.summary(), finished.stderr.summary());
        let ran = SpawnedProgram {
            exit_code: Some(finished.exit_code),
            signal: finished.signal,
            duration_ms: Some(started.elapsed().as_millis() as u64),
            stdout_sha256: Some(stdout.0),
            stdout_bytes: Some(stdout.1),
            stdout_truncated: Some(stdout.2),
            stderr_sha256: Some(stderr.0),
            stderr_bytes: Some(stderr.1),
            stderr_truncated: Some(stderr.2),
            confinement: Some(CONFINEMENT),
            ..spawned(Some(&gated.plan))
        };
        let mut payload = self.step_payload();
        payload.extend(ran.into_payload());
        // Fail closed: output of a run that cannot be recorded is withheld.
        self.audit(EventType::Spawn, payload).await?;
        Ok((gated, finished))
    }

    fn gate(&self, request: GuestSpawn) -> Result<Gated, Failure> {
        match request {
            GuestSpawn::Envelope(envelope) => {
                Ok(Gated { plan: policy::plan_envelope(&self.manifest, &self.subset, envelope)?, from_envelope: true })
            }
            GuestSpawn::Operation { op, args } => {
                let values = policy::spawn_args(&args).map_err(|problem| {
                    Failure::capability_denied(Boundary::Sandbox, problem)
                        .with_detail("requested", format!("spawn:{op}"))
                        .with_detail("boundary_detail", "envelope")
                })?;
                Ok(Gated {
                    plan: policy::plan_operation(&self.manifest, &self.subset, &op, &values)?,
                    from_envelope: false,
                })
            }
        }
    }

    /// The credential for the child's environment, when this spawn is to carry one.
    async fn credential_env(&self, gated: &Gated) -> Result<Vec<(String, crate::platform::secret::Secret)>, Failure> {
        let spawn = self.manifest.spawn.as_ref().expect("the gate found [capabilities.spawn]");
        let Some(kind) = self.manifest.credential_kind() else {
            return Ok(Vec::new());
        };
        let keys = if gated.from_envelope {
            gated.plan.credential_env_keys.clone()
        } else if self.subset.declares_credential(kind) {
            spawn.credential_env_keys.clone()
        } else {
            Vec::new()
        };
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        policy::check_credential(&self.manifest, &self.subset, kind.as_str())?;
        let resolved = self.services.credentials.resolve(&self.connector_fqn, kind, self.services.oauth.as_ref()).await;
        self.audit_binding_events().await?;
        let resolved = resolved?;
        let value = match &resolved.injection {
            Injection::Token(secret) => secret.clone(),
            Injection::Aws(_) => {
                return Err(Failure::capability_denied(
                    Boundary::Sandbox,
                    "aws_sigv4 credentials are signed host-side and never placed in a program's environment",
                )
                .with_detail("requested", format!("{kind}")));
            }
        };
        self.record_binding_use(&resolved.binding);
        Ok(keys.into_iter().map(|key| (key, value.clone())).collect())
    }

    async fn run_gated(&self, gated: &Gated, deadline: Instant) -> Result<Finished, Failure> {
        let credential = self.credential_env(gated).await?;
        let proxy = Some(self.proxy_context(&gated.plan));
        let run = self.services.spawner.run(&self.manifest, &self.subset, &gated.plan, credential, proxy, deadline);
        self.waited.during(run).await
    }

    async fn spawn_refused(&self, plan: Option<&SpawnPlan>, failure: Failure) -> Failure {
        let refused = SpawnedProgram { reject_reason: Some(failure.class.as_str().to_string()), ..spawned(plan) };
        let mut payload = self.step_payload();
        payload.extend(refused.into_payload());
        payload.extend(failure.audit_payload());
        match self.audit(EventType::Spawn, payload).await {
            Ok(()) => failure,
            Err(audit_failure) => audit_failure,
        }
    }

    fn proxy_context(&self, plan: &SpawnPlan) -> ProxyContext {
        ProxyContext {
            manifest: self.manifest.clone(),
            subset: self.subset.clone(),
            audit: self.services.audit.clone(),
            actor: self.caller.actor.clone(),
            session_id: self.caller.session_id.clone(),
            base_payload: {
                let mut base = self.step_payload();
                base.extend(spawned(Some(plan)).into_payload());
                base
            },
        }
    }
}

/// What a `spawn` record says of the plan (nothing when the call was refused before one existed):
/// the program, op and argv shape, and the environment's keys (never its values).
fn spawned(plan: Option<&SpawnPlan>) -> SpawnedProgram {
    let Some(plan) = plan else { return SpawnedProgram::default() };
    let env_keys =
        plan.env.iter().map(|(key, _)| key.clone()).chain(plan.credential_env_keys.iter().cloned()).collect();
    SpawnedProgram {
        program: Some(plan.program.clone()),
        op: Some(plan.op.clone()),
        argv_shape: Some(plan.shape.clone()),
        env_keys: Some(env_keys),
        ..SpawnedProgram::default()
    }
}
