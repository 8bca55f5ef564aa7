//! Reading a kubelet's `/metrics/resource` and turning two readings into
//! usage, as metrics-server does: CPU is the rate of the cumulative CPU time
//! between the readings, memory the latest working set.

use std::collections::HashMap;

/// A series' latest value and the time it was measured (ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub value: f64,
    pub millis: i64,
}

/// One reading of a node: its own and its containers' CPU time and memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub node_cpu: Option<Point>,
    pub node_memory: Option<Point>,
    /// By (namespace, pod, container).
    pub container_cpu: HashMap<Key, Point>,
    pub container_memory: HashMap<Key, Point>,
}

/// Usage over a window: nanocores and bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub nano_cores: u64,
    pub bytes: u64,
    /// The later reading's time (ms since the epoch).
    pub millis: i64,
    /// The window's length in ms.
    pub window_millis: i64,
}

/// Parses the text format's samples this reads; anything else is skipped.
pub fn parse(text: &str) -> Reading {
    let mut reading = Reading::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, rest) = match line.find('{') {
            Some(open) => match line[open..].find('}') {
                Some(close) => (&line[..open + close + 1], &line[open + close + 1..]),
                None => continue,
            },
            None => match line.split_once(' ') {
                Some((name, rest)) => (name, rest),
                None => continue,
            },
        };
        let mut fields = rest.split_whitespace();
        let (Some(value), Some(millis)) = (fields.next(), fields.next()) else {
            continue;
        };
        let (Ok(value), Ok(millis)) = (value.parse::<f64>(), millis.parse::<i64>()) else {
            continue;
        };
        let point = Point { value, millis };
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (series, ""),
        };
        let label = |key: &str| -> String {
            labels
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        let key = || (label("namespace"), label("pod"), label("container"));
        match name {
            "node_cpu_usage_seconds_total" => reading.node_cpu = Some(point),
            "node_memory_working_set_bytes" => reading.node_memory = Some(point),
            "container_cpu_usage_seconds_total" => {
                reading.container_cpu.insert(key(), point);
            }
            "container_memory_working_set_bytes" => {
                reading.container_memory.insert(key(), point);
            }
            _ => {}
        }
    }
    reading
}

/// The last two points of a cumulative series with different times.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pair {
    earlier: Option<Point>,
    later: Option<Point>,
}

impl Pair {
    /// Takes `point` if it is newer than the last one (a kubelet may answer
    /// the same measurement twice: cAdvisor's node figures change every few
    /// seconds).
    fn push(&mut self, point: Point) {
        if self.later.is_none_or(|later| point.millis > later.millis) {
            self.earlier = self.later;
            self.later = Some(point);
        }
    }
}

/// What is known of a node from its readings so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    node_cpu: Pair,
    node_memory: Option<Point>,
    container_cpu: HashMap<Key, Pair>,
    container_memory: HashMap<Key, Point>,
}

/// (namespace, pod, container).
pub type Key = (String, String, String);

impl History {
    /// Adds a reading; containers it no longer has are forgotten.
    pub fn record(&mut self, reading: Reading) {
        if let Some(point) = reading.node_cpu {
            self.node_cpu.push(point);
        }
        self.node_memory = reading.node_memory.or(self.node_memory);
        self.container_cpu
            .retain(|k, _| reading.container_cpu.contains_key(k));
        for (key, point) in reading.container_cpu {
            self.container_cpu.entry(key).or_default().push(point);
        }
        self.container_memory = reading.container_memory;
    }

    /// The node's usage, once two readings differ.
    pub fn node(&self) -> Option<Usage> {
        usage(self.node_cpu, self.node_memory)
    }

    /// A container's usage, once two readings differ.
    pub fn container(&self, key: &Key) -> Option<Usage> {
        usage(
            *self.container_cpu.get(key)?,
            self.container_memory.get(key).copied(),
        )
    }
}

/// Usage from a series' last two points and a memory point; `None` without
/// two points, or when the counter went back (the container restarted).
fn usage(cpu: Pair, memory: Option<Point>) -> Option<Usage> {
    let (earlier, later) = (cpu.earlier?, cpu.later?);
    let window_millis = later.millis - earlier.millis;
    if window_millis <= 0 || later.value < earlier.value {
        return None;
    }
    let seconds = window_millis as f64 / 1000.0;
    Some(Usage {
        nano_cores: ((later.value - earlier.value) / seconds * 1e9).round() as u64,
        bytes: memory.map_or(0, |m| m.value.max(0.0) as u64),
        millis: later.millis,
        window_millis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_two_readings() {
        let first = parse(
            "# TYPE x counter\n\
             container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} 1.5 1000\n\
             container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 4096 1000\n\
             node_cpu_usage_seconds_total 3 1000\n",
        );
        let second = parse(
            "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} 1.51 2000\n\
             node_cpu_usage_seconds_total 3.5 2000\n\
             resource_scrape_error 0\n",
        );
        let key = ("ns".to_owned(), "p".to_owned(), "c".to_owned());
        let mut history = History::default();
        history.record(first.clone());
        assert_eq!(history.container(&key), None, "one reading has no rate");
        history.record(second);
        let c = history.container(&key).unwrap();
        // The memory of the latest reading: the second has none for it.
        assert_eq!(
            (c.nano_cores, c.bytes, c.window_millis),
            (10_000_000, 0, 1000)
        );
        assert_eq!(history.node().unwrap().nano_cores, 500_000_000);
        // The same measurement again changes nothing.
        let mut again = history.clone();
        again.record(parse("node_cpu_usage_seconds_total 3.5 2000\n"));
        assert_eq!(again.node(), history.node());
        // A counter that went back (a restart) has no rate.
        history.record(parse(
            "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} 0.1 3000\n",
        ));
        assert_eq!(history.container(&key), None);
    }
}
