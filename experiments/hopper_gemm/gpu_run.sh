set -x
python -m pytest -q -p no:cacheprovider -m gpu test/test_hopper_gemm.py -x 2>&1 | tail -15
python tools/mirage_bench.py $OUT/contractions.md --contractions --no-compile-peer --workloads bmm_4x4096,abcd_cde,bshd_hdn,bhqd_bkhd,aebf_dfce,gemm_4096_fp16,gemm_8192_fp16,gemm_4096_bf16 2>&1 | tail -30
