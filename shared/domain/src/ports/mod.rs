//! The ports: what the use cases need from the world, as traits in domain terms. The adapters
//! (DynamoDB, SQS, SNS, the targets) implement them in `sundial-aws`, the in-memory doubles
//! in `sundial-memory`; one contract suite holds both to the same promises.

pub mod bus;
pub mod channels;
pub mod queue;
pub mod spans;
pub mod store;
pub mod targets;
pub mod topics;
