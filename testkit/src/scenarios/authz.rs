//! The authorization matrix: every route of the API router × every kind of caller, against real
//! resources of Alice's (jobs; runs queued, waiting on a callback, ended, and of a deleted job).
//!
//! - API routes: no key, a wrong key, a malformed `Authorization`, Bob (another owner), Alice.
//!   No, wrong or malformed credentials are a 401 with `WWW-Authenticate: Bearer`; Bob on
//!   Alice's resources gets the very 404 of a resource that does not exist (never a 403 that
//!   tells it exists, never a 2xx); Bob's lists hold nothing of Alice's; Alice gets her answer.
//! - Callbacks (`heartbeat`, `complete`) take the run's own token instead of an API key: none, a
//!   wrong one, an API key or the token in the wrong place, another run's valid token (Bob's run,
//!   and another of Alice's runs), and the run's own token.
//! - Public routes (the OpenAPI document, the dashboard) answer everyone alike.
//! - Roles: Alice's viewer, operator and editor keys (made through `POST /v1/keys`) are each
//!   refused every route that needs more (403 naming the role it needs), before any of her own
//!   calls; the role each route needs is written out here, apart from the API's table.
//!
//! The routes are read from the router's source and from the served OpenAPI document, so a route
//! added without a row here fails the test. Every refused call is made before any of Alice's own,
//! and then nothing of Alice's (jobs, versions, runs) may have changed. The matrix is printed:
//! `cargo nextest run -p sundial-api --test scenarios authz --no-capture`.

use crate::api::{ALICE, BOB, Call, Reply, job};
use crate::harness::Harness;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use sundial_app::worker::Disposition;
use sundial_domain::job::{Job, JobId};
use sundial_domain::keys::Role;
use sundial_domain::run::{RunId, RunState};
use sundial_domain::target::headers;

/// The kinds of caller, in the matrix's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    NoKey,
    WrongKey,
    Malformed,
    OtherOwner,
    Owner,
}

const WHO: [Who; 5] = [Who::NoKey, Who::WrongKey, Who::Malformed, Who::OtherOwner, Who::Owner];

/// `Authorization` values that are not a usable bearer key (the first carries Alice's real key).
const MALFORMED: [&str; 4] = ["alice-key", "Basic YWxpY2Uta2V5Og==", "Bearer", "Bearer: alice-key"];

/// What a route is, and so what each caller must get.
#[derive(Debug, Clone)]
enum Kind {
    /// Needs a key; Bob's call is answered exactly as his call on `ghost` (the same route on a
    /// resource that does not exist), when given.
    Owned { ghost: Option<String> },
    /// Needs a key; Bob gets his own list, with nothing of Alice's.
    List,
    /// Needs a key; Bob passes one of Alice's page cursors: refused, nothing of Alice's shown.
    ForeignCursor,
    /// Needs a key; Bob's call creates his own job (names are per owner).
    Create,
    /// Needs a key; Bob's call creates or sets his own group or calendar of that name (names are
    /// per owner): a 200 or 201 that shows nothing of Alice's.
    PutOwn,
    /// Needs a key (any owner's): the process's counters, which name no owner, job or run.
    Metrics,
    /// No key needed: everyone gets the owner's answer.
    Public,
    /// A run callback, authenticated by the run's callback token only.
    Callback,
}

/// One row of the matrix: a route (as the router spells it) on one of Alice's resources.
#[derive(Debug, Clone)]
struct Row {
    method: Method,
    template: &'static str,
    note: &'static str,
    path: String,
    body: Option<Value>,
    headers: Vec<(&'static str, String)>,
    kind: Kind,
    /// What Alice gets.
    owner: StatusCode,
}

impl Row {
    fn new(method: Method, template: &'static str, path: String, kind: Kind, owner: StatusCode) -> Row {
        Row { method, template, note: "", path, body: None, headers: vec![], kind, owner }
    }
    fn body(mut self, body: Value) -> Row {
        self.body = Some(body);
        self
    }
    fn note(mut self, note: &'static str) -> Row {
        self.note = note;
        self
    }
    fn header(mut self, name: &'static str, value: &str) -> Row {
        self.headers.push((name, value.to_string()));
        self
    }
    fn label(&self) -> String {
        match self.note {
            "" => format!("{} {}", self.method, self.template),
            note => format!("{} {} ({note})", self.method, self.template),
        }
    }
    /// The request, without credentials.
    fn call(&self, path: &str) -> Call<'static> {
        let mut call = Call::new(self.method.clone(), path.to_string());
        if let Some(body) = &self.body {
            call = call.json(body);
        }
        for (name, value) in &self.headers {
            call = call.header(name, value.clone());
        }
        call
    }
}

