//! The admin HTTP API: health, readiness, `/metrics`, and task, offer and
//! stage queries over the shards this instance owns.
//!
//! The runtime owns the shards on its own thread and the server never
//! touches them: it sends a [`Query`] with a one-shot reply channel and waits
//! at most [`QUERY_TIMEOUT`], so a stuck or restoring runtime makes queries
//! fail with 503 instead of hanging scrapes and operators.
//!
//! | Route              | Answer                                                     |
//! |--------------------|------------------------------------------------------------|
//! | `GET /healthz`     | 200 `ok` while the process serves requests                 |
//! | `GET /readyz`      | 200 or 503, JSON [`Report`]: why not, which shards         |
//! | `GET /metrics`     | Prometheus text exposition                                 |
//! | `GET /tasks`       | JSON array of [`crate::engine::TaskSummary`] by id, a page at a time: `?state=running&pool=etl&limit=1000&after=ID`; `X-Total-Count`, `Link` to the next page |
//! | `GET /tasks/{id}`  | JSON [`TaskView`], 404 when another instance owns the task |
//! | `GET /offers/{id}` | JSON [`OfferView`], 404 when this instance does not have it |
//! | `GET /stages`      | JSON array of [`StageStats`] summed over the owned shards |
//! | `GET /processes/{name}/{key}` | JSON [`KeyView`]: context, active instance, waiting launches; 404 when not here |
//! | `GET /jobs`        | JSON array of [`JobStats`] summed over the owned shards |
//! | `GET /runs`        | JSON [`Runs`]: tasks, stage slots and process instances by criteria (`?kind=process&name=pay*&key=u1?&state=failed&error=node&since=…&until=…&step=send_tx&limit=50`), as `reactor search` finds them, over the owned shards |
//!
//! Errors are JSON `{"error": "..."}`. Connections are bounded in number
//! and time ([`server`]), so that slow or idle clients cannot keep
//! `/healthz` and `/metrics` from answering.

pub mod server;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use crate::engine::{JobStats, KeyView, OfferView, StageStats, TaskFilter, TaskPage, TaskView};
use crate::runtime::health::{Readiness, Report};
use crate::task::TaskState;

/// Where the admin API listens unless `--admin` says otherwise.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// How long a query waits for the runtime (queueing included).
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Content type of the Prometheus text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// How often the metrics recorder's upkeep runs: it is installed without
/// the exporter's own upkeep task, and draining histograms this often keeps
/// their buffers small between scrapes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// A question for the runtime that owns the shards.
#[derive(Debug)]
pub enum Query {
    /// A page of the tasks of the shards this instance owns.
    Tasks {
        /// Which tasks.
        filter: TaskFilter,
        /// Most tasks in the page.
        limit: usize,
        /// Where to answer.
        reply: oneshot::Sender<TaskPage>,
    },
    /// One task's state and explain, if owned here.
    Task {
        /// Task id.
        id: String,
        /// Where to answer; `None` when no owned shard has the task.
        reply: oneshot::Sender<Option<TaskView>>,
    },
    /// One offer with its stage slots, if owned here.
    Offer {
        /// Offer id.
        id: String,
        /// Where to answer; `None` when the owning shard is not here or has
        /// no such offer.
        reply: oneshot::Sender<Option<OfferView>>,
    },
    /// Every configured stage's queue depths and running runs, summed over
    /// the shards this instance owns.
    Stages {
        /// Where to answer.
        reply: oneshot::Sender<Vec<StageStats>>,
    },
    /// A process key's record (context, active instance, waiting launches),
    /// if the shard that owns the key is here.
    Process {
        /// The process (a submitted job's: the job).
        process: String,
        /// The key.
        key: String,
        /// Where to answer.
        reply: oneshot::Sender<Option<KeyView>>,
    },
    /// Every job's queue depths and running steps, summed over the shards
    /// this instance owns.
    Jobs {
        /// Where to answer.
        reply: oneshot::Sender<Vec<JobStats>>,
    },
    /// Runs by criteria over the shards this instance owns, as a `search`
    /// command finds them.
    Runs {
        /// Which.
        criteria: crate::ops::Criteria,
        /// Most matches per shard.
        limit: usize,
        /// Where to answer.
        reply: oneshot::Sender<Runs>,
    },
}

