//! The `expect` step: ordered patterns as a subsequence of watched states, each within its bound, plus `never`.
//!
//! [`evaluate`] is pure: given the states seen so far and the current time it says whether the step is
//! satisfied, has failed, or must wait for more states. The runner calls it on every new state and at
//! the next deadline.

use std::time::Duration;

use serde::Serialize;

use crate::case::{PodExpectation, PodPattern};

use super::matching::mismatch;
use super::timeline::State;

/// Where an `expect` step begins: the cursor left by the previous step and the step's start time.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// Index of the first state the step may match (the state matched last by the previous step).
    pub cursor: usize,
    /// When the step began, relative to the case start.
    pub at: Duration,
    /// The bound for a pattern that gives none (what is left of the case timeout).
    pub default_within: Duration,
}

/// The outcome of evaluating a step against the states seen so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Every pattern matched and the `hold` time has passed; the next step starts at `cursor`.
    Done {
        /// Index of the state that matched the last pattern.
        cursor: usize,
    },
    /// More states (or time) are needed; re-evaluate at the latest at `deadline`.
    Waiting {
        /// When the step must be evaluated again even without a new state.
        deadline: Duration,
    },
    /// The step failed.
    Failed(Failure),
}

/// Why an `expect` step failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Failure {
    /// A pattern was not seen in time.
    NotSeen {
        /// Index in `states`.
        pattern_index: usize,
        /// The pattern, as YAML.
        pattern: String,
        /// The bound that ran out.
        within_ms: u128,
        /// When its bound started, since the case start.
        since_ms: u128,
        /// The last state considered and what differed, if any state was seen.
        closest: Option<String>,
    },
    /// The first state to match a pattern came sooner than its `after`.
    TooEarly {
        /// Index in `states`.
        pattern_index: usize,
        /// The pattern, as YAML.
        pattern: String,
        /// The bound from below.
        after_ms: u128,
        /// When both bounds started, since the case start.
        since_ms: u128,
        /// The matching state's summary.
        state: String,
    },
    /// A `never` pattern matched a state.
    Forbidden {
        /// Index in `never`.
        pattern_index: usize,
        /// The pattern, as YAML.
        pattern: String,
        /// The offending state's summary.
        state: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotSeen {
                pattern_index,
                pattern,
                within_ms,
                since_ms,
                closest,
            } => {
                write!(
                    f,
                    "states[{pattern_index}] not seen within {:.1}s of +{:.3}s: {pattern}",
                    *within_ms as f64 / 1000.0,
                    *since_ms as f64 / 1000.0
                )?;
                if let Some(c) = closest {
                    write!(f, "\n  last state: {c}")?;
                }
                Ok(())
            }
            Failure::TooEarly {
                pattern_index,
                pattern,
                after_ms,
                since_ms,
                state,
            } => write!(
                f,
                "states[{pattern_index}] seen sooner than {:.1}s after +{:.3}s: {pattern}\n  state: {state}",
                *after_ms as f64 / 1000.0,
                *since_ms as f64 / 1000.0
            ),
            Failure::Forbidden {
                pattern_index,
                pattern,
                state,
            } => write!(
                f,
                "never[{pattern_index}] matched: {pattern}\n  state: {state}"
            ),
        }
    }
}

/// A pattern as a one-line flow YAML mapping, fields in the order the case format declares them.
pub fn pattern_text(p: &PodPattern) -> String {
    serde_yaml::to_value(p)
        .map(|v| compact(&v))
        .unwrap_or_else(|_| format!("{p:?}"))
}