/// Alice's resources (and Bob's one run) the matrix is made on.
#[derive(Debug)]
struct Resources {
    /// Alice's job every job route is called on.
    main: String,
    /// Alice's job the DELETE row deletes.
    doomed: String,
    /// Alice's run waiting on its callback (its target answered 202), and its token.
    waiting: RunId,
    token: String,
    /// Another run of Alice's waiting on its callback, and its token.
    other_token: String,
    /// Bob's run waiting on its callback, and its token.
    bobs_run: RunId,
    bobs_token: String,
    /// Alice's queued run (the cancel row), ended run (the rerun row), and a run of a deleted job.
    queued: RunId,
    ended: RunId,
    orphan: RunId,
    /// An `Idempotency-Key` Alice triggered `main` with, and a page cursor of her job list.
    idempotency_key: String,
    cursor: String,
    /// Every job of Alice's (the deleted one's id included) and of Bob's.
    alices_jobs: Vec<String>,
    bobs_jobs: Vec<String>,
    /// Alice's keys below admin, each with its secret; and the id of the key the DELETE row revokes.
    role_keys: Vec<(Role, String)>,
    doomed_key: String,
}

/// Every route of the router, on Alice's resources; `ghost_job`/`ghost_run` name nothing.
fn rows(w: &Resources, ghost_job: &str, ghost_run: &str) -> Vec<Row> {
    use Kind::*;
    use Method as M;
    use StatusCode as S;
    let owned = |ghost: String| Owned { ghost: Some(ghost) };
    let (main, run) = (&w.main, |r: &RunId| r.to_string());
    let now = chrono::Utc::now();
    let range = json!({"from": (now - chrono::Duration::minutes(11)).to_rfc3339(), "to": now.to_rfc3339()});
    let forecast = {
        let instant = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        format!("/v1/forecast?from={}&to={}", instant(now), instant(now + chrono::Duration::hours(1)))
    };
    vec![
        Row::new(M::GET, "/v1/openapi.json", "/v1/openapi.json".into(), Public, S::OK),
        Row::new(M::GET, "/", "/".into(), Public, S::TEMPORARY_REDIRECT),
        Row::new(M::GET, "/ui", "/ui".into(), Public, S::TEMPORARY_REDIRECT),
        Row::new(M::GET, "/ui/", "/ui/".into(), Public, S::OK),
        Row::new(M::GET, "/ui/index.html", "/ui/index.html".into(), Public, S::OK),
        Row::new(M::GET, "/ui/app.js", "/ui/app.js".into(), Public, S::OK),
        Row::new(M::GET, "/ui/app.css", "/ui/app.css".into(), Public, S::OK),
        Row::new(M::GET, "/v1/jobs", "/v1/jobs".into(), List, S::OK),
        Row::new(M::GET, "/v1/jobs", format!("/v1/jobs?limit=1&next={}", w.cursor), ForeignCursor, S::OK)
            .note("Alice's page cursor"),
        Row::new(M::POST, "/v1/jobs", "/v1/jobs".into(), Create, S::CREATED).body(job("made-in-matrix")),
        Row::new(
            M::GET,
            "/v1/jobs/{id}",
            format!("/v1/jobs/{main}"),
            owned(format!("/v1/jobs/{ghost_job}")),
            S::OK,
        ),
        Row::new(
            M::PATCH,
            "/v1/jobs/{id}",
            format!("/v1/jobs/{main}"),
            owned(format!("/v1/jobs/{ghost_job}")),
            S::OK,
        )
        .body(json!({"payload": {"patched": true}})),
        Row::new(
            M::DELETE,
            "/v1/jobs/{id}",
            format!("/v1/jobs/{}", w.doomed),
            owned(format!("/v1/jobs/{ghost_job}")),
            S::NO_CONTENT,
        ),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/pause",
            format!("/v1/jobs/{main}/pause"),
            owned(format!("/v1/jobs/{ghost_job}/pause")),
            S::OK,
        ),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/resume",
            format!("/v1/jobs/{main}/resume"),
            owned(format!("/v1/jobs/{ghost_job}/resume")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/preview",
            format!("/v1/jobs/{main}/preview"),
            owned(format!("/v1/jobs/{ghost_job}/preview")),
            S::OK,
        ),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/skip",
            format!("/v1/jobs/{main}/skip"),
            owned(format!("/v1/jobs/{ghost_job}/skip")),
            S::OK,
        )
        .body(json!({"next": 1})),
        Row::new(
            M::DELETE,
            "/v1/jobs/{id}/skip",
            format!("/v1/jobs/{main}/skip"),
            owned(format!("/v1/jobs/{ghost_job}/skip")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/instants",
            format!("/v1/jobs/{main}/instants"),
            owned(format!("/v1/jobs/{ghost_job}/instants")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/graph",
            format!("/v1/jobs/{main}/graph"),
            owned(format!("/v1/jobs/{ghost_job}/graph")),
            S::OK,
        ),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/trigger",
            format!("/v1/jobs/{main}/trigger"),
            owned(format!("/v1/jobs/{ghost_job}/trigger")),
            S::ACCEPTED,
        ),
        // Bob with Alice's key: his own claim (a 404), never a replay of her 202.
        Row::new(
            M::POST,
            "/v1/jobs/{id}/trigger",
            format!("/v1/jobs/{main}/trigger"),
            Owned { ghost: None },
            S::ACCEPTED,
        )
        .note("Alice's Idempotency-Key")
        .header("idempotency-key", &w.idempotency_key)
        .body(json!({})),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/backfill",
            format!("/v1/jobs/{main}/backfill"),
            owned(format!("/v1/jobs/{ghost_job}/backfill")),
            S::ACCEPTED,
        )
        .body(range),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/versions",
            format!("/v1/jobs/{main}/versions"),
            owned(format!("/v1/jobs/{ghost_job}/versions")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/versions/{version}",
            format!("/v1/jobs/{main}/versions/1"),
            owned(format!("/v1/jobs/{ghost_job}/versions/1")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/diff",
            format!("/v1/jobs/{main}/diff?from=1"),
            owned(format!("/v1/jobs/{ghost_job}/diff?from=1")),
            S::OK,
        ),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/rollback",
            format!("/v1/jobs/{main}/rollback"),
            owned(format!("/v1/jobs/{ghost_job}/rollback")),
            S::OK,
        )
        .body(json!({"version": 1})),
        Row::new(
            M::POST,
            "/v1/jobs/{id}/rotate-secret",
            format!("/v1/jobs/{main}/rotate-secret"),
            owned(format!("/v1/jobs/{ghost_job}/rotate-secret")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/jobs/{id}/runs",
            format!("/v1/jobs/{main}/runs"),
            owned(format!("/v1/jobs/{ghost_job}/runs")),
            S::OK,
        ),
        Row::new(
            M::GET,
            "/v1/runs/{id}",
            format!("/v1/runs/{}", run(&w.waiting)),
            owned(format!("/v1/runs/{ghost_run}")),
            S::OK,
        )
        .note("run waiting on its callback"),
        Row::new(
            M::GET,
            "/v1/runs/{id}",
            format!("/v1/runs/{}", run(&w.queued)),
            owned(format!("/v1/runs/{ghost_run}")),
            S::OK,
        )
        .note("queued run"),
        Row::new(
            M::GET,
            "/v1/runs/{id}",
            format!("/v1/runs/{}", run(&w.ended)),
            owned(format!("/v1/runs/{ghost_run}")),
            S::OK,
        )
        .note("ended run"),
        Row::new(
            M::GET,
            "/v1/runs/{id}",
            format!("/v1/runs/{}", run(&w.orphan)),
            owned(format!("/v1/runs/{ghost_run}")),
            S::OK,
        )
        .note("run of a deleted job"),
        Row::new(
            M::POST,
            "/v1/runs/{id}/cancel",
            format!("/v1/runs/{}/cancel", run(&w.queued)),
            owned(format!("/v1/runs/{ghost_run}/cancel")),
            S::OK,
        )
        .note("queued run"),
        Row::new(
            M::POST,
            "/v1/runs/{id}/rerun",
            format!("/v1/runs/{}/rerun", run(&w.ended)),
            owned(format!("/v1/runs/{ghost_run}/rerun")),
            S::ACCEPTED,
        )
        .note("ended run"),
        Row::new(
            M::GET,
            "/v1/runs/{id}/logs",
            format!("/v1/runs/{}/logs", run(&w.waiting)),
            owned(format!("/v1/runs/{ghost_run}/logs")),
            S::OK,
        ),
        Row::new(M::GET, "/metrics", "/metrics".into(), Metrics, S::OK),
        // Bob's forecast counts his jobs only (its peaks name jobs); Alice's counts hers.
        Row::new(M::GET, "/v1/forecast", forecast, List, S::OK),
        // Alice's trail names her jobs; Bob's, only his own changes.
        Row::new(M::GET, "/v1/audit", "/v1/audit".into(), List, S::OK),
        Row::new(
            M::GET,
            "/v1/groups/{name}",
            "/v1/groups/alices-group".into(),
            owned("/v1/groups/ghost-group".into()),
            S::OK,
        ),
        Row::new(M::PUT, "/v1/groups/{name}", "/v1/groups/put-here".into(), PutOwn, S::OK)
            .body(json!({"max_running": 3})),
        Row::new(
            M::DELETE,
            "/v1/groups/{name}",
            "/v1/groups/doomed-group".into(),
            owned("/v1/groups/ghost-group".into()),
            S::NO_CONTENT,
        ),
        Row::new(M::POST, "/v1/keys", "/v1/keys".into(), Create, S::CREATED)
            .body(json!({"name": "made-here", "role": "viewer"})),
        Row::new(M::GET, "/v1/keys", "/v1/keys".into(), List, S::OK),
        Row::new(
            M::DELETE,
            "/v1/keys/{id}",
            format!("/v1/keys/{}", w.doomed_key),
            owned(format!("/v1/keys/{}", "0".repeat(20))),
            S::NO_CONTENT,
        ),
        Row::new(M::GET, "/v1/calendars", "/v1/calendars".into(), List, S::OK),
        Row::new(
            M::GET,
            "/v1/calendars/{name}",
            "/v1/calendars/alices-calendar".into(),
            owned("/v1/calendars/ghost-calendar".into()),
            S::OK,
        ),
        Row::new(M::PUT, "/v1/calendars/{name}", "/v1/calendars/put-here".into(), PutOwn, S::OK)
            .body(json!({"holidays": ["2031-01-01"]})),
        Row::new(
            M::DELETE,
            "/v1/calendars/{name}",
            "/v1/calendars/doomed-calendar".into(),
            owned("/v1/calendars/ghost-calendar".into()),
            S::NO_CONTENT,
        ),
        Row::new(
            M::POST,
            "/v1/runs/{id}/heartbeat",
            format!("/v1/runs/{}/heartbeat", run(&w.waiting)),
            Callback,
            S::OK,
        ),
        Row::new(
            M::POST,
            "/v1/runs/{id}/complete",
            format!("/v1/runs/{}/complete", run(&w.waiting)),
            Callback,
            S::OK,
        )
        .body(json!({"succeeded": true, "output": "done"})),
    ]
}

