//! The next offset of every input partition the runtime owns, sent with
//! every transaction. Kept by topic, then partition, so that noting a
//! consumed record looks the topic up by `&str` and allocates nothing.

use std::collections::BTreeMap;

use rdkafka::{Offset, TopicPartitionList};

use super::Error;

/// Next offsets by topic and partition.
#[derive(Debug, Default)]
pub(super) struct Positions(BTreeMap<String, BTreeMap<i32, i64>>);

impl Positions {
    /// `topic[partition]` resumes at `next`.
    pub fn set(&mut self, topic: &str, partition: i32, next: i64) {
        match self.0.get_mut(topic) {
            Some(partitions) => {
                partitions.insert(partition, next);
            }
            None => {
                self.0
                    .insert(topic.to_string(), BTreeMap::from([(partition, next)]));
            }
        }
    }

    /// Forgets `topic[partition]` (given up).
    pub fn remove(&mut self, topic: &str, partition: i32) {
        if let Some(partitions) = self.0.get_mut(topic) {
            partitions.remove(&partition);
            if partitions.is_empty() {
                self.0.remove(topic);
            }
        }
    }

    /// Every position, as a transaction's offsets.
    pub fn list(&self) -> Result<TopicPartitionList, Error> {
        let mut tpl = TopicPartitionList::new();
        for (topic, partitions) in &self.0 {
            for (&p, &next) in partitions {
                add(&mut tpl, topic, p, next)?;
            }
        }
        Ok(tpl)
    }
}

/// Adds `topic[partition]` at offset `next` to `tpl`.
pub(super) fn add(
    tpl: &mut TopicPartitionList,
    topic: &str,
    partition: i32,
    next: i64,
) -> Result<(), Error> {
    tpl.add_partition_offset(topic, partition, Offset::Offset(next))
        .map_err(|e| Error::Record {
            topic: topic.to_string(),
            partition,
            offset: next,
            source: e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_by_topic_and_partition() {
        let mut p = Positions::default();
        p.set("a", 1, 10);
        p.set("a", 1, 11);
        p.set("a", 0, 5);
        p.set("b", 1, 7);
        p.remove("b", 1);
        p.remove("c", 0);
        let list = p.list().unwrap();
        let got: Vec<(String, i32, Offset)> = list
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition(), e.offset()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), 0, Offset::Offset(5)),
                ("a".to_string(), 1, Offset::Offset(11)),
            ]
        );
    }
}