fn compact(v: &serde_yaml::Value) -> String {
    use serde_yaml::Value;
    match v {
        Value::Mapping(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", compact(k), compact(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Sequence(items) => {
            let parts: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => "null".to_string(),
        Value::Tagged(t) => compact(&t.value),
    }
}

/// Evaluates `exp` over `states` at time `now` (both relative to the case start).
pub fn evaluate(exp: &PodExpectation, states: &[State], start: Start, now: Duration) -> Progress {
    // `never` covers every state from the step's cursor on.
    for state in states.iter().skip(start.cursor) {
        for (i, p) in exp.never.iter().enumerate() {
            // A removal matches only `gone: true`; field patterns look at live objects.
            if (p.gone || !state.is_gone()) && mismatch(p, state).is_none() {
                return Progress::Failed(Failure::Forbidden {
                    pattern_index: i,
                    pattern: pattern_text(p),
                    state: state.summary(),
                });
            }
        }
    }
    let mut cursor = start.cursor;
    let mut anchor = start.at;
    // When each pattern matched: what a later pattern's `from` counts from.
    let mut matched: Vec<Duration> = Vec::with_capacity(exp.states.len());
    for (i, p) in exp.states.iter().enumerate() {
        let within = p
            .within
            .or(exp.within)
            .map(|d| d.get())
            .unwrap_or(start.default_within);
        // The bounds start at the state `from` names (validated to be an earlier pattern).
        let base = p
            .from
            .and_then(|k| matched.get(k).copied())
            .unwrap_or(anchor);
        let deadline = base + within;
        let found = states
            .iter()
            .enumerate()
            .skip(cursor)
            .take_while(|(_, s)| s.at <= deadline)
            .find(|(_, s)| mismatch(p, s).is_none());
        match found {
            Some((_, s)) if p.after.is_some_and(|after| s.at < base + after.get()) => {
                return Progress::Failed(Failure::TooEarly {
                    pattern_index: i,
                    pattern: pattern_text(p),
                    after_ms: p.after.map_or(0, |a| a.get().as_millis()),
                    since_ms: base.as_millis(),
                    state: s.summary(),
                });
            }
            Some((idx, s)) => {
                cursor = idx;
                anchor = anchor.max(s.at);
                matched.push(s.at);
            }
            None => {
                let late_state = states.iter().skip(cursor).any(|s| s.at > deadline);
                if late_state || now > deadline {
                    let closest = states
                        .iter()
                        .skip(cursor)
                        .take_while(|s| s.at <= deadline)
                        .last()
                        .or_else(|| states.get(cursor))
                        .map(|s| match mismatch(p, s) {
                            Some(m) => format!("{} — {m}", s.summary()),
                            None => s.summary(),
                        });
                    return Progress::Failed(Failure::NotSeen {
                        pattern_index: i,
                        pattern: pattern_text(p),
                        within_ms: within.as_millis(),
                        since_ms: base.as_millis(),
                        closest,
                    });
                }
                return Progress::Waiting { deadline };
            }
        }
    }
    if let Some(hold) = exp.hold {
        let until = anchor + hold.get();
        if now < until {
            return Progress::Waiting { deadline: until };
        }
    }
    Progress::Done { cursor }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::CaseDuration;
    use crate::expect::testing::{state, state_gone};
    use serde_json::json;

    fn exp(yaml: &str) -> PodExpectation {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn start() -> Start {
        Start {
            cursor: 0,
            at: Duration::ZERO,
            default_within: Duration::from_secs(30),
        }
    }

    fn running(at: u64) -> State {
        state(
            at,
            json!({"phase": "Running", "containerStatuses": [
            {"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {}}}]}),
        )
    }

    fn pending(at: u64) -> State {
        state(at, json!({"phase": "Pending"}))
    }

    fn failed(at: u64) -> State {
        state(
            at,
            json!({"phase": "Failed", "containerStatuses": [
            {"name": "c", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
             "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}),
        )
    }

    #[test]
    fn patterns_print_in_declaration_order() {
        let e = exp(
            "states:\n- {containers: {c: {exitCode: 137, state: terminated}}, phase: Failed, within: 2s}\n",
        );
        assert_eq!(
            pattern_text(&e.states[0]),
            "{within: 2s, phase: Failed, containers: {c: {state: terminated, exitCode: 137}}}"
        );
    }

    #[test]
    fn ordered_subsequence_matches() {
        let e = exp(
            "states:\n- phase: Running\n- {phase: Failed, containers: {c: {exitCode: 137}}}\n- gone: true\n",
        );
        let states = vec![
            pending(0),
            running(1000),
            running(1500),
            failed(3000),
            state_gone(3100),
        ];
        assert_eq!(
            evaluate(&e, &states, start(), Duration::from_secs(4)),
            Progress::Done { cursor: 4 }
        );
    }

    #[test]
    fn waits_until_deadline_then_fails_with_closest_state() {
        let e = exp("within: 2s\nstates:\n- phase: Failed\n");
        let states = vec![pending(0), running(1000)];
        assert_eq!(
            evaluate(&e, &states, start(), Duration::from_millis(1500)),
            Progress::Waiting {
                deadline: Duration::from_secs(2)
            }
        );
        match evaluate(&e, &states, start(), Duration::from_millis(2500)) {
            Progress::Failed(Failure::NotSeen { closest, .. }) => {
                let c = closest.unwrap();
                assert!(c.contains("phase=Running"), "{c}");
                assert!(c.contains("phase is Running, expected Failed"), "{c}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_state_after_the_bound_fails_at_once() {
        let e = exp("states:\n- phase: Running\n- {phase: Failed, within: 1s}\n");
        let states = vec![running(1000), failed(5000)];
        assert!(matches!(
            evaluate(&e, &states, start(), Duration::from_secs(5)),
            Progress::Failed(Failure::NotSeen {
                pattern_index: 1,
                ..
            })
        ));
    }

    #[test]
    fn a_state_sooner_than_after_fails_and_one_between_the_bounds_passes() {
        let e = exp("states:\n- phase: Running\n- {phase: Failed, after: 2s, within: 4s}\n");
        match evaluate(
            &e,
            &[running(1000), failed(2500)],
            start(),
            Duration::from_secs(3),
        ) {
            Progress::Failed(
                f @ Failure::TooEarly {
                    pattern_index: 1, ..
                },
            ) => {
                let text = f.to_string();
                assert!(
                    text.starts_with("states[1] seen sooner than 2.0s after +1.000s"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            evaluate(
                &e,
                &[running(1000), failed(3500)],
                start(),
                Duration::from_secs(4)
            ),
            Progress::Done { cursor: 1 }
        );
        assert!(matches!(
            evaluate(
                &e,
                &[running(1000), failed(5500)],
                start(),
                Duration::from_secs(6)
            ),
            Progress::Failed(Failure::NotSeen {
                pattern_index: 1,
                ..
            })
        ));
    }

    #[test]
    fn from_counts_the_bounds_from_an_earlier_pattern() {
        // Failed 3 s after the first Running, with a Pending between them.
        let e = exp(
            "states:\n- phase: Running\n- phase: Pending\n- {phase: Failed, from: 0, after: 2500ms, within: 4s}\n",
        );
        let states = [running(1000), pending(3000), failed(4000)];
        assert_eq!(
            evaluate(&e, &states, start(), Duration::from_secs(5)),
            Progress::Done { cursor: 2 }
        );
        // Counted from the Pending instead, 1 s is too soon.
        let e = exp(
            "states:\n- phase: Running\n- phase: Pending\n- {phase: Failed, after: 2500ms, within: 4s}\n",
        );
        assert!(matches!(
            evaluate(&e, &states, start(), Duration::from_secs(5)),
            Progress::Failed(Failure::TooEarly {
                pattern_index: 2,
                since_ms: 3000,
                ..
            })
        ));
    }

    #[test]
    fn order_matters() {
        let e = exp("states:\n- phase: Failed\n- phase: Running\n");
        let states = vec![running(1000), failed(2000)];
        assert!(matches!(
            evaluate(&e, &states, start(), Duration::from_secs(40)),
            Progress::Failed(Failure::NotSeen {
                pattern_index: 1,
                ..
            })
        ));
    }

    #[test]
    fn never_fails_with_the_state() {
        let e = exp("states:\n- phase: Failed\nnever:\n- phase: Running\n");
        let states = vec![pending(0), running(1000), failed(2000)];
        match evaluate(&e, &states, start(), Duration::from_secs(3)) {
            Progress::Failed(Failure::Forbidden { state, .. }) => {
                assert!(state.contains("+  1.000s"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hold_keeps_watching() {
        let e = exp("never:\n- phase: Running\nhold: 5s\n");
        let states = vec![pending(0)];
        let s = Start {
            at: Duration::from_secs(1),
            ..start()
        };
        assert_eq!(
            evaluate(&e, &states, s, Duration::from_secs(2)),
            Progress::Waiting {
                deadline: Duration::from_secs(6)
            }
        );
        assert_eq!(
            evaluate(&e, &states, s, Duration::from_secs(6)),
            Progress::Done { cursor: 0 }
        );
    }

    #[test]
    fn cursor_restricts_later_steps() {
        let e = exp("states:\n- phase: Pending\n");
        let states = vec![pending(0), running(1000)];
        let s = Start {
            cursor: 1,
            at: Duration::from_secs(1),
            default_within: Duration::from_secs(1),
        };
        assert!(matches!(
            evaluate(&e, &states, s, Duration::from_secs(3)),
            Progress::Failed(_)
        ));
        let _ = CaseDuration::default();
    }
}