/// What `GET /runs` answers: per owned shard, its count and first matches.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Runs {
    /// Matches over every owned shard.
    pub total: u64,
    /// The shards asked.
    pub partitions: Vec<u32>,
    /// The first matches of each shard, with its partition.
    pub matches: Vec<RunMatch>,
}

/// One match of `GET /runs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunMatch {
    /// The shard.
    pub partition: u32,
    /// The item.
    #[serde(flatten)]
    pub item: crate::ops::Match,
}

/// What the handlers share.
#[derive(Clone)]
pub struct AdminState {
    /// Readiness, set by the runtime and its broker probe.
    pub readiness: Arc<Readiness>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The stalest tasks' ages, appended to `/metrics`.
    pub task_ages: Arc<crate::metrics::TaskAges>,
    /// Queries to the runtime.
    pub queries: mpsc::Sender<Query>,
}

/// Why a request failed; each variant maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No shard of this instance has the task (it may live on another).
    #[error("task {0} is not owned by this instance")]
    NotOwned(String),
    /// No shard of this instance has the offer: another instance owns its
    /// partition, or it does not exist.
    #[error("offer {0} is not held by this instance (another instance owns its partition, or it does not exist)")]
    OfferNotFound(String),
    /// No shard here has a record of this process and key: it is owned
    /// elsewhere, or has none (never launched, or dropped when finished).
    #[error("no record of process `{process}` for key `{key}` here")]
    KeyNotFound {
        /// The process.
        process: String,
        /// The key.
        key: String,
    },
    /// `?state=` names no task state.
    #[error("unknown state {0:?}, expected one of: {states}", states = state_names())]
    BadState(String),
    /// A query parameter is not what it must be.
    #[error("{0}")]
    BadQuery(String),
    /// No such route.
    #[error("no route for {0}")]
    NoRoute(String),
    /// The runtime did not answer in time (busy, restoring, or stuck).
    #[error("the runtime did not answer within {}s", .0.as_secs())]
    Timeout(Duration),
    /// The runtime stopped listening for queries.
    #[error("the runtime is not running")]
    RuntimeGone,
}

impl Error {
    /// The HTTP status of the error.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::NotOwned(_)
            | Error::OfferNotFound(_)
            | Error::KeyNotFound { .. }
            | Error::NoRoute(_) => StatusCode::NOT_FOUND,
            Error::BadState(_) | Error::BadQuery(_) => StatusCode::BAD_REQUEST,
            Error::Timeout(_) | Error::RuntimeGone => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Whether asking again later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.status() == StatusCode::SERVICE_UNAVAILABLE
    }
}

fn state_names() -> String {
    let names: Vec<_> = <TaskState as strum::VariantArray>::VARIANTS
        .iter()
        .map(|s| s.as_str())
        .collect();
    names.join(", ")
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), Json(body)).into_response()
    }
}

/// The admin routes over `state`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/tasks", get(tasks))
        .route("/tasks/{id}", get(task))
        // Offer ids may contain `/`: the rest of the path is the id.
        .route("/offers/{*id}", get(offer))
        .route("/stages", get(stages))
        // Keys may contain `/`: the rest of the path is the key.
        .route("/processes/{process}/{*key}", get(process))
        .route("/jobs", get(jobs))
        .route("/runs", get(runs))
        .fallback(|uri: Uri| async move { Error::NoRoute(uri.path().to_string()) })
        .with_state(state)
}

