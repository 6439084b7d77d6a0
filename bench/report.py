#!/usr/bin/env python3
"""Markdown report of a bench/bench.py results file (what bench/RESULTS.md holds).

    .venv/bin/python bench/report.py [build/bench/results.json]

bench.py prints the same report at the end of each run; this regenerates it from the JSON
(e.g. after a sweep split into several --resume runs). Needs no torch.
"""

import json
import os
import statistics
import sys

# column order of the implementations (ours first); others follow in the order met
IMPL_ORDER = ["ours", "ours@base", "sdpa", "sdpa-bf16", "flex", "flex-bf16", "iree",
              "iree-default", "compiled", "eager", "gemms"]
AB_SLOWER = 1.03  # before/after: ours slower than the baseline by more than 3% is flagged
TARGET_N = 4096


def _fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def sgemm_of(results, chunk_index):
    """The reference sgemm GFLOP/s of a chunk: the better of its start and end runs."""
    c = results["chunks"][chunk_index]
    return max([c["sgemm_start"][0]] + ([c["sgemm_end"][0]] if c.get("sgemm_end") else []))


def ms(row, name):
    return row["impls"].get(name, {}).get("ms") if row else None


def find(results, workload, n, d, causal, pss):
    for r in results["rows"]:
        if (r["workload"], r["n"], r["d"], r["causal"], r["pass"]) == (workload, n, d, causal, pss):
            return r
    return None


def impl_names(rows):
    seen = {name for r in rows for name in r["impls"]}
    return [n for n in IMPL_ORDER if n in seen] + sorted(seen - set(IMPL_ORDER))


def status_of(entry):
    """(short cell text, reason or None) for an implementation that was not timed."""
    if "ms" in entry:
        return None, None
    for key, short in (("unsupported", "n/a"), ("skipped", "skip"), ("error", "error")):
        if key in entry:
            return short, entry[key]
    v = entry.get("verify")
    if v and not v["ok"]:
        return "MISMATCH", f"differs from ours: {v['rel_err']} (tol {v['tol']})"
    return "-", None


def row_line(row):
    """One log line per measured row."""
    head = (f"{row['workload']:<14} N={row['n']:<5} d={row['d']:<3} "
            f"causal={'yes' if row['causal'] else 'no ':<3} {row['pass']:<7}")
    ours = ms(row, "ours")
    parts = []
    for name in impl_names([row]):
        e = row["impls"][name]
        short, why = status_of(e)
        if short:
            parts.append(f"{name} {short}" + (f" ({why[:60]})" if why else ""))
        elif name == "ours":
            parts.append(f"ours {e['ms']:.1f} ms")
        else:
            parts.append(f"{name} {e['ms']:.1f} ms ({e['ms'] / ours:.2f}x)" if ours else
                         f"{name} {e['ms']:.1f} ms")
    return f"{head} {' | '.join(parts)} | others {_fmt(row.get('foreign_cpus'), '.2f')} CPUs"


def memory_line(res):
    if not res.get("ok"):
        return f"memory {res['impl']} N={res['n']}: did not complete: {res.get('error')}"
    ok, text = memory_verdict(res)
    return f"memory {'ok' if ok else 'NOT O(N)'}: {text}"


def memory_verdict(res):
    """O(N): extra peak RSS below a quarter of one N x N f32 buffer (+16 MiB allowance
    for allocator and thread-pool noise)."""
    if not res.get("ok"):
        return False, f"did not complete: {res.get('error')}"
    limit = 0.25 * res["nxn_f32_mib"] + 16.0
    ok = res["extra_peak_rss_mib"] < limit and res.get("finite", False)
    return ok, (f"{res['impl']} softmax fwd+bwd N={res['n']} d={res['d']} B=H=1: "
                f"{res['seconds']:.1f} s, extra peak RSS {res['extra_peak_rss_mib']:.1f} MiB "
                f"(O, dq, dk, dv = {res['outputs_mib']:.1f} MiB; one N×N f32 = "
                f"{res['nxn_f32_mib']:.0f} MiB; limit 1/4 of that + 16 = {limit:.0f} MiB)"
                + ("" if res.get("finite", True) else "; NON-FINITE output/gradients"))


