//! A small structured writer for CUDA C++: indentation, blocks and typed constants,
//! so templates assemble code from typed parameters instead of ad-hoc string pasting.

use std::fmt::Write;

/// Accumulates CUDA C++ with managed indentation.
#[derive(Debug, Default, Clone)]
pub struct CudaWriter {
    out: String,
    indent: usize,
}

impl CudaWriter {
    /// An empty translation unit.
    pub fn new() -> Self {
        Self::default()
    }

    /// One line at the current indentation.
    pub fn line(&mut self, s: impl AsRef<str>) -> &mut Self {
        let s = s.as_ref();
        if s.is_empty() {
            self.out.push('\n');
        } else {
            for _ in 0..self.indent {
                self.out.push_str("  ");
            }
            self.out.push_str(s);
            self.out.push('\n');
        }
        self
    }

    /// Several lines (a verbatim snippet), each re-indented to the current level.
    pub fn lines(&mut self, s: &str) -> &mut Self {
        for l in s.lines() {
            self.line(l.trim_end());
        }
        self
    }

    /// `#include <header>`.
    pub fn include(&mut self, header: &str) -> &mut Self {
        self.line(format!("#include <{header}>"))
    }

    /// `constexpr <ty> <name> = <value>;` for a compile-time parameter.
    pub fn constant(&mut self, ty: &str, name: &str, value: impl std::fmt::Display) -> &mut Self {
        self.line(format!("constexpr {ty} {name} = {value};"))
    }

    /// Opens `head {` and indents; close with [`CudaWriter::close`].
    pub fn open(&mut self, head: impl AsRef<str>) -> &mut Self {
        self.line(format!("{} {{", head.as_ref()));
        self.indent += 1;
        self
    }

    /// Closes the innermost block with `}` plus an optional suffix (e.g. `;`).
    pub fn close(&mut self, suffix: &str) -> &mut Self {
        self.indent = self.indent.saturating_sub(1);
        self.line(format!("}}{suffix}"))
    }

    /// A `{ ... }` block filled by `f`.
    pub fn block(&mut self, head: impl AsRef<str>, f: impl FnOnce(&mut Self)) -> &mut Self {
        self.open(head);
        f(self);
        self.close("")
    }

    /// A `// comment` line.
    pub fn comment(&mut self, s: impl AsRef<str>) -> &mut Self {
        self.line(format!("// {}", s.as_ref()))
    }

    /// Formatted line (like `writeln!`).
    pub fn linef(&mut self, args: std::fmt::Arguments<'_>) -> &mut Self {
        let mut s = String::new();
        let _ = s.write_fmt(args);
        self.line(s)
    }

    /// The finished source.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_indent_and_close() {
        let mut w = CudaWriter::new();
        w.constant("int", "BM", 128);
        w.block("extern \"C\" __global__ void k(float* x)", |w| {
            w.line("x[threadIdx.x] = BM;");
        });
        let s = w.finish();
        assert_eq!(s, "constexpr int BM = 128;\nextern \"C\" __global__ void k(float* x) {\n  x[threadIdx.x] = BM;\n}\n");
    }
}
