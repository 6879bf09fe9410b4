//! What the tick decides, without I/O: which minutes a pass walks ([`minute_walk`]) and which
//! instants of one job it claims in them ([`plan`]).

pub mod minute_walk;
pub mod plan;
