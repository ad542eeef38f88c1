//! The worker: handlers by target, and the loop that consumes run commands,
//! calls them, replies and commits.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

use crate::codec::{self, Outcome};
use crate::runs::{JobResult, Run, StageResult, StageRun, StepRun, TaskRun};

/// What a handler may fail with: any error; its text is the run's error.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

type Fut<T> = Pin<Box<dyn Future<Output = Result<T, HandlerError>> + Send>>;

#[derive(Clone)]
enum Handler {
    Task(Arc<dyn Fn(TaskRun) -> Fut<()> + Send + Sync>),
    Stage(Arc<dyn Fn(StageRun) -> Fut<StageResult> + Send + Sync>),
    Job(Arc<dyn Fn(StepRun) -> Fut<JobResult> + Send + Sync>),
}

/// Time to wait after a reply could not be delivered, before it is sent again.
const RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// Why a worker cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two handlers for one target.
    #[error("two handlers for {kind} {name:?}")]
    Duplicate {
        /// `task`, `stage` or `step`.
        kind: &'static str,
        /// The target.
        name: String,
    },
    /// Nothing to do.
    #[error("no handlers registered")]
    NoHandlers,
    /// A Kafka client refused its configuration or the subscription.
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: KafkaError,
    },
}

impl Error {
    /// None of these goes away by trying again with the same settings.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A result record ready to produce.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The command's `reply_topic`.
    pub topic: String,
    /// The command's `reply_key`.
    pub key: String,
    /// The encoded `RunResult`.
    pub value: Vec<u8>,
    /// The run answered.
    pub run_id: String,
    /// The pass answered.
    pub pass: u64,
    /// The run failed.
    pub failed: bool,
    /// Headers of the reply: the command's trace context ([`TRACE_HEADERS`]).
    pub headers: Vec<(String, Vec<u8>)>,
}