/// Serves the admin API on `listener` until `shutdown` completes, with the
/// default connection limits ([`server::Limits`]), running the metrics
/// recorder's upkeep meanwhile.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "admin API listening");
    let handle = state.metrics.clone();
    let upkeep = tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    });
    let served = server::serve(listener, router(state), server::Limits::default(), shutdown).await;
    upkeep.abort();
    served
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AdminState>) -> (StatusCode, Json<Report>) {
    let report = state.readiness.report();
    let status = if report.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report))
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut text = state.metrics.render();
    state.task_ages.render_into(&mut text);
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text)
}

/// Tasks in a page of `GET /tasks` unless `limit` says otherwise.
pub const TASKS_PAGE: usize = 1_000;
/// Most tasks in a page of `GET /tasks`: the runtime pauses its shards
/// while it builds one.
pub const MAX_TASKS_PAGE: usize = 10_000;

/// Filters of `GET /tasks`.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
struct TasksFilter {
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<String>,
}

/// A page of the owned tasks by id: the JSON array of the first `limit`
/// matching ones after `after`, with `X-Total-Count` (all that match,
/// whatever `after`) and, when more follow, a `Link` to the next page
/// (`rel="next"`, the same query after this page's last task).
async fn tasks(
    State(state): State<AdminState>,
    UrlQuery(mut filter): UrlQuery<TasksFilter>,
) -> Result<Response, Error> {
    // Validate before asking, so a typo does not cost a runtime round trip.
    let wanted = match &filter.state {
        Some(name) => Some(
            <TaskState as strum::VariantArray>::VARIANTS
                .iter()
                .copied()
                .find(|s| s.as_str() == name)
                .ok_or_else(|| Error::BadState(name.clone()))?,
        ),
        None => None,
    };
    let limit = filter.limit.unwrap_or(TASKS_PAGE);
    if !(1..=MAX_TASKS_PAGE).contains(&limit) {
        return Err(Error::BadQuery(format!(
            "field `limit`: must be 1 to {MAX_TASKS_PAGE}"
        )));
    }
    let asked = TaskFilter {
        state: wanted,
        pool: filter.pool.clone(),
        after: filter.after.clone(),
    };
    let page = ask(&state.queries, |reply| Query::Tasks {
        filter: asked,
        limit,
        reply,
    })
    .await?;
    let mut headers = HeaderMap::new();
    headers.insert("x-total-count", HeaderValue::from(page.total));
    if let (true, Some(last)) = (page.more(), page.tasks.last()) {
        filter.after = Some(last.id.clone());
        let next = serde_urlencoded::to_string(&filter)
            .ok()
            .and_then(|q| HeaderValue::try_from(format!("</tasks?{q}>; rel=\"next\"")).ok());
        if let Some(next) = next {
            headers.insert(header::LINK, next);
        }
    }
    Ok((headers, Json(page.tasks)).into_response())
}

