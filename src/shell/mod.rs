//! The shell: everything that drives the pure core from the world. Its
//! centre is [`driver`], the one way a shard's engine is driven (by the
//! simulator, the tests and the Kafka runtime alike).

pub mod driver;
