"""Seed-004 contraction optimizer (passes/contraction/optimizer.py): split_dim, fuse_dims,
permute_dims and make_executable on configs, each result checked against the four rules and
against numpy evaluating the einsum (helpers in test_contraction.py)."""

from __future__ import annotations

import math

import pytest
from test_contraction import EINSUMS, GOOD, SMALL_TARGET, check_computes, make_config

from mirage_xdsl.dialects.contraction.config import (
    DimType,
    ExecType,
    generate_config,
    verify,
)
from mirage_xdsl.passes.contraction.optimizer import (
    H100,
    KIB,
    MIB,
    Optimizer,
    TargetModel,
    choose_l2_group,
    choose_prim_tile,
    prim_tile_bytes,
)

C, M, N, K = DimType.C, DimType.M, DimType.N, DimType.K
SEQ, PAR, PRIM = ExecType.SEQ, ExecType.PAR, ExecType.PRIM


def test_split_dim_inserts_outer_and_inner():
    optimizer = Optimizer(generate_config("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)]))
    optimizer.split_dim(3, 4, 16)  # k = 64 -> 4 x 16
    config = optimizer.config
    assert config.dim_sizes == [2, 32, 16, 4, 16]
    assert config.dim_types == [C, M, N, K, K]
    assert config.exec_types == [SEQ] * 5
    assert config.strides == [[2048, 64, 0, 16, 1], [1024, 0, 1, 256, 16], [512, 16, 1, 0, 0]]
    check_computes("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)], config)


def test_split_dim_inherits_exec_type_and_keeps_the_input_config():
    config = make_config(*GOOD, sizes=[2, 2, 2, 8, 2, 2, 2])
    optimizer = Optimizer(config)
    optimizer.split_dim(3, 2, 4)
    assert optimizer.config.exec_types[3:5] == [SEQ, SEQ]
    assert optimizer.config.dim_types[3:5] == [K, K]
    assert config.dim_sizes == [2, 2, 2, 8, 2, 2, 2]  # the caller's config is not modified


@pytest.mark.parametrize(
    "args, message",
    [
        ((3, 3, 16), r"cannot split dimension 3 \(K, size 64\) into 3 x 16 = 48; outer_size \* inner_size must equal 64"),
        ((3, 0, 64), "outer_size must be a positive integer"),
        ((3, 64, -1), "inner_size must be a positive integer"),
        ((4, 1, 1), r"dim_id must be a dimension index in 0\.\.3, got 4"),
        ((-1, 1, 1), "dim_id must be a dimension index"),
    ],
)
def test_split_dim_errors(args, message):
    optimizer = Optimizer(generate_config("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)]))
    before = optimizer.config.dim_sizes[:]
    with pytest.raises(ValueError, match=message):
        optimizer.split_dim(*args)
    assert optimizer.config.dim_sizes == before


# -- fuse_dims (seed Task 3b) -------------------------------------------------------------


def test_fuse_dims_merges_contiguous_dims():
    shapes = [(2, 3, 4, 5), (4, 5, 6)]
    optimizer = Optimizer(generate_config("abcd,cde->abe", shapes))  # dims a b e c d
    optimizer.fuse_dims(3, 4)  # c, d: adjacent in A and in B
    optimizer.fuse_dims(0, 1)  # a, b: adjacent in A and in Out
    config = optimizer.config
    assert config.dim_types == [M, N, K]
    assert config.dim_sizes == [6, 6, 20]
    assert config.strides == [[20, 0, 1], [0, 1, 6], [6, 1, 0]]
    check_computes("abcd,cde->abe", shapes, config)


def test_fuse_dims_inherits_a_and_accepts_either_order():
    shapes = [(2, 3, 4, 5), (4, 5, 6)]
    optimizer = Optimizer(generate_config("abcd,cde->abe", shapes))
    optimizer.config.exec_types = [PAR, SEQ, PAR, SEQ, PRIM]
    optimizer.fuse_dims(4, 3)  # inner first: stride[a] * size[a] == stride[b] form
    assert optimizer.config.dim_sizes == [2, 3, 6, 20]
    assert optimizer.config.exec_types == [PAR, SEQ, PAR, PRIM]  # from dim_id_a (4)
    check_computes("abcd,cde->abe", shapes, optimizer.config)


def test_fuse_dims_undoes_split_dim():
    config = generate_config("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)])
    optimizer = Optimizer(config)
    optimizer.split_dim(1, 4, 8)
    optimizer.fuse_dims(1, 2)
    assert optimizer.config == config


def test_fuse_dims_rejects_non_adjacent_dims():
    optimizer = Optimizer(generate_config("aebf,dfce->abcd", [(2, 3, 4, 5), (6, 5, 7, 3)]))  # a b c d e f
    with pytest.raises(ValueError, match=r"cannot fuse dimension 0 \(M, size 2\) with dimension 1 \(M, size 4\): they are not adjacent in tensor A"):
        optimizer.fuse_dims(0, 1)


def test_fuse_dims_rejects_a_dim_absent_from_a_tensor_the_other_indexes():
    # m (stride 0 in B) with k (stride 1 in A, 3 in B): adjacent in A, but B has only k
    optimizer = Optimizer(generate_config("mk,kn->mn", [(2, 3), (3, 4)]))  # dims m n k
    assert optimizer.config.strides[0] == [3, 0, 1]  # adjacent in A by the seed's formula
    with pytest.raises(ValueError, match=r"only dimension 2 indexes tensor B \(the other has stride 0 there\)"):
        optimizer.fuse_dims(0, 2)


def test_fuse_dims_rejects_opposite_nesting_in_two_tensors():
    # A = x y, B = y x: x, y are contiguous in both, but nested oppositely
    config = make_config([K, K, M, N], [SEQ] * 4, sizes=[2, 3, 1, 1], strides=[[3, 1, 1, 0], [1, 2, 0, 1], [0, 0, 1, 1]])
    optimizer = Optimizer(config)
    with pytest.raises(ValueError, match="nested in opposite orders in different tensors"):
        optimizer.fuse_dims(0, 1)


def test_fuse_dims_rejects_bad_indices():
    optimizer = Optimizer(generate_config("mk,kn->mn", [(2, 3), (3, 4)]))
    with pytest.raises(ValueError, match="cannot fuse dimension 1 with itself"):
        optimizer.fuse_dims(1, 1)
    with pytest.raises(ValueError, match=r"dim_id_b must be a dimension index in 0\.\.2, got 3"):
        optimizer.fuse_dims(0, 3)


# -- permute_dims (seed Task 3c) ----------------------------------------------------------


def test_permute_dims_follows_torch_permute():
    shapes = [(2, 32, 64), (2, 64, 16)]
    optimizer = Optimizer(generate_config("cmk,ckn->cmn", shapes))
    optimizer.config.exec_types = [PAR, SEQ, PRIM, PAR]
    optimizer.permute_dims([3, 0, 2, 1])  # new dim i = old dim permutation[i]
    config = optimizer.config
    assert config.dim_types == [K, C, N, M]
    assert config.exec_types == [PAR, PAR, PRIM, SEQ]
    assert config.dim_sizes == [64, 2, 16, 32]
    assert config.strides == [[1, 2048, 0, 64], [16, 1024, 1, 0], [0, 512, 1, 16]]
    check_computes("cmk,ckn->cmn", shapes, config)
    optimizer.permute_dims([-3, -2, -1, 0])  # negative dims count from the end, as in torch
    assert optimizer.config.dim_types == [C, N, M, K]
    assert optimizer.config.dim_sizes == [2, 16, 32, 64]


@pytest.mark.parametrize(
    "permutation, message",
    [
        ([0, 1, 2], "has 3 entries; the config has 4 dimensions"),
        ([0, 1, 2, 2], r"repeats dimension\(s\) \[2\]"),
        ([0, 1, 2, -4], r"repeats dimension\(s\) \[0\]"),
        ([0, 1, 2, 4], r"dimension indices in -4\.\.3"),
        ([0, 1, 2, 1.0], "dimension indices"),
    ],
)
def test_permute_dims_rejects_non_permutations(permutation, message):
    optimizer = Optimizer(generate_config("cmk,ckn->cmn", [(2, 32, 64), (2, 64, 16)]))
    with pytest.raises(ValueError, match=message):
        optimizer.permute_dims(permutation)
    assert optimizer.config.dim_types == [C, M, N, K]


# -- make_executable (seed Task 3d, 4b) ---------------------------------------------------


def test_make_executable_seed_task4_layout_and_sizes():
    """cmk,ckn->cmn, c = 4, m = n = k = 4096 on the H100 model."""
    optimizer = Optimizer(generate_config("cmk,ckn->cmn", [(4, 4096, 4096), (4, 4096, 4096)]))
    explanation = optimizer.make_executable()
    config = optimizer.config
    # [c, m_outer, n_outer, m_l2, n_l2, k_outer, m_prim, n_prim, k_prim]
    assert config.dim_types == [C, M, N, M, N, K, M, N, K]
    assert config.exec_types == [PAR] * 5 + [SEQ] + [PRIM] * 3
    assert config.dim_sizes == [4, 1, 2, 32, 16, 16, 128, 128, 256]
    # the PRIM tile: 2*(128*256 + 256*128) + 4*128*128 = 196608 bytes <= 227 KiB; the next
    # larger power-of-two tile (doubling any extent) no longer fits
    assert prim_tile_bytes(128, 128, 256, 2, 4) == 196608 <= H100.smem_per_block
    assert prim_tile_bytes(128, 128, 512, 2, 4) > H100.smem_per_block
    assert prim_tile_bytes(256, 128, 256, 2, 4) > H100.smem_per_block
    # the L2 group: 32 A panels + 16 B panels of 128 x 4096 fp16 (1 MiB) = 48 MiB <= 50 MiB;
    # 32 x 32 would need 64 MiB
    assert optimizer.blocking.m_l2 * optimizer.blocking.n_l2 == 512
    assert any("m_prim = 128, n_prim = 128, k_prim = 256" in line for line in explanation)
    assert any("m_l2 = 32, n_l2 = 16" in line and "48.0 MiB" in line for line in explanation)
    assert optimizer.explanation == explanation
    optimizer.verify()


def test_make_executable_follows_the_target_model():
    config = generate_config("cmk,ckn->cmn", [(4, 4096, 4096), (4, 4096, 4096)])
    # the seed's own machine: 48 KiB shared memory, 24 MiB L2 -> 64 x 64 x 128 tiles
    seed_machine = TargetModel(smem_per_block=48 * KIB, l2_bytes=24 * MIB, num_sms=58)
    optimizer = Optimizer(config)
    optimizer.make_executable(seed_machine)
    b = optimizer.blocking
    assert (b.m_prim, b.n_prim, b.k_prim) == (64, 64, 128)  # the seed's Task 4b answer
    # panels are 64 x 4096 fp16 = 0.5 MiB, so m_l2 + n_l2 <= 48: the seed's 32 x 16
    assert (b.m_l2, b.n_l2) == (32, 16)
    optimizer.verify()


@pytest.mark.parametrize("einsum, shapes", EINSUMS)
@pytest.mark.parametrize("target", [H100, SMALL_TARGET], ids=["h100", "small"])
def test_make_executable_verifies_and_still_computes_the_einsum(einsum, shapes, target):
    optimizer = Optimizer(generate_config(einsum, shapes))
    optimizer.make_executable(target)
    config = optimizer.config
    verify(config)
    assert config.exec_types[-3:] == [PRIM] * 3
    assert [config.dim_types[i] for i in range(-3, 0)] == [M, N, K]
    b = optimizer.blocking
    assert config.dim_sizes[-3:] == [b.m_prim, b.n_prim, b.k_prim]
    assert prim_tile_bytes(b.m_prim, b.n_prim, b.k_prim, 2, target.acc_bytes) <= target.smem_per_block
    assert all(s & (s - 1) == 0 for s in config.dim_sizes[-3:])  # cuTile tiles are powers of two
    check_computes(einsum, shapes, config)


def test_make_executable_fuses_contiguous_dims():
    optimizer = Optimizer(generate_config("bshd,hdn->bsn", [(2, 512, 16, 64), (16, 64, 1024)]))
    explanation = optimizer.make_executable()
    # b*s = 1024 (M) and h*d = 1024 (K) were fused, so it is a plain 1024^3 GEMM
    assert sum(line.startswith("fused") for line in explanation) == 2
    assert optimizer.config.dim_types == [M, N, M, N, K, M, N, K]
    assert optimizer.config.dim_sizes == [1, 1, 8, 8, 4, 128, 128, 256]


def test_make_executable_keeps_unfusable_dims_par_and_seq():
    shapes = [(2, 3, 8, 4), (6, 4, 16, 3)]
    optimizer = Optimizer(generate_config("aebf,dfce->abcd", shapes))  # a b c d e f
    optimizer.make_executable(SMALL_TARGET)
    config = optimizer.config
    par = [t for t, e in zip(config.dim_types, config.exec_types) if e is PAR]
    seq = [t for t, e in zip(config.dim_types, config.exec_types) if e is SEQ]
    assert par == [M, N, M, N, M, N]  # a, d, then m_outer, n_outer, m_l2, n_l2
    assert seq == [K, K]  # e, then k_outer
    assert math.prod(config.dim_sizes) == math.prod((2, 3, 8, 4, 6, 16))


def test_make_executable_chooses_divisors_for_awkward_sizes():
    shapes = [(96, 40), (40, 7)]  # N = 7: no power-of-two divisor but 1
    optimizer = Optimizer(generate_config("mk,kn->mn", shapes))
    explanation = optimizer.make_executable(SMALL_TARGET)
    b = optimizer.blocking
    assert 96 % b.m_prim == 0 and 7 % b.n_prim == 0 and 40 % b.k_prim == 0
    assert b.n_prim == 1
    assert any("warning: the N tile is only 1" in line for line in explanation)
    check_computes("mk,kn->mn", shapes, optimizer.config)


def test_make_executable_rejects_non_gemm_contractions_and_keeps_the_config():
    optimizer = Optimizer(generate_config("m,n->mn", [(4,), (8,)]))
    before = optimizer.config
    with pytest.raises(ValueError, match=r"no K dimension, but the GEMM primitive needs .*\(rule 4\)"):
        optimizer.make_executable()
    assert optimizer.config == before


def test_choose_prim_tile_raises_when_nothing_fits():
    with pytest.raises(ValueError, match="cannot hold even a 1x1x1 PRIM tile"):
        choose_prim_tile({M: 64, N: 64, K: 64}, TargetModel(smem_per_block=4), in_bytes=2)


def test_choose_l2_group_falls_back_to_no_blocking():
    m_l2, n_l2, lines = choose_l2_group(8, 8, 128, 128, 1 << 20, TargetModel(l2_bytes=MIB), in_bytes=2)
    assert (m_l2, n_l2) == (1, 1)
    assert any("exceeds L2" in line for line in lines)


# -- the report CLI (seed Task 4) ---------------------------------------------------------
