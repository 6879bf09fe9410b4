//! Update expressions: an [`Update`] gathers a write's `SET`, `REMOVE` and `ADD` clauses with the
//! attribute names and values they use (and those of the write's condition, which stays a
//! string), and puts them on an UpdateItem request or a transaction's Update.

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::builders::UpdateBuilder;
use std::collections::HashMap;

/// One update expression and the placeholders it and the write's condition use. Paths are
/// written as DynamoDB reads them (`state` is reserved, so `#st` with `.name("#st", "state")`;
/// a map entry is `events.#id`), each value bound to its `:placeholder`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    set: Vec<String>,
    remove: Vec<String>,
    add: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Update {
    pub fn new() -> Self {
        Update::default()
    }

    /// `SET path = placeholder`, with `value` bound to the placeholder.
    pub fn set(self, path: impl Into<String>, placeholder: &str, value: AttributeValue) -> Self {
        let mut update = self.value(placeholder, value);
        update.set.push(format!("{} = {placeholder}", path.into()));
        update
    }

    /// `SET path = expression`, a value worked out by DynamoDB (`if_not_exists(n, :zero) + :one`)
    /// whose placeholders are bound with [`Update::value`].
    pub fn set_to(mut self, path: &str, expression: &str) -> Self {
        self.set.push(format!("{path} = {expression}"));
        self
    }

    /// `SET` to `value` if there is one, else `REMOVE`: an optional attribute written as it is.
    pub fn set_or_remove(self, path: &str, placeholder: &str, value: Option<AttributeValue>) -> Self {
        match value {
            Some(value) => self.set(path, placeholder, value),
            None => self.remove(path),
        }
    }

    /// `REMOVE path`.
    pub fn remove(mut self, path: impl Into<String>) -> Self {
        self.remove.push(path.into());
        self
    }

    /// `ADD path placeholder` (a number added to, or a set joined), with `value` bound.
    pub fn add(self, path: &str, placeholder: &str, value: AttributeValue) -> Self {
        let mut update = self.value(placeholder, value);
        update.add.push(format!("{path} {placeholder}"));
        update
    }

    /// Binds `#placeholder` to an attribute's name: a reserved word, or a name that is data.
    pub fn name(mut self, placeholder: impl Into<String>, attribute: impl Into<String>) -> Self {
        self.names.insert(placeholder.into(), attribute.into());
        self
    }

    /// Binds `:placeholder` to a value, for a worked-out `SET` or the write's condition. A
    /// placeholder means one value: binding it again to another is a defect.
    pub fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        let before = self.values.insert(placeholder.to_string(), value);
        debug_assert!(
            before.is_none_or(|before| Some(&before) == self.values.get(placeholder)),
            "{placeholder} bound to two values"
        );
        self
    }

    /// The update expression: `SET a = :a, b = :b REMOVE c ADD d :d`.
    pub fn expression(&self) -> String {
        let clauses = [("SET", &self.set), ("REMOVE", &self.remove), ("ADD", &self.add)];
        let written = clauses.iter().filter(|(_, parts)| !parts.is_empty());
        written.map(|(verb, parts)| format!("{verb} {}", parts.join(", "))).collect::<Vec<_>>().join(" ")
    }

    /// `request` with this update expression and its names and values (added to any the
    /// request has).
    pub fn apply(self, request: UpdateItemFluentBuilder) -> UpdateItemFluentBuilder {
        let mut request = request.update_expression(self.expression());
        for (placeholder, name) in self.names {
            request = request.expression_attribute_names(placeholder, name);
        }
        for (placeholder, value) in self.values {
            request = request.expression_attribute_values(placeholder, value);
        }
        request
    }

    /// A transaction's `update` with this update expression and its names and values.
    pub fn apply_transact(self, update: UpdateBuilder) -> UpdateBuilder {
        let mut update = update.update_expression(self.expression());
        for (placeholder, name) in self.names {
            update = update.expression_attribute_names(placeholder, name);
        }
        for (placeholder, value) in self.values {
            update = update.expression_attribute_values(placeholder, value);
        }
        update
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::item::{n, s};

    #[test]
    fn clauses_come_in_order_with_their_placeholders() {
        let update = Update::new()
            .set("#st", ":new", s("RUNNING"))
            .set_or_remove("lease_until", ":lease", None)
            .set_to("job_count", "if_not_exists(job_count, :zero) + :one")
            .add("version", ":one", n(1))
            .remove("inflight_at")
            .set_or_remove("retry_at", ":retry", Some(s("t")))
            .name("#st", "state")
            .value(":zero", n(0));
        assert_eq!(
            update.expression(),
            "SET #st = :new, job_count = if_not_exists(job_count, :zero) + :one, retry_at = :retry \
             REMOVE lease_until, inflight_at ADD version :one"
        );
        assert_eq!(update.names, HashMap::from([("#st".to_string(), "state".to_string())]));
        let bound: Vec<&str> = {
            let mut bound: Vec<&str> = update.values.keys().map(String::as_str).collect();
            bound.sort_unstable();
            bound
        };
        assert_eq!(bound, [":new", ":one", ":retry", ":zero"]);
    }

    #[test]
    fn one_placeholder_may_serve_two_paths() {
        let update = Update::new().set("next_run_at", ":next", s("t")).set("due_at", ":next", s("t"));
        assert_eq!(update.expression(), "SET next_run_at = :next, due_at = :next");
        assert_eq!(update.values.len(), 1);
    }

    #[test]
    fn removals_alone_are_a_remove_clause() {
        let update = Update::new().remove("unsent_alert").remove("alert_taken_at");
        assert_eq!(update.expression(), "REMOVE unsent_alert, alert_taken_at");
        assert_eq!(Update::new().expression(), "");
    }
}
