#!/usr/bin/env python3
"""Writes crates/mbmath/src/ifma/kernel20.rs: straight-line 20-limb (1024-bit)
IFMA Montgomery squaring and multiplication, every column a named local.

Why generated: the kernels must keep their column sums in SSA locals (registers,
with the few spills LLVM chooses) instead of an array in memory, and LLVM does
not fully unroll the 20x20 loops that would produce that. Run from the
repository root after changing the schedule:

    python3 crates/mbmath/tools/gen_ifma_kernel20.py && cargo fmt -p quickshake-mbmath

Schedule:
* each product's low half goes to column i + j, its high half to i + j + 1;
* multiplication, one Karatsuba step: a b = a0 b0 + (a0 b0 + a1 b1
  + (a0 - a1)(b1 - b0)) 2^520 + a1 b1 2^1040, three 10x10 products (300
  instead of 400; the middle one of |a0 - a1| and |b1 - b0|, negated per lane
  under the xor of their signs as (x ^ s) - s);
* squaring, one Karatsuba step: a = a0 + a1 2^520 (10 limbs each),
  a^2 = a0^2 + (a0^2 + a1^2 - |a0 - a1|^2) 2^520 + a1^2 2^1040, three 10-limb
  squares (cross products once, doubled, plus the diagonal): 165 products
  instead of 210. |a0 - a1| comes from a borrow chain and a masked
  complement (no branch). The middle columns may be negative: every column
  is a signed 64-bit sum (|column| < 2^62: each 10-limb product column is
  below 20 * 2^52, the reduction adds 40 terms below 2^52 and the carries)
  and the reductions carry with arithmetic shifts;
* reduction row by row: the digit u_i of column i, then u_i * m's two lowest
  limbs, the carry of column i into i + 1 and the next digit (so the digit chain
  is ~13 cycles per row), then u_i * m's other 18 limbs;
* normalisation of the upper 20 columns with one carry chain.
* `sqr20_select`: the squaring with one part of the next window's table scan
  stitched in (SEL_ENTRIES entries, one limb's and-or steps every ~60
  multiply-adds), so the table's loads run while the multipliers are busy.
  The scan ors every entry in under an all-ones/all-zeros vector mask
  (`vpternlogq`, one logic op): merge-masked loads (`vmovdqa64 m, zmm{k}`)
  cost ~6% of the squaring on Zen 4, the logic ops nothing measurable.
No branch and no address depends on the data: the scan's addresses depend on
the (public) part number only, its masks on the secret window.
"""

import os
import sys

N = 20
# Table entries scanned per stitched squaring: WINDOW = 5 squarings cover 35
# slots of a 32-entry table (slots past the table repeat its last address with
# a mask that never matches).
SEL_ENTRIES = 7
TABLE = 32


def half_square(out, src, dst):
    """Column sums of the square of the 10 limbs `src(i)` into locals
    `{dst}0..{dst}19` (cross products once, doubled, plus the diagonal)."""
    h = N // 2
    for c in range(2 * h):
        out.append(f"let mut {dst}{c} = zero;")
    for j in range(h):
        for i in range(j):
            out.append(f"{dst}{i + j} = lo({dst}{i + j}, {src(i)}, {src(j)});")
            out.append(f"{dst}{i + j + 1} = hi({dst}{i + j + 1}, {src(i)}, {src(j)});")
    for c in range(1, 2 * h - 1):
        out.append(f"{dst}{c} = add({dst}{c}, {dst}{c});")
    for i in range(h):
        out.append(f"{dst}{2 * i} = lo({dst}{2 * i}, {src(i)}, {src(i)});")
        out.append(f"{dst}{2 * i + 1} = hi({dst}{2 * i + 1}, {src(i)}, {src(i)});")


def absdiff(out, x, y, name, sign):
    """`{name}0..9` = |x - y| (10 normalised limbs each side) and `{sign}` all
    ones in the lanes where x < y: a borrow chain, then the complement plus
    one under that mask (no branch)."""
    h = N // 2
    out.append("let mut bw = zero;")
    for i in range(h):
        out.append(f"let t = add(sub({x(i)}, {y(i)}), bw);")
        out.append(f"let {name}d{i} = and(t, mask);")
        out.append("bw = sra52(t);")
    out.append(f"let {sign} = bw;")
    out.append(f"let flip = and({sign}, mask);")
    out.append(f"let mut cy = and({sign}, one);")
    for i in range(h):
        out.append(f"let t = add(xor({name}d{i}, flip), cy);")
        out.append(f"let {name}{i} = and(t, mask);")
        if i + 1 < h:
            out.append("cy = shr52(t);")


def half_mul(out, x, y, dst):
    """Column sums of the product of 10-limb `x(i)` and `y(j)` into locals
    `{dst}0..{dst}19`."""
    h = N // 2
    for c in range(2 * h):
        out.append(f"let mut {dst}{c} = zero;")
    for c0 in (0, h):
        for j in range(h):
            for i in range(h):
                if c0 <= i + j < c0 + h:
                    out.append(f"{dst}{i + j} = lo({dst}{i + j}, {x(i)}, {y(j)});")
                    out.append(f"{dst}{i + j + 1} = hi({dst}{i + j + 1}, {x(i)}, {y(j)});")


def combine(out, lo_half, hi_half, mid, mid_sub=False):
    """r = lo_half + (lo_half + hi_half + mid) 2^520 + hi_half 2^1040, column
    by column (`mid(k)` the middle term's column k, subtracted if `mid_sub`)."""
    h = N // 2
    for c in range(2 * N):
        terms = []
        if c < 2 * h:
            terms.append(f"{lo_half}{c}")
        if h <= c < 3 * h:
            k = c - h
            terms += [f"{lo_half}{k}", f"{hi_half}{k}", "-" + mid(k) if mid_sub else mid(k)]
        if c >= 2 * h:
            terms.append(f"{hi_half}{c - 2 * h}")
        expr = terms[0]
        for t in terms[1:]:
            expr = f"sub({expr}, {t[1:]})" if t.startswith("-") else f"add({expr}, {t})"
        out.append(f"let mut r{c} = {expr};")


