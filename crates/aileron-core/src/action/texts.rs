//! The texts every run of an action repeats — its name and version, and each step's connector, op
//! and pinned hash — made once and shared. A run's spans and its steps' egress hold them by
//! reference count instead of copying them, and its audit record and answer write them as they are
//! (a connector's `sha256:` text was formatted again, through `Display`, each time).

use std::sync::{Arc, OnceLock};

use super::ActionFile;

/// [`ActionFile::run_texts`].
#[derive(Debug)]
pub struct RunTexts {
    pub name: Arc<str>,
    /// The action's SemVer version as written in its record.
    pub version: Arc<str>,
    /// One per step, in the action's order.
    pub steps: Box<[StepTexts]>,
}

/// One step's connector (its FQN), op and the connector's pinned hash (`sha256:<hex>`).
#[derive(Debug)]
pub struct StepTexts {
    pub connector: Arc<str>,
    pub op: Arc<str>,
    pub hash: Arc<str>,
}

impl RunTexts {
    fn of(action: &ActionFile) -> RunTexts {
        let steps = action
            .steps
            .iter()
            .map(|step| StepTexts {
                connector: step.connector.to_string().into(),
                op: step.op.as_str().into(),
                hash: action.connector_of(step).hash.to_string().into(),
            })
            .collect();
        RunTexts { name: action.name.as_str().into(), version: action.version.to_string().into(), steps }
    }
}

/// Where an action keeps its [`RunTexts`] once made. It is not part of what the action is: equal
/// actions are equal whether or not theirs are made, and a clone makes its own (the texts are of
/// the action as it is when first asked for; a parsed action is not changed afterwards).
#[derive(Debug, Default)]
pub(super) struct RunTextsCell(OnceLock<Arc<RunTexts>>);

impl RunTextsCell {
    pub(super) fn get_or_make(&self, action: &ActionFile) -> &Arc<RunTexts> {
        self.0.get_or_init(|| Arc::new(RunTexts::of(action)))
    }
}

impl Clone for RunTextsCell {
    fn clone(&self) -> RunTextsCell {
        RunTextsCell::default()
    }
}

impl PartialEq for RunTextsCell {
    fn eq(&self, _other: &RunTextsCell) -> bool {
        true
    }
}