# ----------------------------------------------------------------------------- targets

def check_targets(results):
    """DESIGN.md section 7's CPU targets, from same-row (same-run, interleaved) ratios."""
    out = []

    def add(target, config, value, need, rows, unit="x", higher=True):
        if value is None:
            status = "NOT RUN"
        else:
            status = "PASS" if (value >= need if higher else value <= need) else "FAIL"
        busy = [r.get("foreign_cpus") for r in rows if r and r.get("foreign_cpus") is not None]
        out.append({"target": target, "config": config, "value": value, "need": need,
                    "unit": unit, "status": status, "higher": higher,
                    "foreign_cpus": max(busy) if busy else None})

    def ratio(row, num, den):
        a, b = ms(row, num), ms(row, den)
        return a / b if a and b else None

    for pss in ("fwd", "fwd+bwd"):
        for d in (64, 128):
            r = find(results, "softmax", TARGET_N, d, False, pss)
            add(f"softmax {pss} ≥ 1.0× SDPA (CPU flash), f32", f"N={TARGET_N} d={d}",
                ratio(r, "sdpa", "ours"), 1.0, [r])
    r = find(results, "softmax", TARGET_N, 64, False, "fwd")
    g = r["impls"]["ours"].get("gflops") if r else None
    add("softmax fwd ≥ 0.6× the run's sgemm", f"N={TARGET_N} d=64",
        g / sgemm_of(results, r["chunk"]) if g else None, 0.6, [r])
    soft = find(results, "softmax", TARGET_N, 64, False, "fwd+bwd")
    for name in ("tanhmax", "multimax", "expressive", "sigmoid"):
        for d in (64, 128):
            r = find(results, name, TARGET_N, d, False, "fwd+bwd")
            if d == 64 or ms(r, "compiled"):
                add(f"{name} fwd+bwd ≥ 3× torch.compile'd composition", f"N={TARGET_N} d={d}",
                    ratio(r, "compiled", "ours"), 3.0, [r])
        r = find(results, name, TARGET_N, 64, False, "fwd+bwd")
        own, base = ms(r, "ours"), ms(soft, "ours")
        add(f"{name} fwd+bwd within 25% of our softmax (time ratio)", f"N={TARGET_N} d=64",
            own / base if own and base else None, 1.25, [r, soft], higher=False)
    full = find(results, "softmax", 16384, 64, False, "fwd")
    causal = find(results, "softmax", 16384, 64, True, "fwd")
    window = find(results, "sliding_window", 16384, 64, False, "fwd")
    add("causal fwd ≥ 1.8× faster than full", "softmax N=16384 d=64",
        ms(full, "ours") / ms(causal, "ours") if ms(full, "ours") and ms(causal, "ours") else None,
        1.8, [full, causal])
    add("sliding window 256 fwd ≥ 10× faster than full", "N=16384 d=64",
        ms(full, "ours") / ms(window, "ours") if ms(full, "ours") and ms(window, "ours") else None,
        10.0, [full, window])
    mem = [m for m in results.get("memory", []) if m.get("n") == 16384 and m.get("impl") == "ours"]
    extra = mem[0].get("extra_peak_rss_mib") if mem and mem[0].get("ok") else None
    out.append({"target": "O(N) extra memory, softmax fwd+bwd (peak RSS)", "config": "N=16384 d=64 B=H=1",
                "value": extra, "need": None, "unit": "MiB", "higher": False,
                "status": "NOT RUN" if not mem else ("PASS" if memory_verdict(mem[0])[0] else "FAIL"),
                "foreign_cpus": None})
    return out


# ----------------------------------------------------------------------------- markdown

