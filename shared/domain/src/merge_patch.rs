//! JSON merge patch (RFC 7386): how `PATCH /v1/jobs/{id}` changes a document, and the patch
//! that turns one document into another (what `sundial apply` sends).

use serde_json::Value;

/// Applies `patch` to `target` in place: objects merge key by key, `null` removes a key, and
/// anything else replaces the value.
pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                apply(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The smallest merge patch that turns `from` into `to`: `None` when they are equal. Merge
/// patches cannot express a `null` value, so `to` must hold none (job documents do not).
pub fn diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = serde_json::Map::new();
            for key in a.keys().filter(|k| !b.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            for (key, value) in b {
                let change = match a.get(key) {
                    Some(old) => diff(old, value),
                    None => Some(value.clone()),
                };
                if let Some(change) = change {
                    patch.insert(key.clone(), change);
                }
            }
            Some(Value::Object(patch))
        }
        _ => Some(to.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn json_without_nulls() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            (0i64..5).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from)
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn applying_the_diff_gives_the_target(from in json_without_nulls(), to in json_without_nulls()) {
            let mut patched = from.clone();
            if let Some(patch) = diff(&from, &to) {
                apply(&mut patched, &patch);
            }
            prop_assert_eq!(patched, to);
        }
    }

    #[test]
    fn diff_is_minimal() {
        let from = json!({"name": "a", "retry": {"max_attempts": 3, "backoff_s": 10}, "sla_s": 60});
        let to = json!({"name": "a", "retry": {"max_attempts": 5, "backoff_s": 10}});
        assert_eq!(diff(&from, &to), Some(json!({"retry": {"max_attempts": 5}, "sla_s": null})));
        assert_eq!(diff(&from, &from), None);
    }

    /// The examples of RFC 7386, appendix A.
    #[test]
    fn rfc_7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (mut target, patch, want) in cases {
            apply(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }
}
