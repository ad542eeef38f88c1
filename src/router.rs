//! The router: which partition (shard) owns a key — a task's pool, an
//! offer, a process key — by Java-compatible murmur2 partitioning, the
//! partition a key lands on when produced by a Java client or by librdkafka
//! with `partitioner=murmur2_random`. Pure, so the engine, the simulator and
//! the runtime route alike without asking the broker.

/// Kafka's murmur2 hash of `data` (seed 0x9747b28c), as `Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(chunk);
        let mut k = u32::from_le_bytes(bytes);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if let Some(&b) = rest.get(2) {
        h ^= u32::from(b) << 16;
    }
    if let Some(&b) = rest.get(1) {
        h ^= u32::from(b) << 8;
    }
    if let Some(&b) = rest.first() {
        h ^= u32::from(b);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions`, as Java's default partitioner
/// (`toPositive(murmur2(key)) % partitions`); a topic has at least one
/// partition, so fewer counts as one.
pub fn partition_for(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Whether partition `index` of `count` owns `key`.
pub fn owns(key: &str, index: u32, count: u32) -> bool {
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    i64::from(partition_for(key.as_bytes(), count)) == i64::from(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_utils_test_vectors() {
        // From Apache Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitions_are_in_range() {
        for n in 1..20 {
            for key in ["", "a", "reports", "default", "pool-17"] {
                let p = partition_for(key.as_bytes(), n);
                assert!((0..n).contains(&p));
            }
        }
    }
}