/// W3C trace-context headers copied from a run command to its reply, so that
/// a trace goes on through the worker into what Reactor does next.
pub const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// A Reactor worker: register handlers with [`Worker::task`],
/// [`Worker::stage`] and [`Worker::job`], then [`Worker::run`].
pub struct Worker {
    brokers: String,
    group: String,
    topics: Option<Vec<String>>,
    config: BTreeMap<String, String>,
    handlers: BTreeMap<(&'static str, String), Handler>,
    duplicate: Option<Error>,
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl Worker {
    /// A worker of consumer group `group` on `brokers`.
    pub fn new(brokers: impl Into<String>, group: impl Into<String>) -> Worker {
        Worker {
            brokers: brokers.into(),
            group: group.into(),
            topics: None,
            config: BTreeMap::new(),
            handlers: BTreeMap::new(),
            duplicate: None,
            clock: Arc::new(Timestamp::now),
        }
    }

    /// The run topics to consume; by default `reactor.runs` when there is a
    /// task handler, `stage.NAME.runs` per stage and `job.NAME.runs` per job
    /// (Reactor's default topic names).
    pub fn topics<S: Into<String>>(mut self, topics: impl IntoIterator<Item = S>) -> Worker {
        self.topics = Some(topics.into_iter().map(Into::into).collect());
        self
    }

    /// A librdkafka setting for both clients (security, timeouts …).
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Worker {
        self.config.insert(key.into(), value.into());
        self
    }

    /// The clock deadlines are checked against (tests).
    pub fn clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> Worker {
        self.clock = Arc::new(clock);
        self
    }

    fn register(mut self, kind: &'static str, name: &str, handler: Handler) -> Worker {
        let key = (kind, name.to_string());
        if self.handlers.contains_key(&key) && self.duplicate.is_none() {
            self.duplicate = Some(Error::Duplicate {
                kind,
                name: name.to_string(),
            });
        }
        self.handlers.insert(key, handler);
        self
    }

    /// Handles the runs of task `id`.
    pub fn task<F, R>(self, id: &str, f: F) -> Worker
    where
        F: Fn(TaskRun) -> R + Send + Sync + 'static,
        R: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        self.register("task", id, Handler::Task(Arc::new(move |r| Box::pin(f(r)))))
    }

    /// Handles the runs of stage `name`.
    pub fn stage<F, R>(self, name: &str, f: F) -> Worker
    where
        F: Fn(StageRun) -> R + Send + Sync + 'static,
        R: Future<Output = Result<StageResult, HandlerError>> + Send + 'static,
    {
        self.register(
            "stage",
            name,
            Handler::Stage(Arc::new(move |r| Box::pin(f(r)))),
        )
    }

    /// Handles the steps that run job `name` (and the job submitted alone).
    pub fn job<F, R>(self, name: &str, f: F) -> Worker
    where
        F: Fn(StepRun) -> R + Send + Sync + 'static,
        R: Future<Output = Result<JobResult, HandlerError>> + Send + 'static,
    {
        self.register(
            "step",
            name,
            Handler::Job(Arc::new(move |r| Box::pin(f(r)))),
        )
    }

    /// The run topics this worker consumes.
    pub fn run_topics(&self) -> Vec<String> {
        if let Some(topics) = &self.topics {
            return topics.clone();
        }
        let mut topics = Vec::new();
        if self.handlers.keys().any(|(kind, _)| *kind == "task") {
            topics.push("reactor.runs".to_string());
        }
        for (kind, prefix) in [("stage", "stage"), ("step", "job")] {
            topics.extend(
                self.handlers
                    .keys()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, name)| format!("{prefix}.{name}.runs")),
            );
        }
        topics
    }

    /// Handles one record of a run topic: the reply to produce, or `None`
    /// when there is nothing to answer (undecodable, past its deadline, no
    /// handler). `place` names the record in logs.
    pub async fn handle(
        &self,
        value: &[u8],
        headers: Vec<(String, Vec<u8>)>,
        place: &str,
    ) -> Option<Reply> {
        let run = match codec::decode(value, headers) {
            Ok(run) => run,
            Err(e) => {
                tracing::error!(place, "skipping a record: {e}");
                return None;
            }
        };
        let info = run.info();
        let Some(handler) = self
            .handlers
            .get(&(run.kind(), run.target().to_string()))
            .cloned()
        else {
            tracing::warn!(
                place,
                run_id = info.run_id,
                "skipping: no handler for {} {:?}",
                run.kind(),
                run.target()
            );
            return None;
        };
        let now = (self.clock)();
        if let Some(deadline) = info.deadline.filter(|d| now > *d) {
            tracing::warn!(
                run_id = info.run_id,
                pass = info.pass,
                %deadline,
                %now,
                "skipping: the deadline has passed"
            );
            return None;
        }
        // A task of its own, so that a panicking handler fails its run
        // rather than the worker.
        let call = run.clone();
        let outcome = tokio::spawn(async move {
            match (handler, call) {
                (Handler::Task(f), Run::Task(r)) => f(r).await.map(|()| Outcome::Task),
                (Handler::Stage(f), Run::Stage(r)) => f(r).await.map(Outcome::Stage),
                (Handler::Job(f), Run::Step(r)) => f(r).await.map(Outcome::Job),
                _ => Err("handler registered for another kind".into()),
            }
        })
        .await;
        let outcome = match outcome {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => Outcome::Failed(e.to_string()),
            Err(join) => Outcome::Failed(format!("the handler panicked: {join}")),
        };
        if let Outcome::Failed(error) = &outcome {
            tracing::warn!(run_id = info.run_id, error, "run failed");
        }
        let as_json = codec::is_json(value);
        let result = codec::result(&run, outcome);
        let encoded = codec::encode(&result, as_json)
            .or_else(|e| codec::encode(&codec::result(&run, Outcome::Failed(e)), as_json));
        let value = match encoded {
            Ok(value) => value,
            Err(e) => {
                tracing::error!(run_id = info.run_id, "cannot encode a reply: {e}");
                return None;
            }
        };
        let failed = result.status != crate::proto::RunStatus::Succeeded as i32;
        let headers = info
            .headers
            .iter()
            .filter(|(k, _)| TRACE_HEADERS.contains(&k.as_str()))
            .cloned()
            .collect();
        Some(Reply {
            topic: info.reply_topic.clone(),
            key: info.reply_key.clone(),
            value,
            run_id: info.run_id.clone(),
            pass: info.pass,
            failed,
            headers,
        })
    }

    /// The consumer's settings: offsets are stored by hand once a reply is
    /// delivered and committed (automatically) from the store.
    pub fn consumer_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("group.id", &self.group)
            .set("auto.offset.reset", "earliest")
            // Reactor writes run commands in transactions: only committed ones.
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false");
        for (k, v) in &self.config {
            c.set(k, v);
        }
        c
    }

    /// The producer's settings: Java-compatible key hashing, idempotent.
    pub fn producer_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("partitioner", "murmur2_random")
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "2");
        for (k, v) in &self.config {
            c.set(k, v);
        }
        c
    }

    /// Consumes and answers run commands until `shutdown` completes. The
    /// command in hand is finished first; its offset is committed only if
    /// its reply was delivered.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        if let Some(e) = self.duplicate {
            return Err(e);
        }
        if self.handlers.is_empty() {
            return Err(Error::NoHandlers);
        }
        let kafka = |what| move |source| Error::Kafka { what, source };
        let consumer: StreamConsumer = self
            .consumer_config()
            .create()
            .map_err(kafka("creating the consumer"))?;
        let producer: FutureProducer = self
            .producer_config()
            .create()
            .map_err(kafka("creating the producer"))?;
        let topics = self.run_topics();
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&names)
            .map_err(kafka("subscribing to the run topics"))?;
        tracing::info!(
            group = self.group,
            brokers = self.brokers,
            ?topics,
            "worker started"
        );
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let message = tokio::select! {
                () = &mut shutdown => break,
                m = consumer.recv() => m,
            };
            let message = match message {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("consumer: {e}");
                    continue;
                }
            };
            let place = format!(
                "{}[{}]@{}",
                message.topic(),
                message.partition(),
                message.offset()
            );
            let value = message.payload().unwrap_or_default();
            if let Some(reply) = self.handle(value, headers(&message), &place).await {
                if !deliver(&producer, &reply, &mut shutdown).await {
                    // Stopped before delivery: the next owner handles it again.
                    break;
                }
                tracing::info!(
                    run_id = reply.run_id,
                    pass = reply.pass,
                    failed = reply.failed,
                    "replied"
                );
            }
            if let Err(e) = consumer.store_offset_from_message(&message) {
                // The partition was revoked meanwhile: its new owner has it.
                tracing::warn!(place, "storing the offset: {e}");
            }
        }
        // Dropping the consumer closes it, committing the stored offsets.
        tracing::info!(group = self.group, "worker stopped");
        Ok(())
    }
}

