//! A fake forge on loopback serving GitHub and GitLab URL layouts: release assets and raw
//! `keys/publisher.pub` files at exact (still percent-encoded) paths, plus scripted failures
//! (404, 500, redirects). Point `AILERON_GITHUB_BASE_URL` and friends at it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// What one path answers.
#[derive(Clone)]
pub enum Answer {
    Bytes(Vec<u8>),
    Status(u16),
    Redirect(String),
}

#[derive(Default)]
pub struct ForgeState {
    answers: Mutex<HashMap<String, Answer>>,
    pub requests: Mutex<Vec<String>>,
}

pub struct FakeForge {
    pub addr: SocketAddr,
    pub state: Arc<ForgeState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeForge {
    pub async fn start() -> FakeForge {
        let state = Arc::new(ForgeState::default());
        let app = Router::new().fallback(serve).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeForge { addr, state, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment that points every forge base at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        [
            "AILERON_GITHUB_BASE_URL",
            "AILERON_GITLAB_BASE_URL",
            "AILERON_GITHUB_RAW_BASE_URL",
            "AILERON_GITLAB_RAW_BASE_URL",
            "AILERON_GITHUB_API_URL",
        ]
        .into_iter()
        .map(|name| (name, self.base_url()))
        .collect()
    }

    pub fn answer(&self, path: &str, answer: Answer) {
        self.state.answers.lock().unwrap().insert(path.to_string(), answer);
    }

    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// Every path requested so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn serve(State(state): State<Arc<ForgeState>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    state.requests.lock().unwrap().push(path.clone());
    let answer = state.answers.lock().unwrap().get(&path).cloned();
    match answer {
        Some(Answer::Bytes(bytes)) => bytes.into_response(),
        Some(Answer::Status(code)) => StatusCode::from_u16(code).unwrap().into_response(),
        Some(Answer::Redirect(location)) => (StatusCode::FOUND, [("location", location)]).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
