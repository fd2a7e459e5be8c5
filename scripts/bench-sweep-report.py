#!/usr/bin/env python3
"""The report of scripts/bench-sweep.sh: medians, the markdown table, the SVG plots.

    bench-sweep-report.py RESULTS_DIR PLOTS_DIR COMMAND MACHINE > table.md

RESULTS_DIR holds what bench-sweep.sh measured:
  results.txt         "OP SIZE WHO RUN GBIT_S" (OP write/read/send, or tcp for iperf3)
  latency.txt         "WHO 64 RUN MEDIAN_US" (iwarp, sockperf)
  send_lat.R.json     iwarp-perf's JSON (with the "cdf" of the half round trips)
  sockperf.R.log      sockperf's --full-log (per-message half round trips)
  ucx-lat.R.txt       "RANK US" from ucx_perftest tag_lat -R RANK
The plots (size-sweep.svg, latency-cdf.svg) are drawn by gnuplot from data files written
next to them; the plotted latency run is the one with the median iwarp-perf median.
"""

import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

OPS = [("write", "WRITE", "ucp_put_bw"), ("read", "READ", "ucp_get"), ("send", "SEND", "tag_bw")]


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def median(xs):
    return statistics.median(xs) if xs else 0.0


def ratio(a, b):
    return a / b if b > 0 else 0.0


def read_results(d):
    # (op, size, who) -> [values of each run]
    res = defaultdict(list)
    with open(os.path.join(d, "results.txt")) as f:
        for line in f:
            op, size, who, _run, v = line.split()
            res[(op, int(size), who)].append(float(v))
    return res