def product_mul_karatsuba(out):
    """ab = a0 b0 + (a0 b0 + a1 b1 + (a0 - a1)(b1 - b0)) 2^520 + a1 b1 2^1040:
    three 10x10 products (300 instead of 400); the middle product's sign is
    applied per lane with a masked negation ((x ^ s) - s), columns signed as in
    the squaring."""
    h = N // 2
    absdiff(out, lambda i: f"a[{i}]", lambda i: f"a[{i + h}]", "ea", "sga")
    absdiff(out, lambda i: f"b[{i + h}]", lambda i: f"b[{i}]", "eb", "sgb")
    out.append("let sgm = xor(sga, sgb);")
    half_mul(out, lambda i: f"a[{i}]", lambda j: f"b[{j}]", "za")
    half_mul(out, lambda i: f"a[{i + h}]", lambda j: f"b[{j + h}]", "zb")
    half_mul(out, lambda i: f"ea{i}", lambda j: f"eb{j}", "zd")
    combine(out, "za", "zb", lambda k: f"sub(xor(zd{k}, sgm), sgm)")


def product_sqr_karatsuba(out):
    """a = a0 + a1 B (B = 2^520): a^2 = a0^2 + (a0^2 + a1^2 - (a0 - a1)^2) B
    + a1^2 B^2, three 10-limb squares (330 multiply-adds instead of 420).
    |a0 - a1| is found with a borrow chain and a masked negation (no branch);
    the middle columns may be negative (two's complement), so the reduction
    carries with arithmetic shifts."""
    h = N // 2
    absdiff(out, lambda i: f"a[{i}]", lambda i: f"a[{i + h}]", "e", "sg")
    half_square(out, lambda i: f"a[{i}]", "sa")
    half_square(out, lambda i: f"a[{i + h}]", "sb")
    half_square(out, lambda i: f"e{i}", "sd")
    combine(out, "sa", "sb", lambda k: f"sd{k}", mid_sub=True)


SHIFT = "shr52"


def reduction(out, shift="shr52"):
    global SHIFT
    SHIFT = shift
    out.append("let mut u = lo(zero, r0, k0);")
    for i in range(N):
        out.append(f"r{i} = lo(r{i}, u, m[0]);")
        out.append(f"r{i + 1} = hi(r{i + 1}, u, m[0]);")
        out.append(f"r{i + 1} = lo(r{i + 1}, u, m[1]);")
        out.append(f"r{i + 2} = hi(r{i + 2}, u, m[1]);")
        out.append(f"r{i + 1} = add(r{i + 1}, {SHIFT}(r{i}));")
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
            out.append(f"r{c + 1} = add(r{c + 1}, {SHIFT}(r{c}));")
        out.append(f"x[{k}] = and(r{c}, mask);")


def stitch(body):
    """Interleaves one limb's scan of SEL_ENTRIES entries into `body` at even
    intervals (20 groups)."""
    groups = []
    for l in range(N):
        g = [f"let mut s = and(sel[{l}], keep);"]
        for e in range(SEL_ENTRIES):
            g.append(f"s = or_and(s, t{e}[{l}], q{e});")
        g.append(f"sel[{l}] = s;")
        groups.append(g)
    # Part 0 starts the selection from zero (the mask `keep` clears `sel`), the
    # later parts add to it: every lane's entry is or-ed in exactly once.
    head = ["let keep = lane_mask(part != 0);"]
    for e in range(SEL_ENTRIES):
        head.append(f"let slot = part * {SEL_ENTRIES}" + (f" + {e};" if e else ";"))
        head.append(f"let q{e} = eq_vec(idx, slot as u64);")
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
    if any("one" in b for b in body):
        lines.append("    let one = _mm512_set1_epi64(1);")
    if not any(b.startswith("let mut r0 =") for b in body):
        lines += [f"    let mut r{c} = zero;" for c in range(2 * N)]
    lines += ["    " + s for s in body]
    lines.append("}")
    return "\n".join(lines)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    path = os.path.join(root, "src", "ifma", "kernel20.rs")
    sqr = ["let a = *x;"]
    product_sqr_karatsuba(sqr)
    reduction(sqr, "sra52")
    sqr_sel = stitch(sqr[:])
    mul = ["let a = *x;"]
    product_mul_karatsuba(mul)
    reduction(mul, "sra52")
    text = "\n".join(
        [
            "//! Generated by `crates/mbmath/tools/gen_ifma_kernel20.py`; do not edit by hand.",
            "//!",
            "//! 20-limb (1024-bit moduli) IFMA Montgomery products in place,",
            "//! `x = x * b / R mod m` and `x = x^2 / R mod m` with `R = 2^1040`:",
            "//! inputs `< 2 m`, result `< 2 m`, normalised 52-bit limbs. Straight-line",
            "//! code, every column sum a local: no branch and no address depends on",
            "//! the data (the stitched table scan addresses entries by the public",
            "//! part number; the secret window index only makes the lane masks).",
            "//! Both products are one Karatsuba step over signed column sums; the",
            "//! schedule and its bounds are described in the generator.",
            "",
            "use core::arch::x86_64::*;",
            "",
            "use super::ops::{add, and, eq_vec, hi, lane_mask, lo, or_and, shr52, sra52, sub, xor, MASK};",
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
