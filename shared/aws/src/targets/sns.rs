//! An SNS target: the run's envelope published to the topic.

use super::{Targets, aws_failure};
use sundial_domain::ports::targets::{Answer, Invocation};
use sundial_domain::target::envelope;

impl Targets {
    /// Publishes the envelope to `topic_arn`; the answer's output is the message id.
    pub(super) async fn sns(&self, inv: &Invocation<'_>, topic_arn: &str) -> Answer {
        let published = self.sns.publish().topic_arn(topic_arn).message(envelope(inv)).send();
        match tokio::time::timeout(inv.timeout, published).await {
            Ok(Ok(out)) => Answer::Succeeded { status: None, output: out.message_id },
            Ok(Err(e)) => aws_failure(e),
            Err(_) => Answer::TimedOut,
        }
    }
}