async fn task(
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, Error> {
    let asked = id.clone();
    ask(&state.queries, |reply| Query::Task { id: asked, reply })
        .await?
        .map(Json)
        .ok_or(Error::NotOwned(id))
}

async fn offer(
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<OfferView>, Error> {
    let asked = id.clone();
    ask(&state.queries, |reply| Query::Offer { id: asked, reply })
        .await?
        .map(Json)
        .ok_or(Error::OfferNotFound(id))
}

async fn process(
    State(state): State<AdminState>,
    Path((process, key)): Path<(String, String)>,
) -> Result<Json<KeyView>, Error> {
    let asked = (process.clone(), key.clone());
    ask(&state.queries, |reply| Query::Process {
        process: asked.0,
        key: asked.1,
        reply,
    })
    .await?
    .map(Json)
    .ok_or(Error::KeyNotFound { process, key })
}

/// Criteria of `GET /runs`, as `reactor search` takes them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsFilter {
    kind: Option<String>,
    name: Option<String>,
    key: Option<String>,
    state: Option<String>,
    error: Option<String>,
    since: Option<jiff::Timestamp>,
    until: Option<jiff::Timestamp>,
    step: Option<String>,
    limit: Option<u32>,
}

async fn runs(
    State(state): State<AdminState>,
    UrlQuery(filter): UrlQuery<RunsFilter>,
) -> Result<Json<Runs>, Error> {
    let kind = filter
        .kind
        .map(|k| {
            k.parse::<crate::ops::Kind>()
                .map_err(|_| Error::BadQuery(format!("kind `{k}`: one of task, stage, process")))
        })
        .transpose()?;
    // The rules a `search` command passes, so both refuse alike.
    let search =
        crate::codec::validate::command(crate::engine::Command::Search(crate::ops::Search {
            id: "admin".to_string(),
            criteria: crate::ops::Criteria {
                kind,
                name: filter.name,
                key: filter.key,
                state: filter.state,
                error: filter.error,
                since: filter.since,
                until: filter.until,
                step: filter.step,
            },
            limit: filter.limit,
        }))
        .map_err(|e| Error::BadQuery(e.to_string()))?;
    let crate::engine::Command::Search(search) = search else {
        return Err(Error::BadQuery("not a search".to_string()));
    };
    let limit = search.limit.unwrap_or(crate::ops::DEFAULT_SEARCH_LIMIT) as usize;
    Ok(Json(
        ask(&state.queries, |reply| Query::Runs {
            criteria: search.criteria,
            limit,
            reply,
        })
        .await?,
    ))
}

async fn jobs(State(state): State<AdminState>) -> Result<Json<Vec<JobStats>>, Error> {
    Ok(Json(
        ask(&state.queries, |reply| Query::Jobs { reply }).await?,
    ))
}

async fn stages(State(state): State<AdminState>) -> Result<Json<Vec<StageStats>>, Error> {
    Ok(Json(
        ask(&state.queries, |reply| Query::Stages { reply }).await?,
    ))
}

/// Sends a query and waits for its answer, both within [`QUERY_TIMEOUT`]:
/// a full channel means a busy runtime, which deserves the same 503.
async fn ask<T>(
    queries: &mpsc::Sender<Query>,
    query: impl FnOnce(oneshot::Sender<T>) -> Query,
) -> Result<T, Error> {
    let (reply, answer) = oneshot::channel();
    let exchange = async {
        queries
            .send(query(reply))
            .await
            .map_err(|_| Error::RuntimeGone)?;
        answer.await.map_err(|_| Error::RuntimeGone)
    };
    tokio::time::timeout(QUERY_TIMEOUT, exchange)
        .await
        .map_err(|_| Error::Timeout(QUERY_TIMEOUT))?
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    use jiff::Timestamp;
    use serde_json::Value;

    use super::*;
    use crate::config;
    use crate::engine::Engine;
    use crate::runtime::health::Phase;

    const CONFIG: &str = r#"
[[pool]]
name = "etl"
max_running = 1

[[task]]
id = "load"
pool = "etl"
trigger = "delta(raw/a, 1min)"
timeout = "10m"

[[task]]
id = "report"
trigger = "delta(dwh/b, 1min)"

[[stage]]
name = "price"
when = "offer.status == 'active'"
max_parallelism = 4

[[job]]
name = "send"
max_running = 1

[[process]]
name = "payout"
steps = ["send"]
"#;

    struct Reply {
        status: u16,
        content_type: Option<String>,
        head: String,
        body: String,
    }

    impl Reply {
        /// The value of header `name`, if sent.
        fn header(&self, name: &str) -> Option<&str> {
            self.head.lines().skip(1).find_map(|l| {
                let (n, value) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| value.trim())
            })
        }

        fn json(&self) -> Value {
            serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
        }
    }

    /// One HTTP/1.1 GET over a fresh connection; `Connection: close` lets the
    /// body run to end of stream.
    async fn get(addr: SocketAddr, path: &str) -> Reply {
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let raw = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut raw = String::new();
            stream.read_to_string(&mut raw).unwrap();
            raw
        })
        .await
        .unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
        let mut lines = head.lines();
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        let content_type = lines.find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        });
        assert!(
            !head.to_ascii_lowercase().contains("chunked"),
            "chunked replies are not decoded here: {head}"
        );
        Reply {
            status: status.parse().unwrap(),
            content_type,
            head: head.to_string(),
            body: body.to_string(),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// An engine with `load` running and `report` idle, answering queries on
    /// its own thread as the real runtime does.
    fn runtime() -> mpsc::Sender<Query> {
        let loaded = config::parse(CONFIG, "t.toml").unwrap();
        let mut engine = Engine::new(&loaded.config);
        let now = ts("2024-05-01T10:00:00Z");
        engine
            .apply_ctl("raw", "a", ts("2024-05-01T09:00:00Z"), now)
            .unwrap();
        let body = serde_json::json!({"status": "active", "price": 100});
        let change = crate::offer::OfferChange {
            offer_id: "shop/o1".to_string(),
            change: crate::offer::Change::Body(body.as_object().unwrap().clone()),
            source: None,
        };
        engine
            .apply(crate::engine::Input::Offer(change), now)
            .unwrap();
        for key in ["u/1", "u2"] {
            let launch = crate::engine::Command::Launch {
                process: "payout".into(),
                keys: vec![key.into()],
                params: serde_json::json!({"amount": 5})
                    .as_object()
                    .unwrap()
                    .clone(),
                position: crate::process::Position::Back,
                reset: false,
                source: None,
            };
            engine
                .apply(crate::engine::Input::Command(launch), now)
                .unwrap();
        }
        let (queries, mut rx) = mpsc::channel(8);
        std::thread::spawn(move || {
            while let Some(query) = rx.blocking_recv() {
                match query {
                    Query::Tasks {
                        filter,
                        limit,
                        reply,
                    } => {
                        let _ = reply.send(engine.task_page(&filter, limit));
                    }
                    Query::Task { id, reply } => {
                        let _ = reply.send(engine.task_view(&id, now));
                    }
                    Query::Offer { id, reply } => {
                        let _ = reply.send(engine.offer_view(&id));
                    }
                    Query::Stages { reply } => {
                        let _ = reply.send(engine.stage_stats());
                    }
                    Query::Process {
                        process,
                        key,
                        reply,
                    } => {
                        let _ = reply.send(engine.process_view(&process, &key));
                    }
                    Query::Jobs { reply } => {
                        let _ = reply.send(engine.job_stats());
                    }
                    Query::Runs {
                        criteria,
                        limit,
                        reply,
                    } => {
                        let (total, matches) = engine.find(&criteria, limit);
                        let _ = reply.send(Runs {
                            total,
                            partitions: vec![0],
                            matches: matches
                                .into_iter()
                                .map(|item| RunMatch { partition: 0, item })
                                .collect(),
                        });
                    }
                }
            }
        });
        queries
    }

    struct Server {
        addr: SocketAddr,
        readiness: Arc<Readiness>,
        task_ages: Arc<crate::metrics::TaskAges>,
        stop: oneshot::Sender<()>,
        served: tokio::task::JoinHandle<io::Result<()>>,
    }

    async fn start(queries: mpsc::Sender<Query>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let readiness = Readiness::new();
        let task_ages = crate::metrics::TaskAges::new(2);
        let state = AdminState {
            readiness: Arc::clone(&readiness),
            metrics: crate::metrics::install().unwrap(),
            task_ages: Arc::clone(&task_ages),
            queries,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(serve(listener, state, async move {
            let _ = stopped.await;
        }));
        Server {
            addr,
            readiness,
            task_ages,
            stop,
            served,
        }
    }

    impl Server {
        async fn shutdown(self) {
            self.stop.send(()).unwrap();
            self.served.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn health_and_readiness() {
        let server = start(runtime()).await;
        let health = get(server.addr, "/healthz").await;
        assert_eq!((health.status, health.body.as_str()), (200, "ok"));

        let not_ready = get(server.addr, "/readyz").await;
        assert_eq!(not_ready.status, 503);
        assert_eq!(
            not_ready.json(),
            serde_json::json!({"ready": false, "reason": "starting", "shards": [], "not_ready": []})
        );
        let r = &server.readiness;
        r.restoring(1);
        r.set_phase(Phase::Serving);
        r.restored(1);
        let ready = get(server.addr, "/readyz").await;
        assert_eq!(
            (ready.status, ready.json()),
            (
                200,
                serde_json::json!({"ready": true, "shards": [1], "not_ready": []})
            )
        );
        r.set_brokers(Err("timed out".into()));
        let down = get(server.addr, "/readyz").await;
        assert_eq!(
            (down.status, down.json()),
            (
                503,
                serde_json::json!({
                    "ready": false,
                    "reason": "brokers unreachable: timed out",
                    "shards": [1],
                    "not_ready": [1],
                })
            )
        );
        server.shutdown().await;
    }

    #[tokio::test]
    async fn metrics_are_prometheus_text() {
        let server = start(runtime()).await;
        crate::metrics::record_consumed("admin_test_topic", 2);
        let reply = get(server.addr, "/metrics").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type.as_deref(), Some(METRICS_CONTENT_TYPE));
        assert!(
            reply
                .body
                .contains("reactor_events_consumed_total{topic=\"admin_test_topic\"} 2"),
            "{}",
            reply.body
        );
        // The stalest tasks a health pass published follow the recorder's.
        let mut pass = crate::metrics::Stalest::new(server.task_ages.limit());
        let at = |s: i64| jiff::Timestamp::from_second(s).unwrap();
        for (task, last) in [("fresh", 95), ("stale", 10), ("stalest", 5)] {
            pass.offer(task, at(last), at(100));
        }
        server.task_ages.publish(pass);
        let reply = get(server.addr, "/metrics").await;
        let ages: Vec<&str> = reply
            .body
            .lines()
            .filter(|l| l.starts_with("reactor_task_seconds_since_success"))
            .collect();
        assert_eq!(
            ages,
            [
                "reactor_task_seconds_since_success{task=\"stalest\"} 95",
                "reactor_task_seconds_since_success{task=\"stale\"} 90",
            ],
            "{}",
            reply.body
        );
        assert!(reply
            .body
            .contains("# TYPE reactor_task_seconds_since_success gauge\n"));
        assert!(
            reply.body.contains("reactor_events_consumed_total"),
            "the recorder's text is still there"
        );
        server.shutdown().await;
    }

    #[tokio::test]
    async fn lists_and_filters_tasks() {
        let server = start(runtime()).await;
        let all = get(server.addr, "/tasks").await;
        assert_eq!(all.status, 200);
        assert_eq!(
            all.content_type.as_deref(),
            Some("application/json"),
            "{}",
            all.body
        );
        let all = all.json();
        let states: Vec<_> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].as_str().unwrap(), t["state"].as_str().unwrap()))
            .collect();
        assert_eq!(states, [("load", "running"), ("report", "idle")]);
        assert_eq!(all[0]["pool"], "etl");
        assert!(all[0]["since"].is_string());

        let running = get(server.addr, "/tasks?state=running").await.json();
        assert_eq!(running.as_array().unwrap().len(), 1);
        assert_eq!(running[0]["id"], "load");
        let default_pool = get(server.addr, "/tasks?pool=default").await.json();
        assert_eq!(default_pool.as_array().unwrap().len(), 1);
        assert_eq!(default_pool[0]["id"], "report");
        let none = get(server.addr, "/tasks?state=dead&pool=etl").await;
        assert_eq!(none.json(), serde_json::json!([]));
        assert_eq!(none.header("x-total-count"), Some("0"));
        assert_eq!(none.header("link"), None);

        // A page at a time: the link names the next page's query.
        let first = get(server.addr, "/tasks?limit=1").await;
        assert_eq!(first.json()[0]["id"], "load");
        assert_eq!(first.header("x-total-count"), Some("2"));
        let next = first.header("link").expect("a link to the next page");
        assert_eq!(next, "</tasks?limit=1&after=load>; rel=\"next\"");
        let second = get(server.addr, "/tasks?limit=1&after=load").await;
        assert_eq!(second.json()[0]["id"], "report");
        assert_eq!(second.header("x-total-count"), Some("2"));
        assert_eq!(second.header("link"), None, "the last page");
        let all = get(server.addr, "/tasks").await;
        assert_eq!(all.header("link"), None);
        for bad in ["limit=0", "limit=10001", "limit=x"] {
            let reply = get(server.addr, &format!("/tasks?{bad}")).await;
            assert_eq!(reply.status, 400, "{bad}: {}", reply.body);
        }

        let bad = get(server.addr, "/tasks?state=sleeping").await;
        assert_eq!(bad.status, 400);
        assert!(bad.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown state \"sleeping\", expected one of: idle, queued, running,"));
        server.shutdown().await;
    }

    #[tokio::test]
    async fn shows_one_task() {
        let server = start(runtime()).await;
        let reply = get(server.addr, "/tasks/load").await;
        assert_eq!(reply.status, 200);
        let view = reply.json();
        assert_eq!(view["id"], "load");
        assert_eq!(view["state"], "running");
        assert_eq!(view["trigger"], "delta(raw/a, 1min)");
        assert_eq!(view["run"]["attempt"], 1);
        assert_eq!(view["current"]["raw/a"], "2024-05-01T09:00:00Z");
        assert_eq!(view["explain"]["value"], true);

        let missing = get(server.addr, "/tasks/nope").await;
        assert_eq!(missing.status, 404);
        assert_eq!(
            missing.json(),
            serde_json::json!({"error": "task nope is not owned by this instance"})
        );
        let no_route = get(server.addr, "/nowhere").await;
        assert_eq!(no_route.status, 404);
        assert_eq!(no_route.json()["error"], "no route for /nowhere");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn shows_one_offer_and_the_stages() {
        let server = start(runtime()).await;
        // The id has a slash: the rest of the path is the id.
        let reply = get(server.addr, "/offers/shop/o1").await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let view = reply.json();
        assert_eq!(view["id"], "shop/o1");
        assert_eq!(view["version"], 1);
        assert_eq!(view["body"]["price"], 100);
        assert_eq!(view["stages"]["price"]["phase"], "running");
        assert_eq!(view["stages"]["price"]["run_version"], 1);

        let missing = get(server.addr, "/offers/nope").await;
        assert_eq!(missing.status, 404);
        assert!(missing.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("offer nope is not held by this instance"));

        let stages = get(server.addr, "/stages").await;
        assert_eq!(stages.status, 200);
        assert_eq!(
            stages.json(),
            serde_json::json!([
                {"stage": "price", "live": 0, "rescan": 0, "running": 1, "share": 4}
            ])
        );
        server.shutdown().await;
    }

    #[tokio::test]
    async fn shows_a_process_key_and_the_jobs() {
        let server = start(runtime()).await;
        // The key has a slash: the rest of the path is the key.
        let reply = get(server.addr, "/processes/payout/u/1").await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let view = reply.json();
        assert_eq!(view["instance"], "payout/u/1#1");
        assert_eq!(view["job"], "send");
        assert_eq!(view["record"]["active"]["params"]["amount"], 5);
        assert_eq!(view["record"]["active"]["slot"]["phase"], "running");
        let waiting = get(server.addr, "/processes/payout/u2").await.json();
        assert_eq!(waiting["record"]["active"]["slot"]["phase"], "queued");
        let missing = get(server.addr, "/processes/payout/nope").await;
        assert_eq!(missing.status, 404);
        assert_eq!(
            missing.json()["error"],
            "no record of process `payout` for key `nope` here"
        );
        let jobs = get(server.addr, "/jobs").await;
        assert_eq!(
            jobs.json(),
            serde_json::json!([
                {"job": "send", "queued": 1, "queued_low": 0, "running": 1, "share": 1}
            ])
        );
        server.shutdown().await;
    }

    #[tokio::test]
    async fn finds_runs_by_criteria() {
        let server = start(runtime()).await;
        let runs = get(server.addr, "/runs?kind=process&state=running").await;
        assert_eq!(runs.status, 200, "{}", runs.body);
        let runs = runs.json();
        assert_eq!(runs["total"], 1);
        assert_eq!(runs["partitions"], serde_json::json!([0]));
        assert_eq!(runs["matches"][0]["key"], "u/1");
        assert_eq!(runs["matches"][0]["partition"], 0);
        assert_eq!(runs["matches"][0]["run_id"], "payout/u/1#1.0#1");
        let all = get(server.addr, "/runs?name=*&limit=2").await.json();
        assert_eq!(all["total"], 5, "{all}");
        assert_eq!(all["matches"].as_array().unwrap().len(), 2);
        let keyed = get(server.addr, "/runs?key=u%3F").await.json();
        assert_eq!(keyed["total"], 1, "{keyed}");
        for (query, error) in [
            ("kind=offer", "kind `offer`: one of task, stage, process"),
            ("state=lost", "field `state`: unknown state `lost`"),
            ("limit=0", "field `limit`: must be 1 to 200"),
            (
                "kind=task&step=send",
                "field `step`: only process instances have steps",
            ),
        ] {
            let reply = get(server.addr, &format!("/runs?{query}")).await;
            assert_eq!(reply.status, 400, "{query}");
            let text = reply.json()["error"].as_str().unwrap().to_string();
            assert!(text.starts_with(error), "{query}: {text}");
        }
        assert_eq!(get(server.addr, "/runs?colour=red").await.status, 400);
        server.shutdown().await;
    }

    #[tokio::test]
    async fn unavailable_runtime_is_503() {
        let (queries, rx) = mpsc::channel(1);
        drop(rx);
        let server = start(queries).await;
        for path in ["/tasks", "/tasks/load", "/offers/o1", "/stages"] {
            let reply = get(server.addr, path).await;
            assert_eq!(reply.status, 503, "{path}");
            assert_eq!(
                reply.json(),
                serde_json::json!({"error": "the runtime is not running"})
            );
        }
        // Health does not depend on the runtime.
        assert_eq!(get(server.addr, "/healthz").await.status, 200);
        server.shutdown().await;
    }

    #[tokio::test]
    async fn dropped_reply_is_503() {
        // A runtime that takes queries but drops them (e.g. while a shard is
        // being rebuilt) must not leave the request waiting.
        let (queries, mut rx) = mpsc::channel::<Query>(1);
        let runtime = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let server = start(queries).await;
        let reply = get(server.addr, "/tasks/load").await;
        assert_eq!(reply.status, 503);
        assert_eq!(reply.json()["error"], "the runtime is not running");
        server.shutdown().await;
        runtime.abort();
    }

    #[test]
    fn error_statuses() {
        assert_eq!(
            Error::Timeout(QUERY_TIMEOUT).to_string(),
            "the runtime did not answer within 5s"
        );
        assert_eq!(
            Error::Timeout(QUERY_TIMEOUT).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert!(Error::RuntimeGone.is_retryable());
        assert!(!Error::NotOwned("x".into()).is_retryable());
    }
}
