//! The API as a test calls it: the real router, in process, and the replies it gives.

use axum::Router;
use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use sundial_api::AppState;
use sundial_wiring::services::Services;
use tower::ServiceExt;

/// API keys every test deployment knows, and the owners they name.
pub const ALICE: &str = "alice-key";
pub const BOB: &str = "bob-key";
/// `SUNDIAL_API_KEYS` of every test deployment.
pub const API_KEYS: &str = "alice-key:alice,bob-key:bob,sundial-dev-key:dev";

/// A response: status, headers and JSON body (`Value::Null` when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    /// The `error.field` of an error body.
    pub fn error_field(&self) -> &str {
        self.body["error"]["field"].as_str().unwrap_or("")
    }

    pub fn etag(&self) -> &str {
        self.headers.get("etag").and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// The real router, called in process.
#[derive(Debug, Clone)]
pub struct Api {
    router: Router,
}

/// One request to build.
#[derive(Debug)]
pub struct Call<'a> {
    pub method: Method,
    pub path: String,
    pub key: Option<&'a str>,
    pub body: Option<Vec<u8>>,
    pub headers: Vec<(&'a str, String)>,
}

impl<'a> Call<'a> {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Call { method, path: path.into(), key: None, body: None, headers: vec![] }
    }
    pub fn key(mut self, key: &'a str) -> Self {
        self.key = Some(key);
        self
    }
    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(serde_json::to_vec(body).unwrap());
        self.headers.push(("content-type", "application/json".into()));
        self
    }
    pub fn raw(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.headers.push(("content-type", content_type.into()));
        self
    }
    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

impl Api {
    /// The real router over `state`.
    pub fn new(state: AppState) -> Api {
        Api { router: sundial_api::router(state) }
    }

    /// The real router over a deployed process's services.
    pub fn over(services: &Services) -> Api {
        Api::new(AppState::new(services))
    }

    /// Sends an already-built request (a decoded Lambda event, say).
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        // JSON bodies decoded; anything else (the dashboard's assets) kept as text.
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Reply { status, headers, body }
    }

    pub async fn call(&self, call: Call<'_>) -> Reply {
        let mut request = Request::builder().method(call.method).uri(call.path);
        if let Some(key) = call.key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        for (name, value) in call.headers {
            request = request.header(name, value);
        }
        self.send(request.body(Body::from(call.body.unwrap_or_default())).unwrap()).await
    }

    pub async fn get(&self, key: &str, path: &str) -> Reply {
        self.call(Call::new(Method::GET, path).key(key)).await
    }

    pub async fn post(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.call(Call::new(Method::POST, path).key(key).json(body)).await
    }

    pub async fn put(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.call(Call::new(Method::PUT, path).key(key).json(body)).await
    }

    pub async fn patch(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.call(Call::new(Method::PATCH, path).key(key).json(body)).await
    }

    pub async fn delete(&self, key: &str, path: &str) -> Reply {
        self.call(Call::new(Method::DELETE, path).key(key)).await
    }

    /// Creates a job and returns its id; panics unless the API answers 201.
    pub async fn create_job(&self, key: &str, body: &Value) -> String {
        let reply = self.post(key, "/v1/jobs", body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["id"].as_str().unwrap().to_string()
    }
}

/// A minimal valid job document named `name`.
pub fn job(name: &str) -> Value {
    serde_json::json!({
        "name": name,
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}
    })
}
