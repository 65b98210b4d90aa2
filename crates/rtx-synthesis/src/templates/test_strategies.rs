//! Proptest strategies shared by the templates' "checks are total" property tests.

use proptest::prelude::*;

/// Any `u32`, or one of `typical` (so that some drawn configs pass).
pub(crate) fn field(typical: &[u32]) -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), proptest::sample::select(typical.to_vec())]
}