/// `{id}`, `{run_id}` … → `{}`: the router's and the OpenAPI document's templates compared.
fn normalize(template: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in template.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            c if !in_param => out.push(c),
            _ => {}
        }
    }
    out
}

/// The (method, template) of every `.route(…)` in the router's source.
fn router_routes() -> BTreeSet<(String, String)> {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../functions/api/src/lib.rs");
    let source = std::fs::read_to_string(file).unwrap();
    for other in [".nest(", ".nest_service(", ".route_service(", ".merge(Router"] {
        assert!(!source.contains(other), "{file} uses {other}: teach router_routes() to read it");
    }
    let mut routes = BTreeSet::new();
    for chunk in source.split(".route(\"").skip(1) {
        let (path, rest) = chunk.split_once('"').unwrap();
        // The method routers: up to the parenthesis that closes `.route(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map(|(i, _)| i)
            .unwrap();
        let methods = &rest[..end];
        let mut found = false;
        for method in ["get", "post", "put", "patch", "delete", "head", "options", "trace", "any"] {
            let call = format!("{method}(");
            for (at, _) in methods.match_indices(&call) {
                let before = methods[..at].chars().next_back();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    routes.insert((method.to_ascii_uppercase(), path.to_string()));
                    found = true;
                }
            }
        }
        assert!(found, "no method router found for {path} in {file}: teach router_routes() to read it");
    }
    routes
}

