//! The API as the CLI sees it: JSON over HTTP with a Bearer key; an error response becomes a
//! [`CliError`] with the API's code, message and field.

use crate::CliError;
use reqwest::{Method, StatusCode};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Client {
    pub fn new(base: &str, key: &str) -> Result<Self, CliError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| CliError::Request(e.to_string()))?;
        Ok(Client { http, base: base.trim_end_matches('/').to_string(), key: key.to_string() })
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, CliError> {
        let mut request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| CliError::Request(format!("{}: {e}", self.base)))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| CliError::Request(e.to_string()))?;
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let error = &value["error"];
        let message = error["message"].as_str().unwrap_or("request failed").to_string();
        let field = error["field"].as_str().map(str::to_string);
        Err(match status {
            StatusCode::NOT_FOUND => CliError::NotFound(message),
            StatusCode::UNAUTHORIZED => CliError::Request(format!("the API refused the key: {message}")),
            s if s.is_client_error() => CliError::Rejected { message, field },
            s => CliError::Request(format!("HTTP {s}: {message}")),
        })
    }

    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.call(Method::GET, path, None).await
    }

    /// Every job of the caller (all pages).
    pub async fn jobs(&self) -> Result<Vec<Value>, CliError> {
        self.jobs_where(&[]).await
    }

    /// Every job of the caller that the listing's `filter` parameters select (all pages).
    pub async fn jobs_where(&self, filter: &[(&str, String)]) -> Result<Vec<Value>, CliError> {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("limit", "100");
        for (name, value) in filter {
            query.append_pair(name, value);
        }
        let query = query.finish();
        let mut jobs = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let path = match &next {
                Some(n) => format!("/v1/jobs?{query}&next={n}"),
                None => format!("/v1/jobs?{query}"),
            };
            let page = self.get(&path).await?;
            jobs.extend(page["jobs"].as_array().cloned().unwrap_or_default());
            match page["next"].as_str() {
                Some(n) => next = Some(n.to_string()),
                None => return Ok(jobs),
            }
        }
    }

    /// The caller's audit records that `filter` selects, newest first, at most `limit`, read a
    /// page at a time (a page may be short: its `next` goes on).
    pub async fn audit(&self, filter: &[(&str, String)], limit: usize) -> Result<Vec<Value>, CliError> {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("limit", "50");
        for (name, value) in filter {
            query.append_pair(name, value);
        }
        let query = query.finish();
        let mut records = Vec::new();
        let mut next: Option<String> = None;
        while records.len() < limit {
            let path = match &next {
                Some(n) => format!("/v1/audit?{query}&next={n}"),
                None => format!("/v1/audit?{query}"),
            };
            let page = self.get(&path).await?;
            records.extend(page["records"].as_array().cloned().unwrap_or_default());
            match page["next"].as_str() {
                Some(n) => next = Some(n.to_string()),
                None => break,
            }
        }
        records.truncate(limit);
        Ok(records)
    }

    /// A job by name or id: as `GET /v1/jobs/{id}` shows it when given an id, as the list does
    /// when given a name.
    pub async fn find_job(&self, name_or_id: &str) -> Result<Value, CliError> {
        if let Some(job) = self.job_by_id(name_or_id).await {
            return Ok(job);
        }
        self.named(name_or_id).await
    }

    /// A job by name or id, always as `GET /v1/jobs/{id}` shows it: with what only a single job's
    /// response carries (its `warnings`, its `subscriptions`).
    pub async fn job(&self, name_or_id: &str) -> Result<Value, CliError> {
        if let Some(job) = self.job_by_id(name_or_id).await {
            return Ok(job);
        }
        let listed = self.named(name_or_id).await?;
        self.get(&format!("/v1/jobs/{}", listed["id"].as_str().unwrap_or_default())).await
    }

    /// The job whose id this is, if it is one.
    async fn job_by_id(&self, name_or_id: &str) -> Option<Value> {
        sundial_domain::job::JobId::parse(name_or_id)?;
        self.get(&format!("/v1/jobs/{name_or_id}")).await.ok()
    }

    /// The caller's job of this name, from the list.
    async fn named(&self, name: &str) -> Result<Value, CliError> {
        self.jobs()
            .await?
            .into_iter()
            .find(|j| j["name"] == name)
            .ok_or_else(|| CliError::NotFound(format!("no job named `{name}`")))
    }
}