def _table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def targets_table(targets):
    lines = []
    for t in targets:
        if t["unit"] == "MiB":
            value = _fmt(t["value"], ".1f") + " MiB"
            need = "< N×N/4 + 16 MiB"
        else:
            value = _fmt(t["value"], ".2f") + ("×" if t["value"] is not None else "")
            need = ("≥ " if t["higher"] else "≤ ") + f"{t['need']}"
        lines.append([t["target"], t["config"], value, need, f"**{t['status']}**",
                      _fmt(t["foreign_cpus"], ".2f")])
    return _table(["target (DESIGN.md §7, CPU)", "config", "same-run value", "need", "status",
                   "others' CPUs"], lines)


def floor_table(results):
    """The custom normalizers' fwd+bwd at the target shape against their compiled
    compositions, in FLOP rates relative to the run's sgemm. A row's `flops` count five
    matrix products (the forward's two, the backward's three); our kernels execute
    seven (the backward recomputes q·kᵀ and forms dP = dO·vᵀ), the compositions six
    (peer `gemms`: those products alone, at MKL's rate on these shapes). So 3× the
    composition needs seven products in a third of its time: where that rate is above
    what sgemm reaches on this machine, the target is out of reach of a kernel that
    recomputes, and only a kernel faster than MKL's own GEMM could reach it."""
    lines = []
    for name in ("tanhmax", "multimax", "expressive", "sigmoid"):
        r = find(results, name, TARGET_N, 64, False, "fwd+bwd")
        ours, comp, gemms = ms(r, "ours"), ms(r, "compiled"), ms(r, "gemms")
        if not (ours and comp and gemms):
            continue
        sgemm = sgemm_of(results, r["chunk"]) * 1e9
        product = r["flops"] / 5

        def rate(products, ms_):
            return products * product / (ms_ / 1e3) / sgemm
        lines.append([name, f"{ours:.0f}", f"{comp:.0f}", f"{comp / ours:.2f}×",
                      f"{gemms:.0f} ({rate(6, gemms):.2f})", f"{rate(7, ours):.2f}",
                      f"{rate(7, comp / 3):.2f}"])
    if not lines:
        return None
    return _table(["normalizer (fwd+bwd, N=4096 d=64)", "ours ms", "compiled ms",
                   "compiled ÷ ours", "its 6 GEMMs alone ms (rate ÷ sgemm)",
                   "ours: 7 products' rate ÷ sgemm", "3× would need ÷ sgemm"], lines)


def rows_table(results, rows):
    """One line per row: ours, then every peer as `ms (peer/ours ×)`; reasons as footnotes."""
    names = impl_names(rows)
    reasons, lines = [], []
    for r in rows:
        sg = sgemm_of(results, r["chunk"])
        o = r["impls"].get("ours", {})
        cells = []
        for name in names[1:]:
            e = r["impls"].get(name)
            if e is None:
                cells.append("")
                continue
            short, why = status_of(e)
            if short:
                if why:
                    if why not in reasons:
                        reasons.append(why)
                    short += f" [{reasons.index(why) + 1}]"
                cells.append(short)
            else:
                cells.append(f"{e['ms']:.1f} ({e['ms'] / o['ms']:.2f}×)" if o.get("ms") else
                             f"{e['ms']:.1f}")
        oshort, owhy = status_of(o) if o else ("-", None)
        if owhy:
            if owhy not in reasons:
                reasons.append(owhy)
            oshort += f" [{reasons.index(owhy) + 1}]"
        rss = [e.get("peak_extra_rss_mib") for n, e in r["impls"].items() if n != "ours"
               and e.get("peak_extra_rss_mib") is not None]
        lines.append([r["workload"], r["n"], r["d"], "yes" if r["causal"] else "no", r["pass"],
                      _fmt(o.get("ms"), ".1f", oshort or "-"), _fmt(o.get("gflops"), ".0f"),
                      _fmt(o["gflops"] / sg if o.get("gflops") else None, ".2f"), *cells,
                      f"{_fmt(o.get('peak_extra_rss_mib'), '.0f')} / {_fmt(max(rss) if rss else None, '.0f')}",
                      _fmt(r.get("foreign_cpus"), ".2f")])
    header = ["workload", "N", "d", "causal", "pass", "ours ms", "GFLOP/s", "/sgemm",
              *[f"{n} ms (÷ ours)" for n in names[1:]], "RSS+ MiB ours / peers max",
              "others' CPUs"]
    notes = "\n".join(f"[{i + 1}] {why}" for i, why in enumerate(reasons))
    return _table(header, lines) + ("\n\n" + notes if notes else "")