def median_run(d, who):
    """The run whose median latency is the median of the runs'."""
    runs = []
    with open(os.path.join(d, "latency.txt")) as f:
        for line in f:
            w, _size, run, v = line.split()
            if w == who:
                runs.append((float(v), run))
    runs.sort()
    return runs[(len(runs) - 1) // 2][1] if runs else None


def cdf_of_log(path, points=400):
    """(fraction, us) points of sockperf's per-message log."""
    lat = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 4 and parts[0].isdigit():
                lat.append(float(parts[3]))
    lat.sort()
    if not lat:
        return []
    n = len(lat)
    step = max(1, n // points)
    idx = list(range(0, n, step)) + [n - 1]
    return [(i / (n - 1) if n > 1 else 1.0, lat[i]) for i in idx]


def write_dat(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(f"{x}" for x in r) + "\n")


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    d, plots, cmd, machine = sys.argv[1:5]
    os.makedirs(plots, exist_ok=True)
    res = read_results(d)
    sizes = sorted({s for (_, s, _) in res})
    runs = max((len(v) for v in res.values()), default=0)
    out = []
    out.append(f"Run of {subprocess.run(['date', '-u', '+%Y-%m-%d'], capture_output=True, text=True).stdout.strip()} ({machine}): `{cmd}`")
    out.append(f"(medians of {runs} runs, Gbit/s of payload; iwarpd: `iwarp-perf` over one iwarpd, "
               "2 memif ports, 1 dataplane core, MTU 9000, MPA CRC on; iperf3 one stream of writes of "
               "the size; UCX over TCP with the same number of operations outstanding)")
    out.append("")
    out.append("| size | WRITE iwarpd | READ iwarpd | SEND iwarpd | iperf3 | UCX put | UCX get | UCX tag | iwarpd / best peer (W, R, S) | target 7 (above 4 KiB) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    missed = 0
    for s in sizes:
        tcp = median(res[("tcp", s, "iperf3")])
        iw = {op: median(res[(op, s, "iwarp")]) for op, _, _ in OPS}
        ux = {op: median(res[(op, s, "ucx")]) for op, _, _ in OPS}
        rat = {op: ratio(iw[op], max(tcp, ux[op])) for op, _, _ in OPS}
        if s > 4096:
            below = [name for op, name, _ in OPS if rat[op] < 1.0]
            verdict = "missed: " + ", ".join(below) if below else "met"
            missed += bool(below)
        else:
            verdict = "(no target)"
        out.append(
            f"| {size_label(s)} | {iw['write']:.2f} | {iw['read']:.2f} | {iw['send']:.2f} | {tcp:.2f} | "
            f"{ux['write']:.2f} | {ux['read']:.2f} | {ux['send']:.2f} | "
            f"{rat['write']:.2f}, {rat['read']:.2f}, {rat['send']:.2f} | {verdict} |")
    for op, name, ucx in OPS:
        write_dat(os.path.join(plots, f"sweep-{op}.dat"),
                  [(s, median(res[(op, s, "iwarp")]), median(res[("tcp", s, "iperf3")]),
                    median(res[(op, s, "ucx")])) for s in sizes])

    # Latency: the median runs' distributions.
    lat_lines = []
    iw_run = median_run(d, "iwarp")
    sp_run = median_run(d, "sockperf")
    meds = defaultdict(list)
    with open(os.path.join(d, "latency.txt")) as f:
        for line in f:
            w, _s, _r, v = line.split()
            meds[w].append(float(v))
    ucx_meds = []
    for r in range(1, runs + 1):
        p = os.path.join(d, f"ucx-lat.{r}.txt")
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    rank, us = line.split()
                    if float(rank) == 50:
                        ucx_meds.append(float(us))
    if iw_run:
        with open(os.path.join(d, f"send_lat.{iw_run}.json")) as f:
            cdf = json.load(f)["results"][0].get("cdf", [])
        write_dat(os.path.join(plots, "cdf-iwarp.dat"), [(us, p) for p, us in cdf])
    if sp_run:
        write_dat(os.path.join(plots, "cdf-sockperf.dat"),
                  [(us, p) for p, us in cdf_of_log(os.path.join(d, f"sockperf.{sp_run}.log"))])
    ucx_run = None
    if ucx_meds:
        m = sorted(ucx_meds)[(len(ucx_meds) - 1) // 2]
        for r in range(1, runs + 1):
            p = os.path.join(d, f"ucx-lat.{r}.txt")
            if os.path.exists(p) and any(float(a) == 50 and float(b) == m
                                         for a, b in (l.split() for l in open(p))):
                ucx_run = r
                break
        with open(os.path.join(d, f"ucx-lat.{ucx_run}.txt")) as f:
            write_dat(os.path.join(plots, "cdf-ucx.dat"),
                      [(float(b), float(a) / 100) for a, b in (l.split() for l in f) if float(b) > 0])
    iw_med, sp_med, ux_med = median(meds["iwarp"]), median(meds["sockperf"]), median(ucx_meds)
    out.append("")
    out.append("| 64 B half round trip, median | iwarp-perf send_lat | sockperf ping-pong | UCX tag_lat | iwarpd / sockperf (target <= 0.5) | iwarpd / UCX (target <= 1) |")
    out.append("|---|---|---|---|---|---|")
    out.append(f"| medians of {runs} runs | {iw_med:.2f} us | {sp_med:.2f} us | {ux_med:.2f} us | "
               f"{ratio(iw_med, sp_med):.2f} ({'met' if 0 < ratio(iw_med, sp_med) <= 0.5 else 'missed'}) | "
               f"{ratio(iw_med, ux_med):.2f} ({'met' if 0 < ratio(iw_med, ux_med) <= 1 else 'missed'}) |")
    out.append("")
    out.append(f"Target 7: {'met at every size above 4 KiB' if missed == 0 else f'missed at {missed} of the sizes above 4 KiB'}. "
               f"Plots: `size-sweep.svg`, `latency-cdf.svg` (latency of run {iw_run} for iwarp-perf, "
               f"{sp_run} for sockperf, {ucx_run} for UCX: each the run with the median median; "
               "UCX's points come from one `tag_lat -R RANK` run per rank).")

    tics = ", ".join(f'"{size_label(s).replace(" ", "")}" {s}' for s in sizes)
    panels = "\n".join(
        f"""set title "{name}"
plot "{plots}/sweep-{op}.dat" using 1:2 with linespoints lw 2 pt 7 title "iwarpd {name}", \\
     "" using 1:3 with linespoints lw 2 pt 5 title "kernel TCP (iperf3)", \\
     "" using 1:4 with linespoints lw 2 pt 9 title "UCX over TCP ({ucx})"
""" for op, name, ucx in OPS)
    gnuplot(f"""set terminal svg size 1200,420 dynamic font "sans,11" background "white"
set output "{plots}/size-sweep.svg"
set termoption noenhanced
set offsets graph 0.04, graph 0.04, 0, 0
set multiplot layout 1,3 title "Goodput by message size, medians of {runs} runs ({machine})"
set logscale x 2
set xtics ({tics}) rotate by -45
set xlabel "message size"
set ylabel "Gbit/s"
set yrange [0:*]
set grid
set key top left font ",9"
{panels}
unset multiplot
""")
    series = []
    if iw_run:
        series.append(f'"{plots}/cdf-iwarp.dat" using 1:2 with lines lw 2 title "iwarpd send_lat (shm verbs)"')
    if sp_run:
        series.append(f'"{plots}/cdf-sockperf.dat" using 1:2 with lines lw 2 title "kernel TCP (sockperf ping-pong)"')
    if ucx_run:
        series.append(f'"{plots}/cdf-ucx.dat" using 1:2 with points pt 7 ps 1.2 title "UCX over TCP (tag_lat, one run per percentile)"')
    if series:
        gnuplot(f"""set terminal svg size 800,480 dynamic font "sans,11" background "white"
set output "{plots}/latency-cdf.svg"
set termoption noenhanced
set title "64 B half round trip, distribution ({machine})"
set logscale x 10
set xlabel "microseconds"
set ylabel "fraction of messages at or below"
set yrange [0:1]
set grid
set key bottom right
plot {", ".join(series)}
""")
    print("\n".join(out))
    zeros = [k for k, v in res.items() if 0.0 in v]
    zeros += [f"{w} latency" for w, v in meds.items() if 0.0 in v] + (["UCX latency"] if 0.0 in ucx_meds else [])
    if zeros:
        print(f"bench-sweep: {len(zeros)} figures are 0 (their program failed): {zeros}", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
