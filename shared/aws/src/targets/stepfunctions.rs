//! A Step Functions target: an execution per attempt, named after the run and the attempt, and
//! followed to its end by DescribeExecution; stopped by StopExecution.
//!
//! The name makes the start idempotent: AWS answers a repeated StartExecution of a running
//! execution with the same name and input with that execution, and refuses it with
//! `ExecutionAlreadyExists` once the execution has ended (or, in an emulator, always). Either
//! way the attempt's execution is the one its name gives, and it is followed; no second one
//! starts. A start whose answer was lost (a timeout, a 5xx) is followed by its name too: the
//! looks find the execution, or find it missing once Step Functions should know it. An Express
//! state machine's execution (its ARN `…:express:…`) cannot be described: it is started only.

use super::{Targets, aws_failure};
use aws_sdk_sfn::types::ExecutionStatus;
use sundial_domain::job::ExecutionInput;
use sundial_domain::ports::targets::{Answer, Invocation, Progress};
use sundial_domain::run::Outcome;
use sundial_domain::run::transition::Ending;
use sundial_domain::target::{MAX_EXECUTION_NAME, envelope, truncate, work_name};

/// Step Functions' largest execution input.
pub const MAX_INPUT_BYTES: usize = 262_144;

impl Targets {
    /// Starts the attempt's execution of `state_machine_arn`; the answer names it.
    pub(super) async fn stepfunctions(
        &self,
        inv: &Invocation<'_>,
        state_machine_arn: &str,
        input: ExecutionInput,
    ) -> Answer {
        let name = work_name(&inv.run_id, inv.attempt, MAX_EXECUTION_NAME);
        let input = match input {
            ExecutionInput::Envelope => envelope(inv),
            ExecutionInput::Payload => inv.payload.to_string(),
        };
        if input.len() > MAX_INPUT_BYTES {
            let error = format!(
                "the execution's input is {} bytes; Step Functions takes at most {MAX_INPUT_BYTES}",
                input.len()
            );
            return Answer::Failed { retryable: false, status: None, error };
        }
        let started =
            self.sfn.start_execution().state_machine_arn(state_machine_arn).name(&name).input(input).send();
        // The execution this attempt's name gives: started before by this attempt, or perhaps
        // by a call whose answer was lost. Its looks tell which.
        let named = || match execution_arn(state_machine_arn, &name) {
            Some(handle) => Answer::Started { handle },
            None => Answer::Failed {
                retryable: false,
                status: None,
                error: format!("`{state_machine_arn}` names no state machine"),
            },
        };
        match tokio::time::timeout(inv.timeout, started).await {
            // An Express execution cannot be described or stopped: it is started, not followed.
            Ok(Ok(out)) if out.execution_arn.contains(":express:") => Answer::Succeeded {
                status: None,
                output: Some(format!(
                    "started the Express execution {} (Express executions are not followed)",
                    out.execution_arn
                )),
            },
            Ok(Ok(out)) => Answer::Started { handle: out.execution_arn },
            Ok(Err(e)) => match e.as_service_error() {
                Some(s) if s.is_execution_already_exists() => named(),
                Some(s)
                    if s.is_state_machine_does_not_exist()
                        || s.is_state_machine_deleting()
                        || s.is_invalid_arn()
                        || s.is_invalid_name()
                        || s.is_invalid_execution_input()
                        || s.is_validation_exception() =>
                {
                    let error = truncate(&aws_sdk_sfn::error::DisplayErrorContext(&e).to_string());
                    Answer::Failed { retryable: false, status: None, error }
                }
                // Too many executions open: nothing was started.
                Some(s) if s.is_execution_limit_exceeded() => {
                    Answer::NotSent { error: truncate(&s.to_string()) }
                }
                _ => match aws_failure(e) {
                    not_sent @ Answer::NotSent { .. } => not_sent,
                    // It may have started: followed by its name, it ends as it ends, or as
                    // missing once Step Functions should know it.
                    _ => named(),
                },
            },
            // The same: the start may have landed.
            Err(_) => named(),
        }
    }

    /// Where the execution `arn` stands.
    pub(super) async fn follow_execution(&self, arn: &str) -> Progress {
        let described = match self.sfn.describe_execution().execution_arn(arn).send().await {
            Ok(described) => described,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_execution_does_not_exist()) => {
                return Progress::Missing(format!("Step Functions knows no execution {arn}"));
            }
            Err(e) => {
                return Progress::Unknown(truncate(&aws_sdk_sfn::error::DisplayErrorContext(e).to_string()));
            }
        };
        let failure = || {
            let error = described.error().unwrap_or("");
            let cause = described.cause().unwrap_or("");
            [error, cause].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(": ")
        };
        let ending = match described.status() {
            ExecutionStatus::Running | ExecutionStatus::PendingRedrive => return Progress::Running,
            ExecutionStatus::Succeeded => Ending {
                output: Some(truncate(described.output().unwrap_or_default())),
                ..Ending::new(Outcome::Succeeded)
            },
            ExecutionStatus::Failed => {
                Ending::new(Outcome::Failed).because(truncate(&format!("execution FAILED: {}", failure())))
            }
            ExecutionStatus::TimedOut => Ending::new(Outcome::TimedOut).because(truncate(&format!(
                "execution TIMED_OUT (the state machine's own timeout): {}",
                failure()
            ))),
            // Stopped outside Sundial (or by it, past a cancel): not for a retry to start again.
            ExecutionStatus::Aborted => Ending {
                permanent: true,
                ..Ending::new(Outcome::Failed).because(truncate(&format!("execution ABORTED: {}", failure())))
            },
            other => Ending::new(Outcome::Failed).because(format!("execution in an unknown state: {other}")),
        };
        Progress::Ended(ending)
    }

    /// Stops the execution `arn`; one that has ended already needs nothing.
    pub(super) async fn stop_execution(&self, arn: &str, reason: &str) -> Result<(), String> {
        let stopped =
            self.sfn.stop_execution().execution_arn(arn).error("Sundial").cause(truncate(reason)).send();
        match stopped.await {
            Ok(_) => Ok(()),
            Err(e) => match e.as_service_error() {
                Some(s) if s.is_execution_does_not_exist() => Ok(()),
                // "Execution is not running": it ended first.
                Some(s) if s.is_validation_exception() => Ok(()),
                _ => Err(truncate(&aws_sdk_sfn::error::DisplayErrorContext(e).to_string())),
            },
        }
    }
}

/// The ARN of the execution `name` of `state_machine_arn`.
fn execution_arn(state_machine_arn: &str, name: &str) -> Option<String> {
    let (head, machine) = state_machine_arn.split_once(":stateMachine:")?;
    Some(format!("{head}:execution:{machine}:{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execution_arn_is_its_machines_with_its_name() {
        assert_eq!(
            execution_arn("arn:aws:states:us-east-1:123456789012:stateMachine:nightly", "r-1").as_deref(),
            Some("arn:aws:states:us-east-1:123456789012:execution:nightly:r-1")
        );
        assert_eq!(execution_arn("arn:aws:sns:us-east-1:123456789012:t", "r-1"), None);
    }
}