def paired_ratios(row, a, b):
    """ours/baseline per round: the i-th samples of two interleaved implementations were
    taken back to back, so their ratio cancels the machine's drift."""
    sa, sb = (row["impls"][n].get("samples_ms", []) for n in (a, b))
    return sorted(x / y for x, y in zip(sa, sb))


def ab_table(rows):
    """Before/after: ours vs ours@base per row, flagged where ours is > 3% slower (median
    of the per-round paired ratios; ± half their interquartile range)."""
    lines, worse = [], 0
    for r in rows:
        a, b = ms(r, "ours"), ms(r, "ours@base")
        if not (a and b):
            continue
        pr = paired_ratios(r, "ours", "ours@base")
        ratio = statistics.median(pr)
        spread = (pr[(3 * len(pr)) // 4] - pr[len(pr) // 4]) / 2
        flag = "**SLOWER**" if ratio > AB_SLOWER else ""
        worse += bool(flag)
        lines.append([r["workload"], r["n"], r["d"], "yes" if r["causal"] else "no", r["pass"],
                      f"{b:.2f}", f"{a:.2f}", f"{ratio:.3f} ± {spread:.3f}", len(pr), flag,
                      _fmt(r.get("foreign_cpus"), ".2f")])
    head = (f"{worse} of {len(lines)} rows are more than {round((AB_SLOWER - 1) * 100)}% slower "
            f"than the baseline (ours ÷ baseline: the median of the per-round ratios of "
            f"back-to-back calls, ± half their interquartile range).\n\n")
    return head + _table(["workload", "N", "d", "causal", "pass", "baseline ms", "ours ms",
                          "ours ÷ baseline", "rounds", "flag", "others' CPUs"], lines)


def compile_table(results):
    """Compile times (never inside the timings): per implementation and workload."""
    acc = {}
    for r in results["rows"]:
        for name, e in r["impls"].items():
            if e.get("compile_s") is not None:
                acc.setdefault((name, r["workload"]), []).append(
                    (e["compile_s"], e.get("inductor_cache")))
    lines = [[f"attn-compile ({key.split(':')[1]})", key.split(":")[0], 1, f"{a['compile_s']:.1f}",
              f"{a['compile_s']:.1f}", "attn.compile cache hit" if a["compile_s"] < 0.1 else ""]
             for key, a in results.get("artifacts", {}).items() if "compile_s" in a]
    for (name, workload), vals in sorted(acc.items()):
        secs = [v for v, _ in vals]
        caches = sorted({c for _, c in vals if c})
        note = ("inductor FX cache: " + "/".join(caches) if caches else
                "iree-compile (modules found in build/bench/iree not counted)"
                if name.startswith("iree") else "")
        lines.append([name, workload, len(vals), f"{min(secs):.1f}", f"{max(secs):.1f}", note])
    return _table(["implementation", "workload", "configs", "min s", "max s", "note"], lines)


def markdown(results):
    first = {}
    for r in results["rows"]:  # workloads in sweep order
        first.setdefault(r["workload"], len(first))
    rows = sorted(results["rows"], key=lambda r: (first[r["workload"]], r["d"], r["causal"], r["n"],
                                                  r["pass"]))
    out = []
    for c in results["chunks"]:
        m = c["meta"]
        sg = sgemm_of(results, c["index"])
        out.append(f"- run {c['index']}: {m['date']}, `{m['command']}`, git {m['git_commit']}; "
                   f"{m['cpu_model']} ({m['logical_cpus']} CPUs, {m['threads']} threads); "
                   f"torch {m['torch_version']}, BLAS {m['blas_detail']}; iree "
                   f"{m['versions'].get('iree-base-compiler')}; inductor vector ISA "
                   f"{m['inductor_vec_isa']}; sgemm {2048}³ f32 {sg:.0f} GFLOP/s; other processes "
                   f"used {_fmt(c.get('foreign_cpus_avg'), '.2f')} CPUs on average (load "
                   f"{m['loadavg_start'][0]:.1f} → {_fmt((c.get('loadavg_end') or [None])[0], '.1f')})"
                   + (f"; baseline compiler `{m['baseline_compiler']}`" if m.get("baseline_compiler") else ""))
    out += ["", "### Targets", "", targets_table(results.get("targets") or check_targets(results))]
    floor = floor_table(results)
    if floor:
        out += ["", "### The compositions' matrix products (peer `gemms`)", "",
                "FLOP rates as multiples of the run's sgemm (2048³): the compositions' six "
                "products alone (MKL, on these shapes), ours (seven products: the backward "
                "recomputes the scores), and the rate ours would need to be 3× faster than "
                "the compiled composition:", "", floor]
    if any("ours@base" in r["impls"] for r in rows):
        out += ["", "### Before/after (ours vs the baseline compiler, interleaved)", "", ab_table(rows)]
    out += ["", "### All rows", "",
            "Times are medians (ms) of interleaved repetitions after a warm-up; `(k×)` = that "
            "peer's time ÷ ours (above 1: ours is faster). bf16 peers are compared with our f32 "
            "kernel (we have no bf16 CPU kernels). `gemms` is not attention but the "
            "compositions' matrix products alone (not compared with ours): its ratio is a lower "
            "bound on how much faster ours is than such a composition. `others' CPUs` = CPUs "
            "other processes kept busy during the row.", "", rows_table(results, rows),
            "", "### Compile times (excluded from the timings)", "", compile_table(results)]
    backends = sorted({tuple(e["backend"]) for r in rows for n, e in r["impls"].items()
                       if e.get("backend")})
    if backends:
        out += ["", "SDPA kernels that ran (recorded per row): " +
                "; ".join(", ".join(b) for b in backends)]
    checked = [(r, n, e["verify"]) for r in rows for n, e in r["impls"].items()
               if n != "ours" and e.get("verify")]
    if checked:
        worst = {}
        for r, n, v in checked:
            if v["rel_err"]:
                worst[n] = max(worst.get(n, 0.0), max(v["rel_err"].values()))
        bad = [f"{r['workload']} N={r['n']} d={r['d']} {r['pass']} {n}" for r, n, v in checked
               if not v["ok"]]
        out += ["", "Peers checked against ours before timing (max|err|/max|ours| over O and "
                "gradients, worst per peer): " + ", ".join(f"{n} {w:.1e}" for n, w in worst.items())
                + (f"; MISMATCH (not timed): {', '.join(bad)}" if bad else "; all within tolerance")]
    if results.get("sanity"):
        worst = {w: max(v["rel_err"].values()) for w, s in results["sanity"].items()
                 for v in s.values() if v["rel_err"]}
        bad = [w for w, s in results["sanity"].items() if not all(v["ok"] for v in s.values())]
        out += ["", "Ours (f32) vs the eager composition in float64 (N = 256, O and every "
                "gradient, causal and not): worst " +
                ", ".join(f"{w} {e:.1e}" for w, e in worst.items()) +
                (f"; MISMATCH: {', '.join(bad)}" if bad else "")]
    if results.get("memory"):
        out += ["", "Peak RSS (fresh process):", ""] + [f"- {memory_line(m)}" for m in results["memory"]]
    return "\n".join(out)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench", "results.json")
    with open(path) as f:
        print(markdown(json.load(f)))


if __name__ == "__main__":
    main()
