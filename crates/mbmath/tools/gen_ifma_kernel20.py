#!/usr/bin/env python3
"""Writes crates/mbmath/src/ifma/kernel20.rs: straight-line 20-limb (1024-bit)
IFMA Montgomery squaring and multiplication, every column a named local.

Why generated: the kernels must keep their column sums in SSA locals (registers,
with the few spills LLVM chooses) instead of an array in memory, and LLVM does
not fully unroll the 20x20 loops that would produce that. Run from the
repository root after changing the schedule:

    python3 crates/mbmath/tools/gen_ifma_kernel20.py && cargo fmt -p quickshake-mbmath

Schedule (the same arithmetic as the generic code in ifma.rs):
* product: column sums in blocks of lower columns; each product's low half goes
  to column i + j and its high half to i + j + 1; squaring adds each cross
  product once, doubles a block's finished columns, then adds the diagonal;
* reduction row by row: the digit u_i of column i, then u_i * m's two lowest
  limbs, the carry of column i into i + 1 and the next digit (so the digit chain
  is ~13 cycles per row), then u_i * m's other 18 limbs;
* normalisation of the upper 20 columns with one carry chain.
* `sqr20_select`: the squaring with one part of the next window's table scan
  stitched in (SEL_ENTRIES entries, one limb's masked moves every ~60
  multiply-adds), so the table's loads run while the multipliers are busy.
No branch and no address depends on the data: the scan's addresses depend on
the (public) part number only, its masks on the secret window.
"""

import os
import sys

N = 20
BLOCK = 10
# Table entries scanned per stitched squaring: WINDOW = 5 squarings cover 35
# slots of a 32-entry table (slots past the table repeat its last address with
# a mask that never matches).
SEL_ENTRIES = 7
TABLE = 32


def product_sqr(out):
    emitted_lo = set()
    for c0 in range(0, 2 * N - 1, BLOCK):
        c1 = min(c0 + BLOCK, 2 * N - 1)
        for j in range(N):
            for i in range(j):
                if c0 <= i + j < c1:
                    out.append(f"r{i + j} = lo(r{i + j}, a[{i}], a[{j}]);")
                    out.append(f"r{i + j + 1} = hi(r{i + j + 1}, a[{i}], a[{j}]);")
                    emitted_lo.add(i + j)
        # Columns c0..c1 are finished (their low halves all in, high halves
        # from column c - 1 in); column c1 still waits for the next block's
        # high halves and is doubled there.
        for c in range(c0, c1):
            out.append(f"r{c} = add(r{c}, r{c});")
        for c in range(c0, c1):
            if c % 2 == 0:
                i = c // 2
                out.append(f"r{c} = lo(r{c}, a[{i}], a[{i}]);")
                out.append(f"r{c + 1} = hi(r{c + 1}, a[{i}], a[{i}]);")
    # Column 39 holds only the high half of a19^2 (added above: not doubled).


def product_mul(out):
    for c0 in range(0, 2 * N - 1, BLOCK):
        c1 = min(c0 + BLOCK, 2 * N - 1)
        for j in range(N):
            for i in range(N):
                if c0 <= i + j < c1:
                    out.append(f"r{i + j} = lo(r{i + j}, a[{i}], b[{j}]);")
                    out.append(f"r{i + j + 1} = hi(r{i + j + 1}, a[{i}], b[{j}]);")


def reduction(out):
    out.append("let mut u = lo(zero, r0, k0);")
    for i in range(N):
        out.append(f"r{i} = lo(r{i}, u, m[0]);")
        out.append(f"r{i + 1} = hi(r{i + 1}, u, m[0]);")
        out.append(f"r{i + 1} = lo(r{i + 1}, u, m[1]);")
        out.append(f"r{i + 2} = hi(r{i + 2}, u, m[1]);")
        out.append(f"r{i + 1} = add(r{i + 1}, shr52(r{i}));")
        if i + 1 < N:
            out.append("let v = u;")
            out.append(f"u = lo(zero, r{i + 1}, k0);")
            cur = "v"
        else:
            cur = "u"
        for j in range(2, N):
            out.append(f"r{i + j} = lo(r{i + j}, {cur}, m[{j}]);")
            out.append(f"r{i + j + 1} = hi(r{i + j + 1}, {cur}, m[{j}]);")
    for k in range(N):
        c = N + k
        if k + 1 < N:
            out.append(f"r{c + 1} = add(r{c + 1}, shr52(r{c}));")
        out.append(f"x[{k}] = and(r{c}, mask);")


