# one device call: GPU tests, the contraction bench, ncu L2 hit rates, then torch.compile on the bmm
python -m pytest -q -p no:cacheprovider -m gpu test/test_hopper_gemm.py 2>&1 | tail -3
python tools/mirage_bench.py $OUT/contractions.md --contractions --no-compile-peer > $OUT/bench.log 2>&1; tail -4 $OUT/bench.log
timeout 40 ncu --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum -k regex:hopper_gemm python experiments/hopper_gemm/l2_ncu.py > $OUT/ncu.log 2>&1; grep -E "hopper_gemm|hit_rate|dram__|duration" $OUT/ncu.log | head -12
timeout 100 python tools/mirage_bench.py $OUT/bmm_compile.md --contractions --workloads bmm_4x4096 > $OUT/compile.log 2>&1; tail -3 $OUT/compile.log
