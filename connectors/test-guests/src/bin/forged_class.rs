//! Reports an error with class `hash_mismatch`, a class only the host may assign. The host must
//! not let a guest claim it (the result is `connector_runtime_error`, keeping the guest's class
//! in `details.connector_class`).

use aileron_connector_sdk::{ConnectorError, run};

fn main() {
    run(|_, _| Err(ConnectorError::new("hash_mismatch", "this connector claims its own bytes were tampered with")));
}
