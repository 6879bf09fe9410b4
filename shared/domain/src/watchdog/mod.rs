//! What the watchdog decides, without I/O: the repair each run needs ([`rules`]).

pub mod rules;
