//! Assertions shared by the templates' unit tests about configs their checks refuse.

use super::Template;
use crate::Arch;

/// Asserts that `t` refuses `config` for `problem` on `arch` with a reason that contains
/// `needle`; on failure the message shows the config and the reason actually given.
#[track_caller]
pub(crate) fn assert_refused<T: Template>(
    t: &T,
    problem: &T::Problem,
    config: &T::Config,
    arch: Arch,
    needle: &str,
) {
    match t.check(problem, config, arch) {
        Ok(()) => panic!("{config:?} was accepted for {problem:?} on {arch:?}; expected a refusal naming `{needle}`"),
        Err(e) => assert!(
            e.reason.contains(needle),
            "{config:?} was refused for {problem:?} without naming `{needle}`: {}",
            e.reason
        ),
    }
}
