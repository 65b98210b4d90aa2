//! The search space as strategies see it: a list of configs in their JSON form, each mapped to
//! ordinal coordinates along the config's fields, so a strategy can walk "neighbouring" configs
//! without knowing the template's types. The same space is built from typed configs by the tuner
//! and from a recorded fixture by the replay, so a strategy behaves identically in both.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// One field of the config (a leaf of its JSON form), with the distinct values it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Dimension {
    /// JSON path of the field, e.g. `tile.m` or `stages`.
    pub path: String,
    /// Distinct values in ascending order (numbers by value, absent (`null`) first).
    pub values: Vec<Value>,
    /// True when every present value is a number: steps along it are ordered.
    pub numeric: bool,
}

/// A hint whose length does not match the space.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cost hint has {got} entries for a space of {expected} configs")]
pub struct HintLengthMismatch {
    /// Configs in the space.
    pub expected: usize,
    /// Entries in the hint.
    pub got: usize,
}

/// Configs plus their coordinates, the default config and an optional cost-model hint.
#[derive(Debug, Clone)]
pub struct SearchSpace {
    configs: Vec<Value>,
    dims: Vec<Dimension>,
    coords: Vec<Vec<u32>>,
    by_text: HashMap<String, usize>,
    default: Option<usize>,
    hint: Option<Vec<f64>>,
}

fn flatten(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                flatten(x, &join(k), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                flatten(x, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

fn value_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .unwrap_or(f64::NAN)
            .total_cmp(&y.as_f64().unwrap_or(f64::NAN)),
        _ => a.to_string().cmp(&b.to_string()),
    })
}

impl SearchSpace {
    /// Indexes `configs` (their order is kept: index `i` is `configs[i]`).
    pub fn new(configs: Vec<Value>) -> SearchSpace {
        let flat: Vec<BTreeMap<String, Value>> = configs
            .iter()
            .map(|c| {
                let mut m = BTreeMap::new();
                flatten(c, "", &mut m);
                m
            })
            .collect();
        let mut paths: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for f in &flat {
            for (p, v) in f {
                let vals = paths.entry(p.clone()).or_default();
                if !vals.contains(v) {
                    vals.push(v.clone());
                }
            }
        }
        let mut dims = Vec::with_capacity(paths.len());
        for (path, mut values) in paths {
            if flat.iter().any(|f| !f.contains_key(&path)) && !values.contains(&Value::Null) {
                values.push(Value::Null);
            }
            values.sort_by(value_order);
            let numeric = values.iter().all(|v| v.is_number() || v.is_null());
            dims.push(Dimension {
                path,
                values,
                numeric,
            });
        }
        let coords = flat
            .iter()
            .map(|f| {
                dims.iter()
                    .map(|d| {
                        let v = f.get(&d.path).unwrap_or(&Value::Null);
                        d.values.iter().position(|x| x == v).unwrap_or(0) as u32
                    })
                    .collect()
            })
            .collect();
        let mut by_text = HashMap::with_capacity(configs.len());
        for (i, c) in configs.iter().enumerate() {
            by_text.entry(c.to_string()).or_insert(i);
        }
        SearchSpace {
            configs,
            dims,
            coords,
            by_text,
            default: None,
            hint: None,
        }
    }

    /// Marks `index` as the template's default config (ignored if out of range).
    pub fn with_default(mut self, index: Option<usize>) -> SearchSpace {
        self.default = index.filter(|&i| i < self.configs.len());
        self
    }

    /// Attaches a cost-model estimate per config (lower is predicted faster; non-finite means
    /// "no estimate").
    pub fn with_hint(mut self, hint: Vec<f64>) -> Result<SearchSpace, HintLengthMismatch> {
        if hint.len() != self.configs.len() {
            return Err(HintLengthMismatch {
                expected: self.configs.len(),
                got: hint.len(),
            });
        }
        self.hint = Some(hint);
        Ok(self)
    }

    /// Number of configs.
    pub fn len(&self) -> usize {
        self.configs.len()
    }