fn headers(message: &BorrowedMessage<'_>) -> Vec<(String, Vec<u8>)> {
    message
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                .collect()
        })
        .unwrap_or_default()
}

/// Produces the reply until the broker has it (true), or until `shutdown`
/// completes (false).
async fn deliver<S: Future<Output = ()>>(
    producer: &FutureProducer,
    reply: &Reply,
    shutdown: &mut Pin<&mut S>,
) -> bool {
    loop {
        let headers = reply
            .headers
            .iter()
            .fold(OwnedHeaders::new(), |h, (key, value)| {
                h.insert(Header {
                    key,
                    value: Some(value),
                })
            });
        let record = FutureRecord::to(&reply.topic)
            .key(&reply.key)
            .payload(&reply.value)
            .headers(headers);
        // Delivery ends, at the latest, when librdkafka gives up retrying
        // (delivery.timeout.ms).
        match producer.send(record, Timeout::Never).await {
            Ok(_) => return true,
            Err((e, _)) => {
                tracing::error!(
                    run_id = reply.run_id,
                    "reply not delivered: {e}; sending it again"
                );
            }
        }
        tokio::select! {
            () = shutdown.as_mut() => return false,
            () = tokio::time::sleep(RETRY_BACKOFF) => {}
        }
    }
}

/// Completes on SIGINT or SIGTERM: a `shutdown` for [`Worker::run`].
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
