//! Amazon Resource Names, parsed strictly: `arn:<partition>:<service>:<region>:<account>:<resource>`
//! with an AWS partition (`aws`, `aws-cn`, `aws-us-gov`, …), a region, a 12-digit account and a
//! resource. What the resource must look like is each service's ([`Arn::resource_named`]).
//!
//! Hand-written rather than a crate: the generic split is a few lines, the checks that matter are
//! the service-specific resource forms no ARN crate knows, and the crates bring `regex` into the
//! domain for it (docs/decisions.md, "ARNs").

/// The parts of an ARN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arn<'a> {
    pub partition: &'a str,
    pub service: &'a str,
    pub region: &'a str,
    pub account: &'a str,
    /// Everything after the account, colons included (`stateMachine:nightly`).
    pub resource: &'a str,
}

impl<'a> Arn<'a> {
    /// The parts of `text` if it is an ARN of `service` in an AWS partition, with a region, a
    /// 12-digit account and a resource.
    pub fn parse(text: &'a str, service: &str) -> Option<Self> {
        let mut parts = text.splitn(6, ':');
        let (Some("arn"), Some(partition), Some(found), Some(region), Some(account), Some(resource)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let ok = found == service
            && (partition == "aws" || partition.strip_prefix("aws-").is_some_and(word))
            && word(region)
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && !resource.is_empty()
            && resource.chars().all(|c| !c.is_control() && !c.is_whitespace());
        ok.then_some(Arn { partition, service: found, region, account, resource })
    }

    /// The name after `prefix` (`stateMachine:`, `event-bus/`), if the resource is of that type
    /// and its name is 1 to `max` characters, each of which `allowed` accepts.
    pub fn resource_named(
        &self,
        prefix: &str,
        max: usize,
        allowed: impl Fn(char) -> bool,
    ) -> Option<&'a str> {
        let name = self.resource.strip_prefix(prefix)?;
        (!name.is_empty() && name.chars().count() <= max && name.chars().all(allowed)).then_some(name)
    }
}

/// A character of a word name: an ASCII letter or digit, `-` or `_`.
pub fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A character Step Functions accepts in a state machine's or an execution's name: anything but
/// whitespace, brackets, wildcards, control characters and `"#%\^|~`$&,;:/`.
pub fn step_functions_name_char(c: char) -> bool {
    !c.is_whitespace() && !c.is_control() && !"<>{}[]?*\"#%\\^|~`$&,;:/".contains(c)
}

/// A lower-case word of letters, digits and dashes: a region, a partition's suffix.
fn word(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_parse_into_their_parts() {
        let arn = Arn::parse("arn:aws:states:eu-west-1:123456789012:stateMachine:nightly", "states").unwrap();
        assert_eq!(
            (arn.partition, arn.region, arn.account, arn.resource),
            ("aws", "eu-west-1", "123456789012", "stateMachine:nightly")
        );
        assert_eq!(arn.resource_named("stateMachine:", 80, word_char), Some("nightly"));
        assert_eq!(arn.resource_named("event-bus/", 256, word_char), None);
        let wide =
            Arn::parse("arn:aws:states:eu-west-1:123456789012:stateMachine:Report.v2+(EU)@night", "states");
        assert!(wide.unwrap().resource_named("stateMachine:", 80, step_functions_name_char).is_some());
        assert!(Arn::parse("arn:aws-cn:events:cn-north-1:123456789012:event-bus/x", "events").is_some());
    }

    #[test]
    fn malformed_arns_are_refused() {
        for text in [
            "",
            "arn:aws:states:eu-west-1:123456789012",
            "arn:aws:sns:eu-west-1:123456789012:stateMachine:x",
            "arn:gcp:states:eu-west-1:123456789012:stateMachine:x",
            "arn:aws:states::123456789012:stateMachine:x",
            "arn:aws:states:EU-WEST-1:123456789012:stateMachine:x",
            "arn:aws:states:eu-west-1:12345:stateMachine:x",
            "arn:aws:states:eu-west-1:123456789012:",
            "arn:aws:states:eu-west-1:123456789012:state Machine:x",
            "arn:aws:states:eu-west-1:123456789012:stateMachine:a\tb",
            "ARN:aws:states:eu-west-1:123456789012:stateMachine:x",
        ] {
            assert_eq!(Arn::parse(text, "states"), None, "{text}");
        }
        let arn = Arn::parse("arn:aws:states:eu-west-1:123456789012:stateMachine:a/b", "states").unwrap();
        assert_eq!(
            arn.resource_named("stateMachine:", 80, step_functions_name_char),
            None,
            "a slash in a name"
        );
        let long = format!("arn:aws:states:eu-west-1:123456789012:stateMachine:{}", "a".repeat(81));
        assert_eq!(Arn::parse(&long, "states").unwrap().resource_named("stateMachine:", 80, word_char), None);
    }
}
