#!/usr/bin/env bash
# Device call BE (session 14), after call BD. At 1024^3 our kernel is shorter than cuBLAS's nvjet
# under Nsight Compute (call BA, an H100: median 7.30 against 7.58 us), yet the event-timed suite
# has them at parity: events add 1.27 us to ours and 1.12 us to nvjet. Nsight flushes and
# invalidates the caches before each kernel it profiles; the suite instead memsets a 256 MiB
# buffer before each sample, which leaves the L2 full of dirty lines the GEMM must evict.
# This call profiles the suite itself (rtx-bench, cuBLAS alternating with each row) at 1024^3
# bf16 and f16, with Nsight's cache control off, so each kernel is measured in the state the
# events see: (1) durations + launch statistics (one pass), (2) DRAM read/write bytes and L2
# reads, (3) the same durations with Nsight's own flush, (4) a plain event-timed suite run.
# Build: cargo xtask gpu-bundle --out .devrun --tests none
# Run: B=$PWD/.devrun bash scripts/h200/callBE.sh (about 4 minutes; timeout_s 420).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBE.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
S="--no-progress --suite gemm --gemm-shapes 1024x1024x1024"
for d in bf16 f16; do
  timeout 60 $B/rtx-bench --out $R/b_$d $S --gemm-dtypes $d > $R/events_$d.log 2>&1
  echo "events $d rc=$?"; grep -E '^\| (rtx-wgmma-default|cublas) ' $R/events_$d.log | cut -c1-110
  for k in rtx_wgmma nvjet; do
    timeout 120 $NCU --cache-control none --clock-control none -k "regex:^$k" --launch-count 60 \
      --section LaunchStats --metrics gpu__time_duration.sum --csv --page raw $B/rtx-bench --out $R/n1_$d $S --gemm-dtypes $d > $R/ncu_dirty_${d}_$k.csv 2> $R/ncu_dirty_${d}_$k.err
    echo "ncu dirty $d $k rc=$?"
    timeout 120 $NCU --cache-control none --clock-control none -k "regex:^$k" --launch-count 40 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__cycles_active.avg \
      --csv --page raw $B/rtx-bench --out $R/n2_$d $S --gemm-dtypes $d > $R/ncu_dram_${d}_$k.csv 2> $R/ncu_dram_${d}_$k.err
    echo "ncu dram $d $k rc=$?"
    timeout 120 $NCU --clock-control none -k "regex:^$k" --launch-count 60 \
      --metrics gpu__time_duration.sum --csv --page raw $B/rtx-bench --out $R/n3_$d $S --gemm-dtypes $d > $R/ncu_clean_${d}_$k.csv 2> $R/ncu_clean_${d}_$k.err
    echo "ncu clean $d $k rc=$?"
  done
  rm -rf $R/b_$d $R/n1_$d $R/n2_$d $R/n3_$d; pack
done
python3 - "$R" <<'PY'
import csv, sys, statistics, glob, os
r = sys.argv[1]
for f in sorted(glob.glob(os.path.join(r, "ncu_*.csv"))):
    rows = list(csv.DictReader(l for l in open(f) if l.startswith('"')))
    if not rows: print(os.path.basename(f), "no rows"); continue
    by = {}
    for x in rows[1:] if rows and rows[0].get("ID") == "" else rows:
        k = x["Kernel Name"][:70]
        by.setdefault(k, []).append(x)
    for k, xs in by.items():
        out = [os.path.basename(f), k, f"n={len(xs)}"]
        for m in ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                  "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
                  "sm__cycles_active.avg", "launch__grid_size", "launch__block_size", "launch__cluster_max_active",
                  "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic", "launch__shared_mem_config_size"]:
            v = [float(x[m].replace(",", "")) for x in xs if m in x and x[m].replace(",", "").replace(".", "").isdigit()]
            if v: out.append(f"{m.split('__')[1]}={statistics.median(v):g}")
        print(" ".join(out))
PY
date -u +"end %T" >> $R/smi.txt
pack