def stitch(body):
    """Interleaves one limb's scan of SEL_ENTRIES entries into `body` at even
    intervals (20 groups)."""
    groups = []
    for l in range(N):
        g = [f"let mut s = sel[{l}];"]
        for e in range(SEL_ENTRIES):
            g.append(f"s = mov_masked(s, q{e}, t{e}[{l}]);")
        g.append(f"sel[{l}] = s;")
        groups.append(g)
    head = []
    for e in range(SEL_ENTRIES):
        head.append(f"let slot = part * {SEL_ENTRIES} + {e};")
        head.append(f"let q{e} = eq_mask(idx, slot as u64);")
        head.append(f"let t{e} = &table[slot.min({TABLE - 1})];")
    out = head
    step = len(body) // (N + 1)
    for l in range(N):
        out += body[l * step:(l + 1) * step]
        out += groups[l]
    out += body[N * step:]
    return out


def function(name, doc, args, body):
    lines = [f"/// {d}" for d in doc]
    lines += [
        "#[target_feature(enable = \"avx512f,avx512ifma\")]",
        "#[allow(clippy::too_many_lines)]",
        f"pub(super) fn {name}({args}) {{",
        "    let zero = _mm512_setzero_si512();",
        "    let mask = _mm512_set1_epi64(MASK as i64);",
    ]
    lines += [f"    let mut r{c} = zero;" for c in range(2 * N)]
    lines += ["    " + s for s in body]
    lines.append("}")
    return "\n".join(lines)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    path = os.path.join(root, "src", "ifma", "kernel20.rs")
    sqr = ["let a = *x;"]
    product_sqr(sqr)
    reduction(sqr)
    sqr_sel = stitch(sqr[:])
    mul = ["let a = *x;"]
    product_mul(mul)
    reduction(mul)
    text = "\n".join(
        [
            "//! Generated by `crates/mbmath/tools/gen_ifma_kernel20.py`; do not edit by hand.",
            "//!",
            "//! 20-limb (1024-bit moduli) IFMA Montgomery products in place,",
            "//! `x = x * b / R mod m` and `x = x^2 / R mod m` with `R = 2^1040`:",
            "//! inputs `< 2 m`, result `< 2 m`, normalised 52-bit limbs. Straight-line",
            "//! code, every column sum a local: no branch and no address depends on",
            "//! the data.",
            "",
            "use core::arch::x86_64::*;",
            "",
            "use super::ops::{add, and, eq_mask, hi, lo, mov_masked, shr52, MASK};",
            "",
            function(
                "sqr20",
                ["`x = x^2 / R mod m` (`k0 = -m^-1 mod 2^52`)."],
                "x: &mut [__m512i; 20], m: &[__m512i; 20], k0: __m512i",
                sqr,
            ),
            "",
            function(
                "sqr20_select",
                [
                    "`x = x^2 / R mod m`, and part `part` (of 5) of the scan of",
                    f"`table` for lane-wise entry `idx` into `sel`: entries `{SEL_ENTRIES} part ..`",
                    f"`{SEL_ENTRIES} part + {SEL_ENTRIES - 1}` (those that exist) are moved into `sel`'s lanes",
                    "whose `idx` names them. Each `idx` lane `< 32`.",
                ],
                "x: &mut [__m512i; 20], m: &[__m512i; 20], k0: __m512i, "
                f"table: &[[__m512i; 20]; {TABLE}], idx: __m512i, part: usize, "
                "sel: &mut [__m512i; 20]",
                sqr_sel,
            ),
            "",
            function(
                "mul20",
                ["`x = x * b / R mod m` (`k0 = -m^-1 mod 2^52`)."],
                "x: &mut [__m512i; 20], b: &[__m512i; 20], m: &[__m512i; 20], k0: __m512i",
                mul,
            ),
            "",
        ]
    )
    with open(path, "w") as f:
        f.write(text)
    print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