/// The (method, template) of every operation of the served OpenAPI document.
fn openapi_routes(document: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete", "head", "options", "trace"]
                .contains(&method.as_str())
            {
                routes.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    routes
}

/// The id of a run from a trigger's (or rerun's) reply.
fn run_id(reply: &Reply) -> RunId {
    assert!(reply.status.is_success(), "{} {}", reply.status, reply.body);
    RunId::parse(reply.body["id"].as_str().unwrap()).unwrap()
}

/// Every job and run of the given jobs as stored, and Alice's job list, by name: what refused
/// calls must not change.
async fn snapshot<H: Harness>(deployment: &H, jobs: &[String]) -> BTreeMap<String, String> {
    let mut stored = BTreeMap::new();
    for id in jobs {
        let job: Option<Job> = deployment.stored_job(id).await;
        stored.insert(format!("job {id}"), format!("{job:?}"));
        for run in deployment.runs_of(id).await {
            stored.insert(format!("run {}", run.id()), format!("{run:?}"));
        }
    }
    let list = deployment.api().get(ALICE, "/v1/jobs?limit=100").await;
    assert_eq!(list.status, StatusCode::OK);
    let ids: Vec<&Value> = list.body["jobs"].as_array().unwrap().iter().map(|j| &j["id"]).collect();
    stored.insert("Alice's job list".into(), format!("{ids:?}"));
    stored
}

/// What differs between two snapshots.
fn changes(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    names
        .into_iter()
        .filter(|name| before.get(*name) != after.get(*name))
        .map(|name| format!("{name}:\n  before {:?}\n  after  {:?}", before.get(name), after.get(name)))
        .collect()
}

/// Builds Alice's resources: jobs, runs in each state, callback tokens; and Bob's waiting run.
async fn resources<H: Harness>(deployment: &H) -> Resources {
    let api = deployment.api();
    let target = deployment.target_url();
    let accepting = |name: &str| {
        json!({"name": name, "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target},
               "timeout_s": 600})
    };
    // Alice's concurrency groups: one named by her job `grouped`, one to set, one to delete.
    for name in ["alices-group", "put-here", "doomed-group"] {
        let put =
            Call::new(Method::PUT, format!("/v1/groups/{name}")).key(ALICE).json(&json!({"max_running": 3}));
        assert_eq!(api.call(put).await.status, StatusCode::OK, "{name}");
    }
    // Alice's calendars: one named by her job `grouped`, one to replace, one to delete.
    for name in ["alices-calendar", "put-here", "doomed-calendar"] {
        let put = Call::new(Method::PUT, format!("/v1/calendars/{name}")).key(ALICE).json(&json!({}));
        assert_eq!(api.call(put).await.status, StatusCode::CREATED, "{name}");
    }
    let mut grouped = job("grouped");
    grouped["group"] = json!("alices-group");
    grouped["schedule"]["calendar"] = json!({"name": "alices-calendar"});
    let grouped = api.create_job(ALICE, &grouped).await;
    let main = api.create_job(ALICE, &job("main")).await;
    let doomed = api.create_job(ALICE, &job("doomed")).await;
    let callbacks = api.create_job(ALICE, &accepting("callbacks")).await;
    let other = api.create_job(ALICE, &accepting("other-callbacks")).await;
    let queue = api.create_job(ALICE, &job("queue")).await;
    let ends = api.create_job(ALICE, &job("ends")).await;
    let gone = api.create_job(ALICE, &job("gone")).await;
    let bobs = api.create_job(BOB, &accepting("bobs-callbacks")).await;

    // Three runs whose targets answer 202: each waits on its callback, with a token of its own.
    deployment.answer_next(&[202, 202, 202]);
    let waiting = deployment.trigger(&callbacks).await;
    let others = deployment.trigger(&other).await;
    let bobs_run = run_id(&api.post(BOB, &format!("/v1/jobs/{bobs}/trigger"), &json!({})).await);
    let messages = deployment.take_messages().await;
    assert_eq!(messages.len(), 3, "{messages:?}");
    for message in messages {
        assert_eq!(deployment.use_cases().worker.handle(&message, "authz").await, Disposition::Delete);
    }
    let calls = deployment.target_calls().into_iter();
    let tokens: BTreeMap<String, String> = calls.map(|call| (call.run_id, call.callback_token)).collect();
    for id in [&waiting, &others, &bobs_run] {
        assert_eq!(deployment.run(id).await.state, RunState::Running, "{id}");
    }

    // A queued run, an ended (cancelled) one, and one whose job was deleted.
    let queued = deployment.trigger(&queue).await;
    let ended = deployment.trigger(&ends).await;
    let cancelled = api.post(ALICE, &format!("/v1/runs/{ended}/cancel"), &json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let orphan = deployment.trigger(&gone).await;
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{gone}")).await.status, StatusCode::NO_CONTENT);

    // Alice triggered `main` with an Idempotency-Key; her job list has more than one page.
    let idempotency_key = "alices-idempotency-key".to_string();
    let keyed = Call::new(Method::POST, format!("/v1/jobs/{main}/trigger"))
        .key(ALICE)
        .json(&json!({}))
        .header("idempotency-key", idempotency_key.clone());
    run_id(&api.call(keyed).await);
    let page = api.get(ALICE, "/v1/jobs?limit=1").await;
    let cursor = page.body["next"].as_str().expect("a next page").to_string();
    // Alice's keys of each role below admin, and one to revoke.
    let mut made = Vec::new();
    for (name, role) in [
        ("viewer-key", "viewer"),
        ("operator-key", "operator"),
        ("editor-key", "editor"),
        ("doomed-key", "viewer"),
    ] {
        let reply = api.post(ALICE, "/v1/keys", &json!({"name": name, "role": role})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{name}: {}", reply.body);
        made.push((
            reply.body["id"].as_str().unwrap().to_string(),
            reply.body["secret"].as_str().unwrap().to_string(),
        ));
    }
    let role_keys = vec![
        (Role::Viewer, made[0].1.clone()),
        (Role::Operator, made[1].1.clone()),
        (Role::Editor, made[2].1.clone()),
    ];

    Resources {
        role_keys,
        doomed_key: made[3].0.clone(),
        token: tokens[&waiting.to_string()].clone(),
        other_token: tokens[&others.to_string()].clone(),
        bobs_token: tokens[&bobs_run.to_string()].clone(),
        alices_jobs: vec![main.clone(), doomed.clone(), callbacks, other, queue, ends, gone, grouped],
        bobs_jobs: vec![bobs],
        main,
        doomed,
        waiting,
        bobs_run,
        queued,
        ended,
        orphan,
        idempotency_key,
        cursor,
    }
}

/// The calls one caller makes on a row: (what it is, the request).
fn calls(row: &Row, who: Who, w: &Resources) -> Vec<(String, Call<'static>)> {
    let plain = |what: &str, call: Call<'static>| (what.to_string(), call);
    if matches!(row.kind, Kind::Callback) {
        let token = |t: &str| row.call(&row.path).header(headers::CALLBACK_TOKEN, t.to_string());
        return match who {
            Who::NoKey => vec![plain("no token", row.call(&row.path))],
            Who::WrongKey => vec![plain("a wrong token", token("not-the-callback-token"))],
            Who::Malformed => vec![
                plain("an empty token", token("")),
                plain("Alice's API key, no token", row.call(&row.path).key(ALICE)),
                plain(
                    "the run's token as a bearer key",
                    row.call(&row.path).header("authorization", format!("Bearer {}", w.token)),
                ),
            ],
            Who::OtherOwner => vec![
                plain("Bob's run's token", token(&w.bobs_token)),
                plain("Alice's other run's token", token(&w.other_token)),
            ],
            Who::Owner => vec![plain("the run's token", token(&w.token))],
        };
    }
    match who {
        Who::NoKey => vec![plain("no Authorization", row.call(&row.path))],
        Who::WrongKey => vec![plain("Bearer wrong-key", row.call(&row.path).key("wrong-key"))],
        Who::Malformed => MALFORMED
            .iter()
            .map(|value| {
                (format!("Authorization: {value}"), row.call(&row.path).header("authorization", *value))
            })
            .collect(),
        Who::OtherOwner => vec![plain("Bob's key", row.call(&row.path).key(BOB))],
        Who::Owner => vec![plain("Alice's key", row.call(&row.path).key(ALICE))],
    }
}

/// Whether `text` names anything of Alice's.
fn names_alices(text: &str, w: &Resources) -> Option<String> {
    let runs = [&w.waiting, &w.queued, &w.ended, &w.orphan].map(|r| r.to_string());
    // Her calendars' names are hers alone (Bob's `put-here` is his own).
    let calendars =
        ["alices-calendar", "doomed-calendar", "viewer-key", "operator-key", "editor-key"].map(String::from);
    let mut named = w.alices_jobs.iter().chain(runs.iter()).chain(calendars.iter());
    named.find(|id| text.contains(id.as_str())).cloned()
}

/// The checks of one reply; `Err` says what is wrong.
async fn check<H: Harness>(
    deployment: &H,
    row: &Row,
    who: Who,
    what: &str,
    reply: &Reply,
    w: &Resources,
) -> Result<(), String> {
    let is = |status: StatusCode| {
        if reply.status == status {
            Ok(())
        } else {
            Err(format!("expected {status}, got {}: {}", reply.status, reply.body))
        }
    };
    let refused_key = || {
        is(StatusCode::UNAUTHORIZED)?;
        let challenge = reply.headers.get("www-authenticate").and_then(|v| v.to_str().ok());
        if challenge != Some("Bearer") {
            return Err(format!("401 without WWW-Authenticate: Bearer ({challenge:?})"));
        }
        match reply.error_field() {
            "Authorization" => Ok(()),
            field => Err(format!("401 with field {field:?}, not Authorization")),
        }
    };
    let text = reply.body.to_string();
    let shows_nothing_of_alices = || match names_alices(&text, w) {
        Some(id) => Err(format!("Bob's answer names Alice's {id}: {text}")),
        None => Ok(()),
    };
    let verdict = async {
        match (&row.kind, who) {
            (Kind::Public, _) => is(row.owner),
            (Kind::Callback, Who::Owner) => is(row.owner),
            (Kind::Callback, _) => {
                is(StatusCode::UNAUTHORIZED)?;
                match reply.error_field() {
                    f if f.eq_ignore_ascii_case(headers::CALLBACK_TOKEN) => Ok(()),
                    f => Err(format!("401 with field {f:?}, not {}", headers::CALLBACK_TOKEN)),
                }
            }
            (_, Who::NoKey | Who::WrongKey | Who::Malformed) => refused_key(),
            (_, Who::Owner) => is(row.owner),
            (Kind::Owned { ghost }, Who::OtherOwner) => {
                is(StatusCode::NOT_FOUND)?;
                if let Some(ghost) = ghost {
                    let nothing = deployment.api().call(row.call(ghost).key(BOB)).await;
                    if (nothing.status, &nothing.body) != (reply.status, &reply.body) {
                        return Err(format!(
                            "Bob's answer ({} {}) differs from a missing resource's ({} {})",
                            reply.status, reply.body, nothing.status, nothing.body
                        ));
                    }
                }
                Ok(())
            }
            (Kind::List | Kind::Metrics, Who::OtherOwner) => {
                is(StatusCode::OK)?;
                shows_nothing_of_alices()
            }
            (Kind::ForeignCursor, Who::OtherOwner) => {
                is(StatusCode::BAD_REQUEST)?;
                shows_nothing_of_alices()
            }
            (Kind::Create, Who::OtherOwner) => {
                is(StatusCode::CREATED)?;
                shows_nothing_of_alices()
            }
            (Kind::PutOwn, Who::OtherOwner) => {
                // Bob's own, set (a group) or made (a calendar).
                if reply.status != StatusCode::CREATED {
                    is(StatusCode::OK)?;
                }
                match reply.body["jobs"].as_array().map(Vec::len) {
                    Some(0) => shows_nothing_of_alices(),
                    _ => Err(format!("Bob's {} lists jobs: {text}", row.template)),
                }
            }
        }
    };
    verdict.await.map_err(|e| format!("{} as {what}: {e}", row.label()))
}

/// What the owner's reply must also show.
fn check_owners(row: &Row, reply: &Reply, w: &Resources) -> Result<(), String> {
    let text = reply.body.to_string();
    let fail = |why: &str| Err(format!("{} as Alice: {why}: {text}", row.label()));
    match (&row.kind, row.template, row.note) {
        (Kind::List, "/v1/forecast", _) if reply.body["total"].as_u64().unwrap_or(0) < 12 => {
            fail("her forecast lacks her jobs' runs")
        }
        (Kind::List, "/v1/forecast", _) => Ok(()),
        (Kind::List, "/v1/calendars", _) if !text.contains("alices-calendar") => {
            fail("her calendars are missing")
        }
        (Kind::List, "/v1/calendars", _) => Ok(()),
        (Kind::List, "/v1/keys", _) if !text.contains("viewer-key") || text.contains("sdl_") => {
            fail("her keys are missing, or a secret is shown")
        }
        (Kind::List, "/v1/keys", _) => Ok(()),
        (Kind::List, ..) if !text.contains(&w.main) => fail("her list lacks her job"),
        (Kind::Owned { .. }, "/v1/jobs/{id}/trigger", "Alice's Idempotency-Key")
            if reply.headers.get("idempotent-replayed").is_none() =>
        {
            fail("not a replay of her first trigger")
        }
        (Kind::Owned { .. }, "/v1/jobs/{id}/runs", _) if !text.contains(&w.main) => {
            fail("her runs are missing")
        }
        (Kind::Callback, "/v1/runs/{id}/complete", _) if reply.body["state"] != "SUCCEEDED" => {
            fail("the run did not end")
        }
        _ => Ok(()),
    }
}

/// The role each route needs, written out here apart from the API's own table.
fn needs(method: &Method, template: &str) -> Role {
    match (method.as_str(), template) {
        (_, t) if t.starts_with("/v1/keys") => Role::Admin,
        ("GET", _) => Role::Viewer,
        (
            "POST",
            "/v1/jobs/{id}/pause" | "/v1/jobs/{id}/resume" | "/v1/jobs/{id}/skip" | "/v1/jobs/{id}/trigger",
        )
        | ("POST", "/v1/jobs/{id}/backfill" | "/v1/runs/{id}/cancel" | "/v1/runs/{id}/rerun")
        | ("DELETE", "/v1/jobs/{id}/skip") => Role::Operator,
        // Everything else changes jobs, groups or calendars (a rollback among them).
        _ => Role::Editor,
    }
}

/// One cell: the statuses seen, distinct, in order.
fn cell(statuses: &[StatusCode]) -> String {
    let mut seen: Vec<u16> = Vec::new();
    for s in statuses {
        if !seen.contains(&s.as_u16()) {
            seen.push(s.as_u16());
        }
    }
    seen.iter().map(u16::to_string).collect::<Vec<_>>().join(" / ")
}

/// Every route × every kind of caller (see the module's documentation); the matrix is printed.
pub async fn the_authorization_matrix_of_every_route<H: Harness>() {
    // A local log, so that a run's logs route answers 200 rather than "see CloudWatch".
    let log = std::env::temp_dir().join(format!("sundial-authz-{}.log", JobId::generate()));
    let log = log.display().to_string();
    let deployment = H::deploy(&[("SUNDIAL_LOCAL_LOG", log.as_str())]).await;
    let w = resources(&deployment).await;
    let ghost_job = JobId::generate().to_string();
    let ghost_run = format!("{ghost_job}.{}", w.waiting.to_string().split_once('.').unwrap().1);
    let rows = rows(&w, &ghost_job, &ghost_run);
    let mut failures: Vec<String> = Vec::new();

    // Every route has a row: the router's, and the OpenAPI document's.
    let covered: BTreeSet<(String, String)> =
        rows.iter().map(|r| (r.method.to_string(), normalize(r.template))).collect();
    let router: BTreeSet<(String, String)> =
        router_routes().into_iter().map(|(m, p)| (m, normalize(&p))).collect();
    let document = deployment.api().call(Call::new(Method::GET, "/v1/openapi.json")).await.body;
    let documented: BTreeSet<(String, String)> =
        openapi_routes(&document).into_iter().map(|(m, p)| (m, normalize(&p))).collect();
    assert!(
        router.len() >= 20 && router.contains(&("POST".into(), "/v1/runs/{}/complete".into())),
        "{router:?}"
    );
    for (method, path) in router.difference(&covered) {
        failures.push(format!("{method} {path} is routed but has no row in the matrix"));
    }
    for (method, path) in documented.difference(&covered) {
        failures.push(format!("{method} {path} is in the OpenAPI document but has no row in the matrix"));
    }
    for (method, path) in documented.difference(&router) {
        failures.push(format!("{method} {path} is in the OpenAPI document but not routed"));
    }
    for (method, path) in covered.difference(&router) {
        failures.push(format!("the matrix has a row for {method} {path}, which is not routed"));
    }

    // Every refused call first (and Bob's), then: nothing of Alice's changed.
    let mut everyone = w.alices_jobs.clone();
    everyone.extend(w.bobs_jobs.iter().cloned());
    let before = snapshot(&deployment, &everyone).await;
    let mut seen: Vec<BTreeMap<usize, Vec<StatusCode>>> = vec![BTreeMap::new(); rows.len()];
    for (i, row) in rows.iter().enumerate() {
        for (column, who) in WHO.iter().enumerate().filter(|(_, who)| **who != Who::Owner) {
            for (what, call) in calls(row, *who, &w) {
                let reply = deployment.api().call(call).await;
                seen[i].entry(column).or_default().push(reply.status);
                if let Err(e) = check(&deployment, row, *who, &what, &reply, &w).await {
                    failures.push(e);
                }
            }
        }
    }
    // Alice's keys below a route's role are refused it (403 naming the role), and change nothing.
    let mut refused_by_role = 0;
    for row in rows.iter().filter(|r| !matches!(r.kind, Kind::Public | Kind::Callback)) {
        let needed = needs(&row.method, row.template);
        for (role, secret) in w.role_keys.iter().filter(|(role, _)| *role < needed) {
            for (what, call) in calls(row, Who::Owner, &w) {
                let call = Call { key: None, ..call }.header("authorization", format!("Bearer {secret}"));
                let reply = deployment.api().call(call).await;
                let message = reply.body["error"]["message"].as_str().unwrap_or_default();
                let says = message.contains(&format!("needs the {} role", needed.as_str()));
                if (reply.status, reply.error_field(), says) != (StatusCode::FORBIDDEN, "role", true) {
                    failures.push(format!(
                        "{} as Alice's {} key ({what}): {} {}",
                        row.label(),
                        role.as_str(),
                        reply.status,
                        reply.body
                    ));
                }
                refused_by_role += 1;
            }
        }
    }
    assert!(refused_by_role >= 30, "{refused_by_role}");
    // The waiting run's token on Bob's run is refused too.
    let crossed = deployment
        .api()
        .call(
            Call::new(Method::POST, format!("/v1/runs/{}/heartbeat", w.bobs_run))
                .header(headers::CALLBACK_TOKEN, w.token.clone()),
        )
        .await;
    if crossed.status != StatusCode::UNAUTHORIZED {
        failures.push(format!("Alice's run's token on Bob's run: {} {}", crossed.status, crossed.body));
    }
    let after = snapshot(&deployment, &everyone).await;
    for change in changes(&before, &after) {
        failures.push(format!("a refused call changed {change}"));
    }
    assert_eq!(deployment.run(&w.waiting).await.state, RunState::Running);

    // Then Alice's own calls, in the rows' order (pause before resume, heartbeat before complete).
    for (i, row) in rows.iter().enumerate() {
        for (what, call) in calls(row, Who::Owner, &w) {
            let reply = deployment.api().call(call).await;
            seen[i].entry(4).or_default().push(reply.status);
            let checked = check(&deployment, row, Who::Owner, &what, &reply, &w).await;
            if let Err(e) = checked.and_then(|()| check_owners(row, &reply, &w)) {
                failures.push(e);
            }
        }
    }

    let mut table = String::from(
        "| route | none | wrong | malformed | other owner | owner |\n|---|---|---|---|---|---|\n",
    );
    for (row, statuses) in rows.iter().zip(&seen) {
        let cells: Vec<String> =
            (0..WHO.len()).map(|c| cell(statuses.get(&c).map_or(&[][..], Vec::as_slice))).collect();
        table.push_str(&format!("| `{}` | {} |\n", row.label(), cells.join(" | ")));
    }
    println!("\n{table}");
    println!(
        "API routes: none = no Authorization; wrong = `Bearer wrong-key`; malformed = each of {MALFORMED:?}; \
         other owner = Bob's key; owner = Alice's key.\n\
         Callbacks: none = no {token}; wrong = a wrong token; malformed = an empty token, Alice's API key \
         without a token, the run's token as a bearer key; other owner = Bob's run's valid token, then \
         another of Alice's runs' valid token; owner = the run's own token.",
        token = headers::CALLBACK_TOKEN
    );
    let _ = std::fs::remove_file(&log);
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! authz_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => authz { the_authorization_matrix_of_every_route });
    };
}
