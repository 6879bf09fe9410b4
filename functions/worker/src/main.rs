//! The worker as a Lambda function behind two SQS event source mappings (runs queue and DLQ).

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sundial_shared::services::Services;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sundial_shared::telemetry::init();
    let services = Services::from_env().await?;
    let (worker, queue, inbox) = (&services.worker, services.queue.as_ref(), services.inbox.as_ref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        sundial_worker::handle(worker, queue, inbox, event).await
    }))
    .await
}