    /// True when there are no configs.
    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// Config `index` in JSON form.
    pub fn config(&self, index: usize) -> Option<&Value> {
        self.configs.get(index)
    }

    /// Every config in JSON form.
    pub fn configs(&self) -> &[Value] {
        &self.configs
    }

    /// The index of a config equal to `config`, if present.
    pub fn index_of(&self, config: &Value) -> Option<usize> {
        self.by_text.get(&config.to_string()).copied()
    }

    /// The fields the configs vary over.
    pub fn dims(&self) -> &[Dimension] {
        &self.dims
    }

    /// Ordinal coordinates of config `index` (one per [`SearchSpace::dims`] entry).
    pub fn coords(&self, index: usize) -> &[u32] {
        self.coords.get(index).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The template's default config, when it is in the space.
    pub fn default_index(&self) -> Option<usize> {
        self.default
    }

    /// The cost-model estimate for `index`, when one was given and is finite.
    pub fn hint(&self, index: usize) -> Option<f64> {
        self.hint
            .as_ref()
            .and_then(|h| h.get(index))
            .copied()
            .filter(|x| x.is_finite())
    }

    /// True when a cost-model hint is attached.
    pub fn has_hint(&self) -> bool {
        self.hint.is_some()
    }

    /// Distance between two configs: ordinal steps along numeric fields, 1 per differing
    /// categorical field.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        let (ca, cb) = (self.coords(a), self.coords(b));
        self.dims
            .iter()
            .zip(ca.iter().zip(cb))
            .map(|(d, (x, y))| {
                if d.numeric {
                    x.abs_diff(*y)
                } else {
                    u32::from(x != y)
                }
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn coordinates_follow_numeric_order() {
        let s = SearchSpace::new(vec![
            json!({"bm": 128, "bn": 64, "kind": "wgmma"}),
            json!({"bm": 64, "bn": 64, "kind": "mma"}),
            json!({"bm": 256, "bn": 128, "kind": "mma"}),
        ]);
        let paths: Vec<_> = s.dims().iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["bm", "bn", "kind"]);
        assert_eq!(s.dims()[0].values, vec![json!(64), json!(128), json!(256)]);
        assert!(s.dims()[0].numeric && !s.dims()[2].numeric);
        assert_eq!(s.coords(0), &[1, 0, 1]);
        assert_eq!(s.distance(1, 2), 2 + 1);
        assert_eq!(
            s.distance(0, 1),
            1 + 1,
            "one step in bm, one categorical change"
        );
        assert_eq!(
            s.index_of(&json!({"bm": 64, "bn": 64, "kind": "mma"})),
            Some(1)
        );
    }

    #[test]
    fn nested_and_enum_configs_flatten() {
        // Serde's external enum tagging gives different paths per variant; absent fields are null.
        let s = SearchSpace::new(vec![
            json!({"tile": {"m": 64, "n": 32}, "sched": {"Persistent": {"waves": 2}}}),
            json!({"tile": {"m": 64, "n": 64}, "sched": "Plain"}),
        ]);
        let paths: Vec<_> = s.dims().iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            ["sched", "sched.Persistent.waves", "tile.m", "tile.n"]
        );
        assert_eq!(s.dims()[1].values, vec![Value::Null, json!(2)]);
        assert_eq!(
            s.distance(0, 1),
            3,
            "sched, sched.Persistent.waves and tile.n differ"
        );
    }

    #[test]
    fn hints_and_defaults_are_checked() {
        let s = SearchSpace::new(vec![json!(1), json!(2)]);
        assert_eq!(
            s.clone().with_hint(vec![1.0]).unwrap_err(),
            HintLengthMismatch {
                expected: 2,
                got: 1
            }
        );
        let s = s
            .with_default(Some(1))
            .with_hint(vec![f64::NAN, 3.0])
            .unwrap();
        assert_eq!(
            (s.default_index(), s.hint(0), s.hint(1)),
            (Some(1), None, Some(3.0))
        );
        assert_eq!(
            SearchSpace::new(vec![json!(1)])
                .with_default(Some(5))
                .default_index(),
            None
        );
    }
}
