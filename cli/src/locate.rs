//! Where a field is in a YAML file: the line of every node, by its path (`jobs[2].retry.max_attempts`,
//! the way validation errors name fields), so that an error can name the file's line.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Node paths to 1-based line numbers.
#[derive(Debug, Default)]
pub struct Lines(HashMap<String, usize>);

enum Frame {
    Mapping { path: String, key: Option<String> },
    Sequence { path: String, index: usize },
}

#[derive(Default)]
struct Walker {
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
}

impl Walker {
    /// The path of the node about to be read, or `None` when a mapping's key comes next.
    fn next_path(&self) -> Option<String> {
        match self.stack.last() {
            None => Some(String::new()),
            Some(Frame::Mapping { key: None, .. }) => None,
            Some(Frame::Mapping { path, key: Some(k) }) => {
                Some(if path.is_empty() { k.clone() } else { format!("{path}.{k}") })
            }
            Some(Frame::Sequence { path, index }) => Some(format!("{path}[{index}]")),
        }
    }

    /// A value was read: the parent moves to its next key or item.
    fn advance(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Mapping { key, .. }) => *key = None,
            Some(Frame::Sequence { index, .. }) => *index += 1,
            None => {}
        }
    }

    fn record(&mut self, path: &str, mark: Marker) {
        self.lines.entry(path.to_string()).or_insert(mark.line().max(1));
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(text, ..) => match self.next_path() {
                None => {
                    if let Some(Frame::Mapping { path, key }) = self.stack.last_mut() {
                        let full = if path.is_empty() { text.clone() } else { format!("{path}.{text}") };
                        *key = Some(text);
                        self.record(&full, mark);
                    }
                }
                Some(path) => {
                    self.record(&path, mark);
                    self.advance();
                }
            },
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = self.next_path().unwrap_or_default();
                self.record(&path, mark);
                self.stack.push(match event {
                    Event::MappingStart(..) => Frame::Mapping { path, key: None },
                    _ => Frame::Sequence { path, index: 0 },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
                self.advance();
            }
            Event::Alias(_) => self.advance(),
            _ => {}
        }
    }
}

impl Lines {
    /// Reads the lines of `text`; a file that does not parse has none (serde reports it).
    pub fn of(text: &str) -> Lines {
        let mut walker = Walker::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut walker, false).is_err() {
            return Lines::default();
        }
        Lines(walker.lines)
    }

    /// The line of `path`, or of its nearest enclosing node that has one.
    pub fn line(&self, path: &str) -> Option<usize> {
        let mut path = path.to_string();
        loop {
            if let Some(line) = self.0.get(&path) {
                return Some(*line);
            }
            let cut = path.rfind(['.', '['])?;
            path.truncate(cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_by_their_validation_path() {
        let text = "jobs:\n  - name: a\n    target: {type: http, url: x}\n  - name: b\n    retry:\n      max_attempts: 99\n    notify:\n      email:\n        - a@b.test\n        - nobody\n";
        let lines = Lines::of(text);
        assert_eq!(lines.line("jobs[0].name"), Some(2));
        assert_eq!(lines.line("jobs[0].target.url"), Some(3));
        assert_eq!(lines.line("jobs[1]"), Some(4));
        assert_eq!(lines.line("jobs[1].retry.max_attempts"), Some(6));
        assert_eq!(lines.line("jobs[1].notify.email[1]"), Some(10));
        assert_eq!(lines.line("jobs[1].schedule.cron"), Some(4), "a missing field falls back to its job");
    }
}
