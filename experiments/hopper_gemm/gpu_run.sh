# one device call: the GPU tests of both contraction paths, then the cluster A/B
timeout 90 python -m pytest -q -p no:cacheprovider -m gpu test/codegen/test_hopper_gemm.py test/passes/test_contraction_tb.py 2>&1 | tail -4
timeout 80 python experiments/hopper_gemm/cluster_ab.py > $OUT/cluster_ab.log 2>&1; tail -14 $OUT/cluster_ab.log
