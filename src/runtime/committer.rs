//! The committer: the thread that makes a batch durable — every record the
//! shards decided, in one Kafka transaction with the input offsets (or,
//! with exactly-once off, produced and acknowledged) — while the runtime's
//! thread goes on deciding the next batch. Producing a batch and waiting
//! for the brokers used to stop all deciding for the length of a commit;
//! now the two overlap.
//!
//! One batch at a time: the runtime hands the next one over only once it
//! has the last one's outcome, so batches commit in order, a failed one is
//! never followed by a later one, and nothing the runtime has not seen
//! committed is taken for committed (a shard is given up, rebuilt or the
//! instance stopped only after [`Committer::wait`]).

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

use super::context::DeliveryContext;
use super::output::{Out, OutRecords};
use super::stop::{Stop, StopKind};
use super::{failpoint, Error, CALL_TIMEOUT};

/// The runtime's producer, shared with the committer.
pub(super) type SharedProducer = Arc<ThreadedProducer<DeliveryContext>>;

/// A batch to make durable.
pub(super) struct Batch {
    /// The records, shard by shard (each in the order it was decided).
    pub records: Vec<OutRecords>,
    /// The next offset of every owned input partition.
    pub offsets: TopicPartitionList,
    /// The group's metadata when the batch was handed over: the broker
    /// accepts the offsets only from the current generation (KIP-447).
    pub group: Option<ConsumerGroupMetadata>,
}

impl Batch {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.records.iter().map(OutRecords::len).sum()
    }
}

/// A batch back from the committer, with its outcome.
pub(super) struct Done {
    /// The batch (sent again when the group generation changed under it;
    /// once committed, its record lists are empty, kept for reuse).
    pub batch: Batch,
    /// Records it had.
    pub records: usize,
    /// How long the committer took over it.
    pub seconds: f64,
    /// Committed (exactly-once) or acknowledged by the brokers (at-least-once).
    pub result: Result<(), Error>,
}

/// The committer thread (see the module docs).
pub(super) struct Committer {
    batches: Option<SyncSender<Batch>>,
    done: Receiver<Done>,
    /// A batch was handed over and its outcome not taken yet.
    busy: bool,
    /// That outcome, when [`Committer::is_busy`] found it before
    /// [`Committer::wait`] took it.
    ready: Option<Result<Done, Error>>,
}

