//! An SQS target: the run's envelope sent to the queue as one message.

use super::{Targets, aws_failure};
use sundial_domain::ports::targets::{Answer, Invocation};
use sundial_domain::target::envelope;

impl Targets {
    /// Sends the envelope to `queue_url`; the answer's output is the message id.
    pub(super) async fn sqs(&self, inv: &Invocation<'_>, queue_url: &str) -> Answer {
        let sent = self.sqs.send_message().queue_url(queue_url).message_body(envelope(inv)).send();
        match tokio::time::timeout(inv.timeout, sent).await {
            Ok(Ok(out)) => Answer::Succeeded { status: None, output: out.message_id },
            Ok(Err(e)) => aws_failure(e),
            Err(_) => Answer::TimedOut,
        }
    }
}
