//! What DynamoDB bills for each call. [`AskCapacity`] is an SDK interceptor that asks every
//! DynamoDB request for its consumed capacity by table and index (`ReturnConsumedCapacity =
//! INDEXES`, free in AWS) and hands what comes back to a [`Sink`]; [`Log`] logs one `dynamodb capacity` line per table or
//! index a call touched, under the `sundial::capacity` target, carrying the current span (the
//! run and job being worked on). Off unless configured (`SUNDIAL_CAPACITY_LOG=1`): a log line
//! per call costs more in CloudWatch Logs than the call itself. [`CapacityCount`] asks the same
//! and adds the units to a ledger instead, for benchmarks.

use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    scan::{ScanInput, ScanOutput},
    transact_get_items::{TransactGetItemsInput, TransactGetItemsOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut, Input, Output,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// The tracing target of the capacity lines.
pub const TARGET: &str = "sundial::capacity";

/// Whether a call reads or writes, which decides the kind of unit it is billed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// The units one call consumed on one table or one of its indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub table: String,
    /// `None` for the table itself.
    pub index: Option<String>,
    pub units: f64,
}

/// The parts of one `ConsumedCapacity`: the table's own share (given, or what the indexes
/// leave of the total) and each index's.
pub fn parts(consumed: &ConsumedCapacity) -> Vec<Part> {
    let table = consumed.table_name().unwrap_or_default().to_string();
    let indexes: Vec<Part> = consumed
        .global_secondary_indexes()
        .into_iter()
        .flatten()
        .chain(consumed.local_secondary_indexes().into_iter().flatten())
        .map(|(name, capacity)| Part {
            table: table.clone(),
            index: Some(name.clone()),
            units: capacity.capacity_units().unwrap_or(0.0),
        })
        .collect();
    let own = consumed.table().and_then(|t| t.capacity_units()).unwrap_or_else(|| {
        let total = consumed.capacity_units().unwrap_or(0.0);
        (total - indexes.iter().map(|p| p.units).sum::<f64>()).max(0.0)
    });
    let mut parts = vec![Part { table, index: None, units: own }];
    parts.extend(indexes);
    parts
}

/// Asks a DynamoDB request for its capacity by index; `None` when `input` is no request this
/// module knows (it is left as it is), else the kind of units the call is billed in.
fn ask(input: &mut Input) -> Option<Kind> {
    macro_rules! ask_each {
        ($($input:ty => $kind:expr),+ $(,)?) => {
            $(if let Some(i) = input.downcast_mut::<$input>() {
                i.return_consumed_capacity = Some(ReturnConsumedCapacity::Indexes);
                return Some($kind);
            })+
        };
    }
    ask_each!(
        GetItemInput => Kind::Read,
        QueryInput => Kind::Read,
        ScanInput => Kind::Read,
        BatchGetItemInput => Kind::Read,
        TransactGetItemsInput => Kind::Read,
        PutItemInput => Kind::Write,
        UpdateItemInput => Kind::Write,
        DeleteItemInput => Kind::Write,
        BatchWriteItemInput => Kind::Write,
        TransactWriteItemsInput => Kind::Write,
    );
    None
}

/// What a DynamoDB response reports (an empty list when it reports nothing).
fn reported(output: &Output) -> Vec<ConsumedCapacity> {
    macro_rules! one {
        ($($output:ty),+) => {
            $(if let Some(o) = output.downcast_ref::<$output>() {
                return o.consumed_capacity().into_iter().cloned().collect();
            })+
        };
    }
    macro_rules! many {
        ($($output:ty),+) => {
            $(if let Some(o) = output.downcast_ref::<$output>() {
                return o.consumed_capacity().to_vec();
            })+
        };
    }
    one!(GetItemOutput, QueryOutput, ScanOutput, PutItemOutput, UpdateItemOutput, DeleteItemOutput);
    many!(BatchGetItemOutput, BatchWriteItemOutput, TransactGetItemsOutput, TransactWriteItemsOutput);
    Vec::new()
}

/// Where the capacity of each call goes.
pub trait Sink: std::fmt::Debug + Send + Sync + 'static {
    /// What one call of `operation` consumed, by part; no parts when the response reported none.
    fn consumed(&self, operation: &str, kind: Kind, parts: &[Part]);
}