impl Committer {
    /// Starts the thread over `producer`.
    pub fn spawn(
        producer: SharedProducer,
        exactly_once: bool,
        stop: Stop,
    ) -> Result<Committer, Error> {
        let (batches, inbox) = mpsc::sync_channel::<Batch>(1);
        let (outcomes, done) = mpsc::sync_channel::<Done>(1);
        std::thread::Builder::new()
            .name("reactor-commit".into())
            .spawn(move || {
                for batch in inbox {
                    let started = Instant::now();
                    let result = if exactly_once {
                        transaction(&producer, &batch, &stop)
                    } else {
                        deliver(&producer, &batch)
                    };
                    // The lists go back whole: the runtime clears and
                    // fills them again (see `OutRecords`).
                    let records = batch.len();
                    let done = Done {
                        batch,
                        records,
                        seconds: started.elapsed().as_secs_f64(),
                        result,
                    };
                    if outcomes.send(done).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Topic {
                topic: String::new(),
                message: format!("starting the committer thread: {e}"),
            })?;
        Ok(Committer {
            batches: Some(batches),
            done,
            busy: false,
            ready: None,
        })
    }

    /// Hands `batch` over; the committer must not be busy ([`Committer::wait`]).
    pub fn hand_over(&mut self, batch: Batch) -> Result<(), Error> {
        let sent = self.batches.as_ref().map(|b| b.send(batch));
        match sent {
            Some(Ok(())) => {
                self.busy = true;
                Ok(())
            }
            _ => Err(gone()),
        }
    }

    /// Whether the batch handed over is still being made durable (without
    /// waiting; its outcome is kept for [`Committer::wait`]).
    pub fn is_busy(&mut self) -> bool {
        if !self.busy || self.ready.is_some() {
            return false;
        }
        match self.done.try_recv() {
            Ok(done) => self.ready = Some(Ok(done)),
            Err(mpsc::TryRecvError::Empty) => return true,
            Err(mpsc::TryRecvError::Disconnected) => self.ready = Some(Err(gone())),
        }
        false
    }

    /// The outcome of the batch handed over, once it is done; `None` when
    /// none is.
    pub fn wait(&mut self) -> Option<Result<Done, Error>> {
        if !self.busy {
            return None;
        }
        self.busy = false;
        Some(
            self.ready
                .take()
                .unwrap_or_else(|| self.done.recv().map_err(|_| gone())),
        )
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        // The thread ends after the batch in hand, if any.
        self.batches.take();
    }
}

fn gone() -> Error {
    Error::client("the committer thread ended", KafkaError::Canceled)
}

/// The batch in one transaction with its offsets.
fn transaction(producer: &SharedProducer, batch: &Batch, stop: &Stop) -> Result<(), Error> {
    let tx = |what: &str, e: KafkaError| Error::client(format!("transaction: {what}"), e);
    producer.begin_transaction().map_err(|e| tx("begin", e))?;
    let sent = send_all(producer, batch).and_then(|()| {
        if batch.offsets.count() == 0 {
            return Ok(());
        }
        let group = batch.group.as_ref().ok_or_else(|| {
            tx(
                "send offsets",
                KafkaError::MessageProduction(RDKafkaErrorCode::UnknownMemberId),
            )
        })?;
        producer
            .send_offsets_to_transaction(&batch.offsets, group, CALL_TIMEOUT)
            .map_err(|e| tx("send offsets", e))
    });
    let committed = sent.and_then(|()| wait_delivered(producer)).and_then(|()| {
        // As a killed process: what it sent never commits.
        if stop.requested() == Some(StopKind::Crash) {
            return Err(Error::Crashed);
        }
        failpoint::before_commit();
        producer
            .commit_transaction(CALL_TIMEOUT)
            .map_err(|e| tx("commit", e))
    });
    if let Err(e) = committed {
        // Served by the producer's own thread, so abort can complete.
        if let Err(abort) = producer.abort_transaction(CALL_TIMEOUT) {
            tracing::warn!(error = %abort, "aborting the transaction failed");
        }
        return Err(e);
    }
    Ok(())
}

/// The batch produced and acknowledged (at-least-once: the runtime commits
/// the offsets once it has this outcome).
fn deliver(producer: &SharedProducer, batch: &Batch) -> Result<(), Error> {
    let failures = producer.context().failures();
    send_all(producer, batch)?;
    wait_delivered(producer)?;
    if producer.context().failures() != failures {
        return Err(Error::client(
            "delivering outputs",
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        ));
    }
    Ok(())
}

/// Waits until every produced record is acknowledged. rdkafka's `flush`
/// polls the event queue in 100 ms rounds that race with the producer's own
/// polling thread, so every commit would stall ~100 ms; the producer thread
/// serves delivery reports, so watching the in-flight count is enough.
/// (`commit_transaction` flushes too, then at once.)
fn wait_delivered(producer: &SharedProducer) -> Result<(), Error> {
    // A zero-timeout flush asks librdkafka to send now instead of lingering.
    let _ = producer.flush(Duration::ZERO);
    let deadline = Instant::now() + CALL_TIMEOUT;
    while producer.in_flight_count() > 0 {
        if Instant::now() > deadline {
            return Err(Error::client(
                "waiting for deliveries",
                KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut),
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

fn send_all(producer: &SharedProducer, batch: &Batch) -> Result<(), Error> {
    // A batch's records carry the time its sending began as their
    // CreateTime: left to librdkafka, the wall clock is read per record, a
    // visible share of this thread's time (they were all made within the
    // commit interval before, and are sent within milliseconds).
    let created = jiff::Timestamp::now().as_millisecond();
    for record in batch.records.iter().flat_map(OutRecords::iter) {
        send(producer, record, created)?;
    }
    Ok(())
}

/// Produces one record, created at `created` (Unix milliseconds), waiting
/// while the local queue is full.
fn send(producer: &SharedProducer, r: Out<'_>, created: i64) -> Result<(), Error> {
    let mut record: BaseRecord<'_, [u8], [u8]> =
        BaseRecord::to(r.topic).key(r.key).timestamp(created);
    if !r.headers.is_empty() {
        // Only dead letters carry headers: no header list for the rest.
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (key, value) in r.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        record = record.headers(headers);
    }
    if let Some(payload) = r.payload {
        record = record.payload(payload);
    }
    if let Some(p) = r.partition {
        record = record.partition(p);
    }
    crate::kafka::send_with_room(&**producer, record, Some(CALL_TIMEOUT), || {
        std::thread::sleep(Duration::from_millis(5))
    })
    .map_err(|source| Error::Record {
        topic: r.topic.to_string(),
        partition: r.partition.unwrap_or(-1),
        offset: -1,
        source,
    })
}
