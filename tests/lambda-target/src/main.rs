//! A target function for tests: it answers with what it received, or fails with a function
//! error when the job's payload says `{"fail": true}`.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::{Value, json};

async fn handle(event: LambdaEvent<Value>) -> Result<Value, Error> {
    let envelope = event.payload;
    if envelope["payload"]["fail"] == json!(true) {
        return Err("asked to fail".into());
    }
    Ok(json!({"received": envelope["run_id"], "attempt": envelope["attempt"]}))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(handle)).await
}