/// Logs one `dynamodb capacity` line per part under [`TARGET`] (a deployment's, when configured).
#[derive(Debug, Clone, Copy, Default)]
pub struct Log;

impl Sink for Log {
    fn consumed(&self, operation: &str, kind: Kind, parts: &[Part]) {
        if parts.is_empty() {
            tracing::info!(target: TARGET, operation, kind = kind.as_str(), reported = false, "dynamodb capacity");
        }
        for part in parts {
            tracing::info!(
                target: TARGET,
                operation,
                kind = kind.as_str(),
                reported = true,
                table = part.table,
                index = part.index.as_deref().unwrap_or(""),
                units = part.units,
                "dynamodb capacity"
            );
        }
    }
}

/// The interceptor: asks every DynamoDB request for its capacity by index and hands what comes
/// back to its sink. Add it to a DynamoDB client's configuration.
#[derive(Debug, Clone, Default)]
pub struct AskCapacity<S>(pub S);

/// The kind of units of the call in flight, between the request and its response.
#[derive(Debug, Clone, Copy)]
struct Asked(Kind);

impl aws_smithy_types::config_bag::Storable for Asked {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl<S: Sink> Intercept for AskCapacity<S> {
    fn name(&self) -> &'static str {
        "SundialAskCapacity"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(kind) = ask(context.input_mut()) {
            cfg.interceptor_state().store_put(Asked(kind));
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (Some(Asked(kind)), Ok(output)) = (cfg.load::<Asked>().copied(), context.output_or_error())
        else {
            return Ok(());
        };
        let operation = cfg.load::<Metadata>().map(|m| m.name().to_string()).unwrap_or_default();
        let parts: Vec<Part> = reported(output).iter().flat_map(parts).collect();
        self.0.consumed(&operation, kind, &parts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::Capacity;

    fn units(u: f64) -> Capacity {
        Capacity::builder().capacity_units(u).build()
    }

    #[test]
    fn a_breakdown_by_index_gives_the_table_and_each_index_its_share() {
        let consumed = ConsumedCapacity::builder()
            .table_name("runs")
            .capacity_units(4.0)
            .table(units(2.0))
            .global_secondary_indexes("by-due", units(2.0))
            .build();
        assert_eq!(
            parts(&consumed),
            vec![
                Part { table: "runs".into(), index: None, units: 2.0 },
                Part { table: "runs".into(), index: Some("by-due".into()), units: 2.0 },
            ]
        );
    }

    #[test]
    fn without_the_tables_own_share_it_is_what_the_indexes_leave_of_the_total() {
        // As ministack reports a transaction: the total and the indexes, no `Table` block.
        let consumed = ConsumedCapacity::builder()
            .table_name("jobs")
            .capacity_units(5.0)
            .global_secondary_indexes("by-due", units(1.0))
            .local_secondary_indexes("by-name", units(1.0))
            .build();
        let parts = parts(&consumed);
        assert_eq!(parts[0], Part { table: "jobs".into(), index: None, units: 3.0 });
        assert_eq!(parts.iter().map(|p| p.units).sum::<f64>(), 5.0);
    }

    #[test]
    fn a_total_alone_is_the_tables() {
        let consumed = ConsumedCapacity::builder().table_name("jobs").capacity_units(0.5).build();
        assert_eq!(parts(&consumed), vec![Part { table: "jobs".into(), index: None, units: 0.5 }]);
    }

    #[test]
    fn every_read_and_write_request_asks_for_its_capacity_by_index() {
        let mut put = Input::erase(PutItemInput::builder().table_name("t").build().expect("a valid input"));
        assert_eq!(ask(&mut put), Some(Kind::Write));
        let put = put.downcast::<PutItemInput>().ok().map(|i| i.return_consumed_capacity);
        assert_eq!(put, Some(Some(ReturnConsumedCapacity::Indexes)));

        let mut query = Input::erase(QueryInput::builder().table_name("t").build().expect("a valid input"));
        assert_eq!(ask(&mut query), Some(Kind::Read));

        let mut other = Input::erase(String::from("not a DynamoDB request"));
        assert_eq!(ask(&mut other), None);
    }
}
